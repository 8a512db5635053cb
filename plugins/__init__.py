"""Plugins that intercept messages by event and priority."""

from __future__ import annotations
