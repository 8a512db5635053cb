"""Plugins that intercept messages by event and priority.

A plugin subclasses :class:`Plugin` and defines handlers named after :class:`Event` values; the
bridge builds a :class:`PluginRegistry` from its config and dispatches each event of a message's
life through it. This package may use ``memory`` and ``channels.base`` but never the bridge: the
bridge hands its services over as ``EventContext.host``.
"""

from __future__ import annotations

from .base import Action, Event, EventContext, Plugin, PluginError, handles
from .builtin import BUILTIN_PLUGINS
from .registry import ENTRY_POINT_GROUP, PluginRegistry

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "Action",
    "Event",
    "EventContext",
    "Plugin",
    "PluginError",
    "PluginRegistry",
    "handles",
]
