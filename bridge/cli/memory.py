"""``membridge memory …``: sync, search, read, add, dream, and the versions of MEMORY.md.

Export and import live in :mod:`.portability`, forget and erase in :mod:`.forgetting`.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .common import CommandError, print_json, require_workspace, run_async, scope_arg, stderr_progress

if TYPE_CHECKING:
    from memory import SyncReport

    from ..wiring.app import Services


def cmd_memory_sync(services: Services, args: argparse.Namespace) -> int:
    scope = scope_arg(services, args, must_exist=True) if args.scope else None
    report = _sync_with_progress(services, scope)
    if args.json:
        print_json({**report.__dict__, "ok": report.ok})
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
    with stderr_progress() as progress:
        report = services.memory.indexer.sync(scope, progress=progress)
        services.memory.indexer.finish_indexing(progress)
    return report


def cmd_memory_search(services: Services, args: argparse.Namespace) -> int:
    require_workspace(services)
    scope = scope_arg(services, args, must_exist=True)
    results = services.memory.search(args.query, scope, limit=args.limit)
    if args.json:
        print_json([r.to_dict() for r in results])
        return 0
    if not results:
        print(f"no memory matches {args.query!r} in scope {scope}")
    for r in results:
        dated = f"  {r.date}" if r.date else ""
        print(f"{r.score:.3f}  {r.where}{dated}  [{r.source}]" + ("  (weak match)" if r.weak else ""))
        for line in r.excerpt().splitlines():
            print(f"    {line}")
    return 0


def cmd_memory_get(services: Services, args: argparse.Namespace) -> int:
    require_workspace(services)
    scope = scope_arg(services, args, must_exist=not args.path.startswith("knowledge/"))
    text = services.memory.read_lines(scope, args.path, args.start, args.lines)
    if args.json:
        print_json({"path": args.path, "scope": scope, "start_line": args.start, "text": text})
    else:
        print(text)
    return 0


def cmd_memory_add(services: Services, args: argparse.Namespace) -> int:
    text = " ".join(args.text).strip()
    if not text:
        raise CommandError("nothing to add: give the text to remember")
    scope = scope_arg(services, args, must_exist=not args.create, hint="; add --create to start a new scope")
    path = services.memory.append_daily(scope, text if text.startswith("- ") else f"- {text}")
    relative = path.relative_to(services.workspace.scope_dir(scope)).as_posix()
    if args.json:
        print_json({"scope": scope, "path": relative})
    else:
        print(f"added to {relative} (scope {scope})")
    return 0


def cmd_memory_dream(services: Services, args: argparse.Namespace) -> int:
    scope = scope_arg(services, args, must_exist=True)
    result = run_async(services, services.dream(scope, days=args.days, force=args.force))
    if args.json:
        print_json({**result.__dict__, "scope": scope})
    else:
        print(f"{scope}: {result.reason}")
        if result.diff:
            print(result.diff, end="")
    return 0 if result.status in ("written", "skipped") else 1


def cmd_memory_stats(services: Services, args: argparse.Namespace) -> int:
    from ..overview import scope_overview

    scope = scope_arg(services, args, must_exist=True)
    overview = scope_overview(services, scope)
    if args.json:
        print_json(overview)
        return 0
    for label, value in _stats_lines(overview):
        print(f"{label:<16}{value}")
    return 0


def _stats_lines(overview: dict[str, Any]) -> list[tuple[str, str]]:
    span = f" ({overview['first_day']} to {overview['last_day']})" if overview["days"] else ""
    recent = sum(day["notes"] for day in overview["notes_per_day"])
    embedding = overview["embedding"]
    return [
        ("scope", overview["scope"]),
        ("MEMORY.md", _count(overview["memory_entries"], "entry", "entries")),
        ("daily memory", f"{_count(overview['notes'], 'note')} on {_count(overview['days'], 'day')}{span}"),
        (f"last {len(overview['notes_per_day'])} days", _count(recent, "note")),
        ("dream diaries", str(overview["dream_diaries"])),
        ("knowledge", f"{_count(overview['knowledge_pages'], 'page')} (shared by every scope)"),
        ("last sync", overview["last_sync"] or "never"),
        ("last Deep Dream", overview["last_dream"] or "never"),
        ("next Deep Dream", overview["next_dream"] or "off (memory.dream.enabled: false)"),
        ("embeddings", embedding["provider"] + (f" ({embedding['model']})" if embedding["model"] else "")),
    ]


def _count(number: int, one: str, many: str = "") -> str:
    return f"{number} {one if number == 1 else many or one + 's'}"


def _versioned_file(args: argparse.Namespace) -> str:
    """``--file``: MEMORY.md (the default) or a daily file, ``memory/YYYY-MM-DD.md``."""
    from memory import versioned_file

    try:
        return versioned_file(str(args.file))
    except ValueError as exc:
        raise CommandError(f"--file {exc}") from None


def cmd_memory_history(services: Services, args: argparse.Namespace) -> int:
    scope = scope_arg(services, args, must_exist=True)
    file = _versioned_file(args)
    versions = services.dreamer.memory_file.versions(scope, file)
    if args.json:
        print_json([v.__dict__ for v in versions])
        return 0
    if not versions:
        print(f"{file} of {scope} has no recorded versions yet")
    for v in versions:
        when = datetime.fromtimestamp(v.created_at).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{v.id:>5}  {when}  {v.entries:>3} entries  {v.cause}")
    return 0


def cmd_memory_revert(services: Services, args: argparse.Namespace) -> int:
    scope = scope_arg(services, args, must_exist=True)
    file = _versioned_file(args)
    try:
        version, diff = services.dreamer.memory_file.revert(scope, args.version, file)
    except KeyError as exc:
        raise CommandError(exc.args[0]) from None
    if args.json:
        print_json({"scope": scope, "version": version, "diff": diff, "changed": bool(diff)})
    elif not diff:  # the file already holds those bytes: no version was recorded
        target = f"version {args.version}" if args.version else "the previous version"
        print(f"{scope}: {file} already equals {target}; nothing changed, no new version recorded")
    else:
        print(f"{scope}: {file} restored (now version {version})")
        print(diff, end="")
    return 0
