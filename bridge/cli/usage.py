"""``membridge usage``: tokens and turns per scope per day, from the usage book in ``index.db``.

A reading command: it opens the index's SQLite file alone (no memory manager, no model client), so
it answers in a fraction of a second whatever the providers are.
"""

from __future__ import annotations

import argparse
from datetime import date
from typing import TYPE_CHECKING

from .common import CommandError, print_json

if TYPE_CHECKING:
    from ..ops.usage import UsageRow
    from ..wiring.app import Services

USAGE_DETAILS = """Each row is one scope on one day and one kind: chat (answered messages, messages refused over
limits:) or the memory upkeep done for the scope (flush, daily summary, dream: its model requests),
with the model's prompt and completion tokens (~ marks figures estimated where the server sent no
usage). Limits count chat only. Rows are kept usage.keep_days days."""


def cmd_usage(services: Services, args: argparse.Namespace) -> int:
    from memory import Database

    from ..ops.usage import UsageBook, days_back

    path = services.workspace.db_path
    if not path.is_file():
        raise CommandError(f"no index at {path} yet: nothing has been used (is --config the bot's config?)")
    db = Database(path)
    try:
        rows = UsageBook(db).report(*days_back(date.today(), args.days), scope=args.scope)
    finally:
        db.close()
    if args.json:
        print_json([row.as_json() for row in rows])
    else:
        print(render(rows, args.days))
    return 0


def render(rows: list[UsageRow], days: int) -> str:
    """The table: one line per scope, day and kind, newest day first, then a total (its turns: the
    answered messages)."""
    from ..ops.usage import CHAT, KINDS

    if not rows:
        return f"no model use recorded in the last {days} day(s)"
    width = max(len("scope"), *(len(row.scope) for row in rows))
    kinds = [KINDS.get(row.kind, row.kind) for row in rows]
    kind_width = max(len("kind"), *(len(kind) for kind in kinds))
    lines = [f"{'day':<10}  {'scope':<{width}}  {'kind':<{kind_width}}  {'turns':>6} {'refused':>7} {'prompt':>10}"
             f" {'completion':>10} {'total':>11}"]
    for row, kind in zip(rows, kinds, strict=True):
        mark = "~" if row.estimated else ""
        lines.append(f"{row.day:<10}  {row.scope:<{width}}  {kind:<{kind_width}}  {row.turns:>6} {row.refused:>7}"
                     f" {row.prompt_tokens:>10,} {row.completion_tokens:>10,} {mark + format(row.tokens, ','):>11}")
    total = sum(row.tokens for row in rows)
    lines.append(f"{'total':<10}  {'':<{width}}  {'':<{kind_width}}  {sum(r.turns for r in rows if r.kind == CHAT):>6}"
                 f" {sum(r.refused for r in rows):>7} {sum(r.prompt_tokens for r in rows):>10,}"
                 f" {sum(r.completion_tokens for r in rows):>10,} {total:>11,}")
    return "\n".join(lines)
