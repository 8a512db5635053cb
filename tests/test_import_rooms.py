"""The packages' import graph, read from the source (AST) so that lazy imports inside functions
and ``TYPE_CHECKING`` imports count too: no two modules of memory/, bridge/, channels/ or plugins/
import each other in a loop, however long (a loop hides which side is the foundation). That the
others reach memory only through its public face is tests/bridge/test_memory_public_face.py's."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memory", "bridge", "channels", "plugins")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    """Module name -> file, for every module of the four packages."""
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _imported(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from … import`` names, resolving the leading dots against ``name``."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) of each import in ``path``; ``from pkg import mod`` names the module ``pkg.mod``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _imported(name, path, node)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                yield node.lineno, submodule if submodule in known else module


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of the four packages it imports (itself left out)."""
    sources = _sources()
    known = set(sources)
    return {name: {module for _, module in _imports(name, path, known) if module in known and module != name}
            for name, path in sources.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read_from_the_real_tree() -> None:
    graph = _graph()
    assert "memory.index.indexer" in graph["memory.manager"]
    assert "memory.files.files" in graph["memory.index.scan"]  # a relative import, resolved


def test_cycles_are_found() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import loops (make the dependency run one way):\n" + "\n".join(map(" -> ".join, cycles))

