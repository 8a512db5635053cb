"""The ``membridge`` command line (also ``python -m bridge``).

Every command prints its result on stdout (one JSON document with ``--json``); errors go to stderr
with a non-zero exit status: 2 for a bad command line or configuration, 1 for a failure at run time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory import MemoryPathError, ScopeError, SyncReport
from memory.knowledge import KnowledgeError
from memory.locks import WorkspaceLockTimeout

from .app import Services, local_user
from .config import ConfigError, load_config
from .logs import config_secrets, setup_logging



class CommandError(RuntimeError):
    """A failure the user can act on; the message says what and how."""


Handler = Callable[[Services, argparse.Namespace], int]


def _scope(services: Services, args: argparse.Namespace, *, must_exist: bool) -> str:
    """``--scope`` (which must exist when ``must_exist``), else the terminal user's own scope."""
    scope = args.scope or services.terminal_scope()
    services.workspace.scope_dir(scope)  # validates the name
    if must_exist and args.scope and scope not in services.workspace.list_scopes():
        known = ", ".join(services.workspace.list_scopes()) or "none yet"
        raise CommandError(f"unknown scope {scope!r} (known scopes: {known})")
    return scope


def _require_workspace(services: Services) -> None:
    root = services.workspace.root
    if not root.is_dir():
        raise CommandError(
            f"workspace {root} does not exist; check `workspace` in your config or create it with "
            "`membridge memory add` or `membridge chat`"
        )


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


# ------------------------------------------------------------------- memory
def cmd_memory_sync(services: Services, args: argparse.Namespace) -> int:
    scope = _scope(services, args, must_exist=True) if args.scope else None
    report = _sync_with_progress(services, scope)
    if args.json:
        _print_json({**report.__dict__, "ok": report.ok})
    else:
        print(
            f"synced {report.files_scanned} files: {report.files_changed} changed, {report.files_removed} removed, "
            f"{report.chunks_written} chunks written, {report.embed_calls} embedding calls ({report.seconds:.2f}s)"
        )
    if not report.ok:
        raise CommandError(report.error or "sync failed")
    return 0


def _sync_with_progress(services: Services, scope: str | None) -> SyncReport:
    """Sync, then fill the substring (trigram) index that a sync leaves to a background thread."""
    if not sys.stderr.isatty():
        report = services.memory.sync(scope)
        services.memory.finish_indexing()
        return report
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES[stage], total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = services.memory.sync(scope, progress=progress)
        services.memory.finish_indexing(progress)
        return report


_STAGES = {"scan": "scanning", "embed": "embedding", "write": "writing", "trigram": "substring index"}


def cmd_memory_search(services: Services, args: argparse.Namespace) -> int:
    _require_workspace(services)
    scope = _scope(services, args, must_exist=True)
    results = services.memory.search(args.query, scope, limit=args.limit)
    if args.json:
        _print_json([r.to_dict() for r in results])
        return 0
    if not results:
        print(f"no memory matches {args.query!r} in scope {scope}")
    for r in results:
        print(f"{r.score:.3f}  {r.path}:{r.start_line}-{r.end_line}  [{r.source}]")
        for line in r.text.splitlines()[:6]:
            print(f"    {line}")
    return 0


def cmd_memory_get(services: Services, args: argparse.Namespace) -> int:
    _require_workspace(services)
    scope = _scope(services, args, must_exist=not args.path.startswith("knowledge/"))
    text = services.memory.read_lines(scope, args.path, args.start, args.lines)
    if args.json:
        _print_json({"path": args.path, "scope": scope, "start_line": args.start, "text": text})
    else:
        print(text)
    return 0


def cmd_memory_add(services: Services, args: argparse.Namespace) -> int:
    text = " ".join(args.text).strip()
    if not text:
        raise CommandError("nothing to add: give the text to remember")
    scope = _scope(services, args, must_exist=False)
    path = services.memory.append_daily(scope, text if text.startswith("- ") else f"- {text}")
    relative = path.relative_to(services.workspace.scope_dir(scope)).as_posix()
    if args.json:
        _print_json({"scope": scope, "path": relative})
    else:
        print(f"added to {relative} (scope {scope})")
    return 0


