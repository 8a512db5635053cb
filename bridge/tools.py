"""Tools the LLM can call, each bound to the turn's scope.

A tool never raises into the agent loop: a bad argument, a refused path or a failure becomes a
short error string the model reads and can act on. Memory is synchronous (SQLite, LanceDB), so
tools run it in a worker thread.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from memory import KnowledgeError, KnowledgeService, MemoryManager, MemoryPathError, SearchResult, WriteWithdrawn

from . import offload
from .ops import metrics

log = logging.getLogger(__name__)

MAX_TOOL_OUTPUT_CHARS = 12_000
MAX_GET_LINES = 300


class ToolError(Exception):
    """What the model did wrong, in words it can act on."""


def _always() -> bool:
    return True


@dataclass(frozen=True)
class ToolContext:
    scope: str
    user: str  # "<channel>:<user id>"
    is_admin: bool
    now: datetime
    #: Whether the message this turn answers is still stored: a tool that writes memory checks it
    #: under the workspace lock, so a forget that landed while the model answered is not undone.
    still_asked: Callable[[], bool] = field(default=_always)


_WITHDRAWN = ("the person's message was forgotten while you answered it, so nothing was saved; "
              "do not repeat or save its content")


class Tool(ABC):
    name: str
    description: str
    parameters: ClassVar[dict[str, Any]]
    admin_only: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    @abstractmethod
    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str: ...


def _text_arg(args: dict[str, Any], name: str, *, required: bool = True, max_len: int = 10_000) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ToolError(f"'{name}' must be a non-empty string")
    if len(value) > max_len:
        raise ToolError(f"'{name}' is longer than {max_len} characters")
    return value


def _int_arg(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ToolError(f"'{name}' must be a whole number")
    if not low <= int(value) <= high:
        raise ToolError(f"'{name}' must be between {low} and {high}")
    return int(value)


#: How much of one search result a tool result holds: its matching notes.
SHOWN_CHARS = 1500


def _shown(result: SearchResult) -> dict[str, Any]:
    """A search result as the model sees it: where, when, how well, and the notes that matched."""
    shown: dict[str, Any] = {"path": result.path, "line": result.line,
                             "date": result.date, "score": round(result.score, 3), "source": result.source,
                             "text": result.excerpt(SHOWN_CHARS)}
    if result.weak:
        shown["weak"] = True
    return shown


async def search_memory(memory: MemoryManager, query: str, scope: str, limit: int) -> list[SearchResult]:
    """A search for the model, in a worker thread, timed and counted for ``/metrics``."""
    started = time.perf_counter()
    results = await offload.run(memory.search, query, scope, limit=limit)
    metrics.observe_search(time.perf_counter() - started, len(results))
    return results


class MemorySearch(Tool):
    name = "memory_search"
    description = ("Search this conversation's long-term memory, daily notes and the knowledge base by meaning "
                   "and keywords, in any language. Returns the notes that match best, with their date, file and "
                   "line numbers (read around them with memory_get); 'weak' marks a loose match.")
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {
        "query": {"type": "string", "description": "keywords or a short question"},
        "limit": {"type": "integer", "description": "most results (1-20)", "default": 6}}, "required": ["query"]}

    def __init__(self, memory: MemoryManager) -> None:
        self.memory = memory

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        query = _text_arg(args, "query", max_len=1000)
        limit = _int_arg(args, "limit", 6, 1, 20)
        results = await search_memory(self.memory, query, ctx.scope, limit)
        if not results:
            return json.dumps({"results": [], "note": "nothing found; try other words or read recent daily memory"})
        return json.dumps({"results": [_shown(r) for r in results]}, ensure_ascii=False)


class MemoryGet(Tool):
    name = "memory_get"
    description = ("Read lines of a memory file: MEMORY.md, memory/YYYY-MM-DD.md (daily notes) or "
                   "knowledge/<category>/<page>.md.")
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {
        "path": {"type": "string"},
        "start_line": {"type": "integer", "default": 1},
        "num_lines": {"type": "integer", "default": 100}}, "required": ["path"]}

    def __init__(self, memory: MemoryManager) -> None:
        self.memory = memory

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        path = _text_arg(args, "path", max_len=500)
        start = _int_arg(args, "start_line", 1, 1, 10_000_000)
        count = _int_arg(args, "num_lines", 100, 1, MAX_GET_LINES)
        try:
            text = await offload.run(self.memory.read_lines, ctx.scope, path, start, count)
        except MemoryPathError as exc:
            raise ToolError(str(exc)) from None
        return text if text else f"(no lines at {start} in {path})"


class MemoryWrite(Tool):
    name = "memory_write"
    description = "Save a fact worth remembering to today's daily memory (one short line, absolute dates)."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def __init__(self, memory: MemoryManager) -> None:
        self.memory = memory

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        text = " ".join(_text_arg(args, "text", max_len=2000).split())
        line = text if text.startswith("- ") else f"- {text}"
        try:
            path = await offload.run(self.memory.append_daily, ctx.scope, line, when=ctx.now, only_if=ctx.still_asked)
        except WriteWithdrawn:
            raise ToolError(_WITHDRAWN) from None
        return f"saved to memory/{path.name}"


class KnowledgeSearch(Tool):
    name = "knowledge_search"
    description = "Search the shared knowledge base (domain pages, not personal memory)."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"query": {"type": "string"},
                                                   "limit": {"type": "integer", "default": 5}}, "required": ["query"]}

    def __init__(self, memory: MemoryManager) -> None:
        self.memory = memory

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        query = _text_arg(args, "query", max_len=1000)
        limit = _int_arg(args, "limit", 5, 1, 20)
        results = await search_memory(self.memory, query, ctx.scope, limit * 3)
        hits = [r for r in results if r.source == "knowledge"][:limit]
        return json.dumps({"results": [_shown(r) for r in hits]}, ensure_ascii=False)


class KnowledgeRead(Tool):
    name = "knowledge_read"
    description = "Read a whole knowledge page, given as <category>/<page>."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"page": {"type": "string"}}, "required": ["page"]}

    def __init__(self, knowledge: KnowledgeService) -> None:
        self.knowledge = knowledge

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        try:
            return await offload.run(self.knowledge.read, _text_arg(args, "page", max_len=500))
        except KnowledgeError as exc:
            raise ToolError(str(exc)) from None


class KnowledgeWrite(Tool):
    name = "knowledge_write"
    description = "Create or replace a knowledge page <category>/<page> with markdown content (admins only)."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"page": {"type": "string"}, "content": {"type": "string"}},
                  "required": ["page", "content"]}
    admin_only = True

    def __init__(self, knowledge: KnowledgeService) -> None:
        self.knowledge = knowledge

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        page = _text_arg(args, "page", max_len=500)
        content = _text_arg(args, "content", max_len=1_000_000)
        try:
            written = await offload.run(self.knowledge.write, page, content, actor=ctx.user.replace(" ", "_"),
                                        only_if=ctx.still_asked)
        except KnowledgeError as exc:
            raise ToolError(str(exc)) from None
        except WriteWithdrawn:
            raise ToolError(_WITHDRAWN) from None
        return f"saved {written.path}"


class ToolBox:
    """The tools of a turn: their schemas for the model, and a call that never raises."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def schemas(self, ctx: ToolContext) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values() if ctx.is_admin or not t.admin_only]

    async def call(self, ctx: ToolContext, name: str, raw_arguments: str) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return f"error: unknown tool {name!r}; available: {', '.join(sorted(self._tools))}"
        if tool.admin_only and not ctx.is_admin:
            return f"error: {name} is only available to admins; tell the user you cannot do this"
        try:
            args = json.loads(raw_arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"error: the arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
        if not isinstance(args, dict):
            return "error: the arguments must be a JSON object"
        try:
            output = await tool.run(ctx, args)
        except ToolError as exc:
            return f"error: {exc}"
        except Exception as exc:
            log.exception("tool %s failed", name)
            return f"error: {name} failed: {type(exc).__name__}: {exc}"
        return output if len(output) <= MAX_TOOL_OUTPUT_CHARS else output[:MAX_TOOL_OUTPUT_CHARS] + "\n[… cut]"


def default_tools(memory: MemoryManager, knowledge: KnowledgeService) -> list[Tool]:
    return [MemorySearch(memory), MemoryGet(memory), MemoryWrite(memory),
            KnowledgeSearch(memory), KnowledgeRead(knowledge), KnowledgeWrite(knowledge)]
