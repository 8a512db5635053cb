"""The ``membridge`` command line: main.py loads the config and dispatches, parser.py says every command
and its options; one module per command family (running.py: those that start or check something).

``main`` is re-exported so that the ``membridge = "bridge.cli:main"`` entry point stays as it is.
May import the rest of ``bridge`` (lazily, in the commands) and ``memory``'s public face; no other room imports it.
"""

from .main import main

__all__ = ["main"]
