"""The plugins that ship with membridge, by name.

Only import paths are listed here, never imports: a built-in is imported when it is enabled, so a
broken or missing one fails only the bridges that use it.
"""

from __future__ import annotations

#: Plugin name -> ``"module:Class"``.
BUILTIN_PLUGINS: dict[str, str] = {
    "commands": "plugins.builtin.commands:CommandsPlugin",
}