def cmd_memory_dream(services: Services, args: argparse.Namespace) -> int:
    scope = _scope(services, args, must_exist=True)
    result = _run_async(services, services.dream(scope, days=args.days, force=args.force))
    if args.json:
        _print_json({**result.__dict__, "scope": scope})
    else:
        print(f"{scope}: {result.reason}")
        if result.diff:
            print(result.diff, end="")
    return 0 if result.status in ("written", "skipped") else 1


def cmd_memory_history(services: Services, args: argparse.Namespace) -> int:
    scope = _scope(services, args, must_exist=True)
    versions = services.dreamer.memory_file.versions(scope)
    if args.json:
        _print_json([v.__dict__ for v in versions])
        return 0
    if not versions:
        print(f"MEMORY.md of {scope} has no recorded versions yet")
    for v in versions:
        when = datetime.fromtimestamp(v.created_at).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{v.id:>5}  {when}  {v.entries:>3} entries  {v.cause}")
    return 0


def cmd_memory_revert(services: Services, args: argparse.Namespace) -> int:
    scope = _scope(services, args, must_exist=True)
    try:
        version, diff = services.dreamer.memory_file.revert(scope, args.version)
    except KeyError as exc:
        raise CommandError(exc.args[0]) from None
    if args.json:
        _print_json({"scope": scope, "version": version, "diff": diff})
    else:
        print(f"{scope}: MEMORY.md restored (now version {version})")
        print(diff, end="")
    return 0


def _run_async(services: Services, coroutine: Any) -> Any:
    async def runner() -> Any:
        try:
            return await coroutine
        finally:
            await services.aclose()

    return asyncio.run(runner())


# ---------------------------------------------------------------- knowledge
def cmd_knowledge_list(services: Services, args: argparse.Namespace) -> int:
    pages = services.knowledge.list_pages(args.category)
    if args.json:
        _print_json([page.__dict__ for page in pages])
    elif not pages:
        print("the knowledge base is empty")
    for page in pages if not args.json else []:
        print(f"{page.category}/{page.slug}  {page.title}")
    return 0


def cmd_knowledge_show(services: Services, args: argparse.Namespace) -> int:
    content = services.knowledge.read(args.page)
    if args.json:
        _print_json({"page": args.page, "content": content})
    else:
        print(content, end="" if content.endswith("\n") else "\n")
    return 0


def cmd_knowledge_add(services: Services, args: argparse.Namespace) -> int:
    if args.file:
        source = Path(args.file)
        if not source.is_file():
            raise CommandError(f"{args.file} is not a file")
        content = source.read_text(encoding="utf-8")
    elif args.text:
        content = " ".join(args.text)
    else:
        content = sys.stdin.read()
    page = services.knowledge.write(args.page, content, actor=f"cli:{local_user()}")
    if args.json:
        _print_json(page.__dict__)
    else:
        print(f"saved {page.path}")
    return 0


def cmd_knowledge_rm(services: Services, args: argparse.Namespace) -> int:
    services.knowledge.delete(args.page, actor=f"cli:{local_user()}")
    if args.json:
        _print_json({"deleted": args.page})
    else:
        print(f"deleted {args.page}")
    return 0


def cmd_knowledge_graph(services: Services, args: argparse.Namespace) -> int:
    graph = services.knowledge.build_graph()
    if args.json:
        _print_json(graph.to_dict())
    else:
        print(f"{len(graph.nodes)} pages, {len(graph.edges)} links")
        for edge in graph.edges:
            print(f"  {edge['source']} — {edge['target']}")
    return 0


# ---------------------------------------------------------------------- bot
def cmd_run(services: Services, args: argparse.Namespace) -> int:
    from .runtime import run_bot

    try:
        asyncio.run(run_bot(services, terminal_only=False))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


def cmd_chat(services: Services, args: argparse.Namespace) -> int:
    from .runtime import run_bot

    if not args.verbose:  # the REPL shares the screen with the log: only errors there
        logging.getLogger().setLevel(logging.ERROR)
    asyncio.run(run_bot(services, terminal_only=True))
    return 0


# ------------------------------------------------------------------ console
def cmd_console(services: Services, args: argparse.Namespace) -> int:
    from .console import ConsoleError, serve

    def started(url: str) -> None:
        print(f"membridge: memory console at {url} (sign in with console.token or console.admin_token; "
              "Ctrl-C stops it)", file=sys.stderr)

    try:
        asyncio.run(serve(services, on_started=started))
    except ConsoleError as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        pass  # Ctrl-C is how the console is meant to stop
    return 0


