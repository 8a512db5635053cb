"""The ``membridge`` command line: main.py parses and dispatches; one module per command family.

``main`` is re-exported so that the ``membridge = "bridge.cli:main"`` entry point stays as it is.
May import the rest of ``bridge`` (lazily, in the commands) and ``memory``'s public face; no other room imports it.
"""

from .main import main

__all__ = ["main"]
