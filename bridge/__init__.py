"""membridge's application layer: configuration, wiring, the agent loop and the CLI."""

from __future__ import annotations