# ------------------------------------------------------------------- doctor
def cmd_doctor(services: Services, args: argparse.Namespace) -> int:
    from .doctor import run_checks

    checks = run_checks(services)
    if args.json:
        _print_json([{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks])
    else:
        for check in checks:
            print(f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
    return 0 if all(c.ok for c in checks) else 1


# ------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="membridge", description="A chat-bot bridge with a long memory.")
    parser.add_argument("--config", help="config file (default: $MEMBRIDGE_CONFIG, else ./config.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="start every enabled channel and the daily timer")
    run.set_defaults(handler=cmd_run)
    chat = commands.add_parser("chat", help="chat in this terminal (no chat token needed)")
    chat.set_defaults(handler=cmd_chat)
    console = commands.add_parser("console", help="serve the memory console web page (see console.* in config.yaml)")
    console.set_defaults(handler=cmd_console)

    memory = commands.add_parser("memory", help="search and maintain memory").add_subparsers(
        dest="memory_command", required=True, metavar="SUBCOMMAND")

    def add(sub: argparse._SubParsersAction, name: str, handler: Handler, help_text: str, *, scope: bool = True,
            json_flag: bool = True) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        if scope:
            command.add_argument("--scope", help="whose memory (default: this terminal's user)")
        if json_flag:
            command.add_argument("--json", action="store_true", help="print one JSON document")
        return command

    add(memory, "sync", cmd_memory_sync, "index changed memory and knowledge files")
    search = add(memory, "search", cmd_memory_search, "hybrid search over a scope's memory and knowledge")
    search.add_argument("query")
    search.add_argument("--limit", type=_positive, default=None, help="most results (default: memory.max_results)")
    get = add(memory, "get", cmd_memory_get, "print lines of a memory file")
    get.add_argument("path", help="MEMORY.md, memory/YYYY-MM-DD.md or knowledge/<category>/<page>.md")
    get.add_argument("--start", type=_positive, default=1, help="first line (1-based)")
    get.add_argument("--lines", type=_positive, default=None, help="how many lines")
    mem_add = add(memory, "add", cmd_memory_add, "append a note to today's daily memory")
    mem_add.add_argument("text", nargs="+")
    dream = add(memory, "dream", cmd_memory_dream, "run Deep Dream now and print the MEMORY.md diff")
    dream.add_argument("--days", type=_days, default=None, help="daily files to read (1-30; default memory.dream.lookback_days)")
    dream.add_argument("--force", action="store_true", help="dream even over daily memory already dreamt")
    add(memory, "history", cmd_memory_history, "list MEMORY.md versions")
    revert = add(memory, "revert", cmd_memory_revert, "restore a MEMORY.md version (default: the previous one)")
    revert.add_argument("version", nargs="?", type=_positive, default=None)

    knowledge = commands.add_parser("knowledge", help="the shared knowledge base").add_subparsers(
        dest="knowledge_command", required=True, metavar="SUBCOMMAND")
    k_list = add(knowledge, "list", cmd_knowledge_list, "list knowledge pages", scope=False)
    k_list.add_argument("--category")
    add(knowledge, "show", cmd_knowledge_show, "print a page", scope=False).add_argument("page", help="<category>/<page>")
    k_add = add(knowledge, "add", cmd_knowledge_add, "create or replace a page (text, --file, or stdin)", scope=False)
    k_add.add_argument("page", help="<category>/<page>")
    k_add.add_argument("text", nargs="*", help="the content (default: read stdin)")
    k_add.add_argument("--file", help="read the content from this markdown file")
    add(knowledge, "rm", cmd_knowledge_rm, "delete a page", scope=False).add_argument("page")
    add(knowledge, "graph", cmd_knowledge_graph, "pages and the links between them", scope=False)

    add(commands, "doctor", cmd_doctor, "check config, LLM, embeddings, SQLite and LanceDB", scope=False)
    return parser


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return number


def _days(value: str) -> int:
    number = _positive(value)
    if number > 30:
        raise argparse.ArgumentTypeError(f"{number} days is more than 30")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"membridge: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.verbose, config_secrets(config))
    services = Services(config)
    try:
        return int(args.handler(services, args))
    except (CommandError, MemoryPathError, ScopeError, KnowledgeError, WorkspaceLockTimeout) as exc:
        print(f"membridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("membridge: interrupted", file=sys.stderr)
        return 130
    finally:
        services.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
