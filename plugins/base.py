"""What a plugin is: the events it may handle, the actions it answers with, its context.

A plugin is a plain class. It names itself, picks a priority, optionally declares a pydantic
config schema, and defines a handler for any event it cares about: a method named after the
event (``on_receive``, ``on_handle``, ``on_decorate``, ``on_send``), sync or async, taking an
:class:`EventContext` and returning an :class:`Action` (or None, which means CONTINUE). Nothing
registers handlers: having the method is enough, so a plugin reads like the behaviour it adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel

from channels.base import IncomingMessage, Reply


class Event(StrEnum):
    """The points in a message's life where plugins run, in the order they happen.

    The value is the handler's method name, so lookup needs no table to keep in sync.
    """

    RECEIVE = "on_receive"
    HANDLE = "on_handle"
    DECORATE = "on_decorate"
    SEND = "on_send"


class Action(Enum):
    """What a handler wants to happen next."""

    #: Go on with the next plugin.
    CONTINUE = "continue"
    #: Skip the other plugins for this event; the default behaviour (the agent) still runs.
    BREAK = "break"
    #: Stop everything, default included: ``ctx.reply`` is final. On ``on_receive`` the message
    #: is dropped.
    BREAK_PASS = "break_pass"


@dataclass
class EventContext:
    """Everything a handler sees about one message, shared by all plugins for that message.

    ``reply`` is how plugins talk back: on ``on_handle`` a plugin sets it to answer instead of
    the agent; on ``on_decorate``/``on_send`` it holds the reply about to go out and may be
    replaced. ``data`` lets plugins pass notes to each other during one message.
    """

    event: Event
    message: IncomingMessage
    #: Whose memory this message may use; the bridge decides, plugins must respect it.
    scope: str
    is_admin: bool
    #: The bridge's services (memory, dream, ...). Typed Any so plugins never import the bridge.
    host: Any
    reply: Reply | None = None
    data: dict[str, Any] = field(default_factory=dict)


class Plugin:
    """Base class of every plugin; subclasses set ``name`` and define event handlers.

    ``priority`` orders plugins for every event (higher first, ties by name) so a guard such as
    an access filter can run before anything that answers.
    """

    name: ClassVar[str]
    priority: ClassVar[int] = 0
    description: ClassVar[str] = ""
    #: A pydantic model for ``plugins.config.<name>``; None means the plugin takes no settings.
    config_schema: ClassVar[type[BaseModel] | None] = None
    #: The chat commands it answers, ``(name without "/", one-line description)``, for the
    #: command menus of channels that have one.
    commands: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, config: BaseModel | None) -> None:
        """Keep the validated config (an instance of ``config_schema``, or None)."""
        self.config = config

    async def on_start(self) -> None:
        """Acquire resources before the first message; raising disables the plugin."""

    async def on_stop(self) -> None:
        """Release resources at shutdown; errors are logged and ignored."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'name', '?')!r} priority={self.priority}>"


class PluginError(Exception):
    """A plugin cannot be found, loaded or configured; the message names it and what to do."""


def handles(plugin: Plugin, event: Event) -> bool:
    """Whether ``plugin`` has a handler for ``event``."""
    return callable(getattr(plugin, event.value, None))
