"""``bridge``, ``channels`` and ``plugins`` use the memory package only through its public face (memory/__init__.py):
a deep import (``from memory.storage import …``) ties them to the core's inner layout, which the
core must stay free to change. The scan reads the source (AST), so a lazy import inside a function
counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import memory

ROOT = Path(__file__).resolve().parents[2]


def _memory_imports() -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) of every import of memory or a memory module in bridge/, channels/ and plugins/."""
    found = []
    for package in ("bridge", "channels", "plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                where = str(path.relative_to(ROOT))
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                        node.module == "memory" or node.module.startswith("memory.")):
                    found.append((where, node.lineno, node.module, [alias.name for alias in node.names]))
                elif isinstance(node, ast.Import):
                    found += [(where, node.lineno, alias.name, []) for alias in node.names
                              if alias.name == "memory" or alias.name.startswith("memory.")]
    return found


def test_bridge_channels_and_plugins_import_no_private_memory_module() -> None:
    imports = _memory_imports()
    assert imports, "the scan found no memory import at all: it is looking in the wrong place"
    deep = [f"{file}:{line}: {module}" for file, line, module, _ in imports if module != "memory"]
    assert deep == [], "import these from the memory package instead (add them to memory/__init__.py):\n" + "\n".join(deep)


def test_every_name_they_import_is_on_the_public_face() -> None:
    unlisted = [f"{file}:{line}: {name}" for file, line, _, names in _memory_imports() for name in names
                if name not in memory.__all__]
    assert unlisted == []
