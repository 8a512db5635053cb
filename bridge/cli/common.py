"""What every ``membridge`` command module shares: the error a user can act on, the ``--scope``
rule, JSON output, progress bars on stderr, and running a coroutine to its end.

Only the standard library is imported at the top (see :mod:`bridge.cli`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..wiring.app import Services


class CommandError(RuntimeError):
    """A failure the user can act on; the message says what and how."""


Handler = Callable[["Services", argparse.Namespace], int]


def scope_arg(services: Services, args: argparse.Namespace, *, must_exist: bool, hint: str = "") -> str:
    """``--scope`` (which must exist when ``must_exist``), else the terminal user's own scope."""
    scope = args.scope or services.terminal_scope()
    services.workspace.scope_dir(scope)  # validates the name
    if must_exist and args.scope:
        known = services.workspace.list_scopes()
        if scope not in known:
            raise CommandError(f"unknown scope {scope!r} (known scopes: {', '.join(known) or 'none yet'}){hint}")
    return scope


def require_workspace(services: Services) -> None:
    root = services.workspace.root
    if not root.is_dir():
        raise CommandError(
            f"workspace {root} does not exist; check `workspace` in your config or create it with "
            "`membridge memory add` or `membridge chat`"
        )


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


@contextmanager
def stderr_progress() -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress callback ``(stage, done, total)`` drawing bars on stderr, or None when stderr is
    not a terminal (a pipe or a log gets no bars). A total of 0 means "not known"."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)

        yield progress


_STAGES = {"scan": "scanning", "embed": "embedding", "write": "writing", "trigram": "substring index",
           "export": "exporting", "unpack": "unpacking", "restore": "restoring messages"}


def run_async(services: Services, coroutine: Any) -> Any:
    import asyncio

    async def runner() -> Any:
        try:
            return await coroutine
        finally:
            await services.aclose()

    return asyncio.run(runner())
