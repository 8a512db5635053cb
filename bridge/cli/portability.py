"""``membridge memory export`` and ``membridge memory import``: a scope's memory as one zip.

The work is :mod:`memory.privacy.portability`'s; this module turns its errors into command errors and its
report into a line (or ``--json``). Progress goes to stderr as bars when it is a terminal.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import CommandError, print_json, scope_arg, stderr_progress

if TYPE_CHECKING:
    from memory import TransferReport

    from ..wiring.app import Services

EXPORT_DETAILS = """\
The zip holds MEMORY.md and all its versions, the daily files and dream diaries, the conversation
messages as JSONL, and manifest.json (counts, membridge version, scope, export time, SHA-256 of every
member). It is written to a temp file and renamed, so --out never names a half-written zip; an
existing file there is replaced. Keep it private: it is everything the bot remembers about that person."""

IMPORT_DETAILS = """\
--scope must be empty (no files, versions or conversations yet): an import never merges. The zip is
checked before anything is written (paths, symlinks, sizes, every member's SHA-256), then the scope's
files, versions and messages are restored together and indexed, so search finds them at once."""


def cmd_memory_export(services: Services, args: argparse.Namespace) -> int:
    from memory import PortabilityError

    scope = scope_arg(services, args, must_exist=False)
    try:
        with stderr_progress() as progress:
            report = services.portability.export(scope, Path(args.out), progress=progress)
    except PortabilityError as exc:
        raise CommandError(str(exc)) from None
    _print_report(args, report, f"exported scope {scope} to {report.path} ({report.bytes:,} bytes)")
    return 0


def cmd_memory_import(services: Services, args: argparse.Namespace) -> int:
    from memory import PortabilityError

    if not args.scope:
        raise CommandError("say which scope to restore into: --scope NAME (a scope with nothing in it yet)")
    scope = scope_arg(services, args, must_exist=False)
    try:
        with stderr_progress() as progress:
            report = services.portability.import_(Path(args.file), scope, progress=progress)
    except PortabilityError as exc:
        raise CommandError(str(exc)) from None
    _print_report(args, report, f"imported {args.file} into scope {scope}; {report.chunks_indexed} chunks indexed")
    return 0


def _print_report(args: argparse.Namespace, report: TransferReport, headline: str) -> None:
    if args.json:
        print_json({"scope": report.scope, "path": str(report.path), "bytes": report.bytes, "counts": report.counts,
                     "chunks_indexed": report.chunks_indexed, "seconds": round(report.seconds, 3)})
        return
    print(headline)
    print("  " + ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in report.counts.items()))
