"""membridge's application layer: configuration, wiring, the agent loop and the CLI."""

from __future__ import annotations


def installed_version() -> str:
    """membridge's version from the installed package's metadata (read only when asked: not free)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("membridge")
    except PackageNotFoundError:
        return "unknown (not installed)"
