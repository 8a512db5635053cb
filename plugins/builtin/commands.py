"""The built-in chat commands: ``/help``, ``/memory …``, ``/clear``, ``/knowledge …``.

They answer in ``on_handle`` and stop the agent (``BREAK_PASS``), so they work even when no LLM
is reachable, except ``/memory dream``, which needs one. Everything runs on the sender's scope,
which the bridge decided; ``/memory revert`` and knowledge edits are for admins only.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import date, datetime
from typing import ParamSpec, Protocol, TypeVar

from channels.base import OutgoingFile, Reply
from memory import (
    ConversationStore,
    DeepDream,
    DreamResult,
    Forgetter,
    KnowledgeService,
    MemoryManager,
    Portability,
    PortabilityError,
    SearchResult,
)

from ..base import Action, EventContext, Plugin

MAX_SHOW_CHARS = 3500
#: How much of one search result a chat reply quotes: its matching notes, not the passage's start.
SHOWN_CHARS = 300
DREAM_DAYS_DEFAULT = 3

HELP = """Commands:
/memory show: what I remember about this chat (MEMORY.md)
/memory search QUERY: search memory and knowledge
/memory dream [days]: distil the last days (1-30, default 3) into MEMORY.md now
/memory history: MEMORY.md versions
/memory revert [VERSION]: restore a version (admins)
/memory forget TEXT: list everywhere TEXT is remembered; /memory forget! TEXT forgets it for good
/memory forget-me: (direct chat) what I keep about you; /memory forget-me! erases it all
/memory export: all I remember about you, as a zip file (direct messages only)
/clear: start a fresh conversation (history stays saved)
/usage: what you have used of my language model today and this week (admins: the top spenders)
/knowledge list | /knowledge search QUERY
/help: this list"""

MEMORY_USAGE = ("Usage: /memory show | search QUERY | dream [days] | history | revert [VERSION] | forget[!] TEXT"
                " | forget-me[!] | export")
FORGET_LISTING = 20
_EXPORT_KINDS = (("memory_md", "MEMORY.md"), ("versions", "file versions"), ("daily_files", "daily files"),
                 ("dream_diaries", "dream diaries"), ("other_files", "other files"), ("messages", "messages"))
EXPORT_IN_GROUP = ("I only send an export in a direct message: it holds everything I remember about you, and "
                   "everyone here would get it. Write to me privately and send /memory export there.")

P = ParamSpec("P")
T = TypeVar("T")


class CommandHost(Protocol):
    """What the commands need from the bridge's services."""

    memory: MemoryManager
    conversations: ConversationStore
    dreamer: DeepDream
    forgetter: Forgetter
    knowledge: KnowledgeService
    portability: Portability

    async def dream(self, scope: str, *, days: int | None = None, force: bool = False) -> DreamResult: ...

    async def clear_context(self, scope: str, chat_key: str) -> None: ...

    async def usage_text(self, scope: str, is_admin: bool) -> str: ...

    async def run_blocking(self, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``func`` in a worker thread of the bridge's bounded pool (memory calls block on SQLite)."""
        ...


Handler = Callable[[EventContext, str], Awaitable[str | Reply]]


class CommandsPlugin(Plugin):
    name = "commands"
    priority = 100
    description = "Chat commands for memory and knowledge (/help lists them)."
    commands = (
        ("memory", "show, search, dream, history, revert, forget or export what I remember"),
        ("knowledge", "list or search the shared knowledge base"),
        ("clear", "start a fresh conversation (the history stays on disk)"),
        ("usage", "what you have used of the model today and this week"),
        ("help", "the commands"),
    )

    async def on_handle(self, ctx: EventContext) -> Action:
        text = ctx.message.text.strip()
        if not text.startswith("/"):
            return Action.CONTINUE
        command, _, rest = text[1:].partition(" ")
        handler = self._commands().get(command.lower())
        answer = await handler(ctx, rest.strip()) if handler else f"Unknown command /{command}. /help lists what I can do."
        ctx.reply = answer if isinstance(answer, Reply) else _answer(ctx, answer)
        return Action.BREAK_PASS

    def _commands(self) -> dict[str, Handler]:
        return {"help": self._help, "start": self._help, "memory": self._memory, "clear": self._clear,
                "knowledge": self._knowledge, "usage": self._usage}

    async def _help(self, ctx: EventContext, rest: str) -> str:
        return HELP

    async def _clear(self, ctx: EventContext, rest: str) -> str:
        host: CommandHost = ctx.host
        await host.clear_context(ctx.scope, ctx.message.chat_key)
        return "Context cleared: I start fresh here. Your history and memory are kept."

    async def _usage(self, ctx: EventContext, rest: str) -> str:
        host: CommandHost = ctx.host
        return await host.usage_text(ctx.scope, ctx.is_admin)

    # ----------------------------------------------------------------- /memory
    async def _memory(self, ctx: EventContext, rest: str) -> str | Reply:
        sub, _, arg = rest.partition(" ")
        handlers: dict[str, Handler] = {
            "show": self._show, "search": self._search, "dream": self._dream, "history": self._history,
            "revert": self._revert, "forget": self._forget, "forget!": self._forget_now,
            "forget-me": self._forget_me, "forget-me!": self._forget_me_now, "export": self._export,
        }
        handler = handlers.get(sub.lower())
        return await handler(ctx, arg.strip()) if handler else MEMORY_USAGE

    async def _show(self, ctx: EventContext, arg: str) -> str:
        host: CommandHost = ctx.host
        data = await host.run_blocking(host.dreamer.memory_file.read, ctx.scope)
        text = data.decode("utf-8", "replace").strip()
        if not text:
            return "I have no long-term memory for this chat yet."
        if len(text) > MAX_SHOW_CHARS:
            text = text[:MAX_SHOW_CHARS] + "\n…"
        return f"MEMORY.md:\n{text}"

    async def _search(self, ctx: EventContext, arg: str) -> str:
        if not arg:
            return "Usage: /memory search QUERY"
        host: CommandHost = ctx.host
        results = await host.run_blocking(host.memory.search, arg, ctx.scope, limit=5)
        if not results:
            return f"Nothing in memory matches “{arg}”."
        return "\n".join(f"{i}. {_heading(r)}\n{_quote(r.excerpt(SHOWN_CHARS))}" for i, r in enumerate(results, 1))

    async def _dream(self, ctx: EventContext, arg: str) -> str:
        days = DREAM_DAYS_DEFAULT
        if arg:
            if not arg.isdigit() or not 1 <= int(arg) <= 30:
                return "Usage: /memory dream [days], with days from 1 to 30 (default 3)."
            days = int(arg)
        host: CommandHost = ctx.host
        result = await host.dream(ctx.scope, days=days, force=True)
        if result.diff:
            return f"{result.reason}\n{_code_block(result.diff, 'diff')}"
        return result.reason

    async def _history(self, ctx: EventContext, arg: str) -> str:
        host: CommandHost = ctx.host
        versions = await host.run_blocking(host.dreamer.memory_file.versions, ctx.scope)
        if not versions:
            return "MEMORY.md has no saved versions yet."
        lines = [f"v{v.id}  {datetime.fromtimestamp(v.created_at):%Y-%m-%d %H:%M}  {v.entries} entries  {v.cause}"
                 for v in versions[:15]]
        return "MEMORY.md versions (newest first):\n" + "\n".join(lines)

    async def _revert(self, ctx: EventContext, arg: str) -> str:
        if not ctx.is_admin:
            return "Sorry, only an admin can revert memory."
        version = None
        if arg:
            if not arg.lstrip("v").isdigit():
                return "Usage: /memory revert [VERSION] (see /memory history)"
            version = int(arg.lstrip("v"))
        host: CommandHost = ctx.host
        try:
            new_version, diff = await host.run_blocking(host.dreamer.memory_file.revert, ctx.scope, version)
        except KeyError as exc:
            return str(exc.args[0])
        return f"MEMORY.md restored (now v{new_version}).\n{_code_block(diff, 'diff')}" if diff else \
            f"MEMORY.md restored (now v{new_version}); the content was already the same."

    async def _forget(self, ctx: EventContext, arg: str) -> str:
        """The dry run: where the text lives, per place with file:line; nothing changes yet."""
        refusal = _forget_refusal(ctx, arg)
        if refusal:
            return refusal
        host: CommandHost = ctx.host
        found = await host.run_blocking(host.forgetter.find, ctx.scope, arg)
        if not found.matches:
            return f"Nothing I remember here contains “{arg}”."
        return (f"“{arg}” is in:\n{_code_block(found.listing(FORGET_LISTING, 80))}\n"
                f"Send /memory forget! {arg} to forget all of it for good (it cannot be undone).")

    async def _forget_now(self, ctx: EventContext, arg: str) -> str:
        refusal = _forget_refusal(ctx, arg)
        if refusal:
            return refusal
        host: CommandHost = ctx.host
        found = await host.run_blocking(host.forgetter.forget, ctx.scope, arg)
        if not found.matches:
            return f"Nothing I remember here contains “{arg}”."
        places = ", ".join(f"{count} in {place}" for place, count in found.counts().items())
        return f"Forgotten for good: {places}."

    async def _forget_me(self, ctx: EventContext, arg: str) -> str:
        if ctx.message.chat_type != "direct":
            return "Send /memory forget-me to me in a direct message: it erases your own memory, not this chat's."
        host: CommandHost = ctx.host
        holdings = await host.run_blocking(host.forgetter.holdings, ctx.scope)
        if not any(holdings.values()):
            return "I keep nothing about you."
        kept = ", ".join(f"{count} {what if count > 1 else what.removesuffix('s')}" for what, count in holdings.items()
                         if count)
        return (f"I keep about you: {kept}. Send /memory forget-me! to erase all of it for good. What you said in "
                "groups stays in those groups' memory (an admin there can /memory forget it).")

    async def _forget_me_now(self, ctx: EventContext, arg: str) -> str:
        if ctx.message.chat_type != "direct":
            return "Send /memory forget-me! to me in a direct message: it erases your own memory, not this chat's."
        host: CommandHost = ctx.host
        await host.run_blocking(host.forgetter.erase, ctx.scope)
        return "Done: everything I kept about you is erased. I start from nothing."

    async def _export(self, ctx: EventContext, arg: str) -> str | Reply:
        """The sender's own scope as a zip document, in a direct chat only (a group would see it)."""
        if ctx.message.chat_type != "direct":
            return EXPORT_IN_GROUP
        host: CommandHost = ctx.host
        try:
            report = await host.run_blocking(host.portability.export_to_outbox, ctx.scope)
        except PortabilityError:
            return "I have nothing stored for you yet, so there is nothing to export."
        held = ", ".join(f"{report.counts[kind]} {label}" for kind, label in _EXPORT_KINDS if report.counts[kind])
        text = (f"Here is everything I remember about you ({held}). Keep it private; an operator can restore it "
                "with `membridge memory import`.")
        file = OutgoingFile(report.path, f"membridge-{ctx.scope}-{date.today():%Y-%m-%d}.zip", "application/zip",
                            temporary=True)
        return replace(_answer(ctx, text), file=file)

    # -------------------------------------------------------------- /knowledge
    async def _knowledge(self, ctx: EventContext, rest: str) -> str:
        sub, _, arg = rest.partition(" ")
        host: CommandHost = ctx.host
        if sub == "list":
            pages = await host.run_blocking(host.knowledge.list_pages)
            if not pages:
                return "The knowledge base is empty."
            return "Knowledge pages:\n" + "\n".join(f"- {p.category}/{p.slug}: {p.title}" for p in pages[:50])
        if sub == "search" and arg.strip():
            results = await host.run_blocking(host.memory.search, arg.strip(), ctx.scope, limit=10)
            hits = [r for r in results if r.source == "knowledge"][:5]
            if not hits:
                return f"No knowledge page matches “{arg.strip()}”."
            return "\n".join(f"{_heading(r)}\n{_quote(r.excerpt(SHOWN_CHARS))}" for r in hits)
        return "Usage: /knowledge list | /knowledge search QUERY"


def _answer(ctx: EventContext, text: str) -> Reply:
    return Reply(text, thread_id=ctx.message.thread_id, reply_to=ctx.message.message_id)


def _forget_refusal(ctx: EventContext, arg: str) -> str | None:
    if not arg:
        return "Usage: /memory forget TEXT (then /memory forget! TEXT to confirm)"
    if ctx.message.chat_type != "direct" and not ctx.is_admin:
        return "Sorry, in a group only an admin can make me forget things."
    return None


def _code_block(text: str, info: str = "") -> str:
    """``text`` as a fenced block, shown as written: indents kept, no markup in remembered text
    taken for formatting. The fence is longer than any run of backticks inside (CommonMark)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def _heading(result: SearchResult) -> str:
    """A result's line above its quote: where, when, how well it matched."""
    when = f"{result.date} · " if result.date else ""
    return f"{when}{result.where} ({result.score:.2f}{', weak match' if result.weak else ''})"


def _quote(text: str, limit: int = 300) -> str:
    body = text if len(text) <= limit else text[:limit] + "…"
    return "\n".join(f"> {line}" for line in body.splitlines())

