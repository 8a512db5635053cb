"""Whole bots against the fake OpenAI server (``running``, with the settings a test asks for)."""

from support.running import running

__all__ = ["running"]
