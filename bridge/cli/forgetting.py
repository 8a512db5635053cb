"""``membridge memory forget`` and ``membridge memory erase``: forgetting for good.

The work is :mod:`memory.privacy.forgetting`'s; this module turns its answers into lines (or ``--json``)
and its refusals into command errors.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import CommandError, print_json, scope_arg

if TYPE_CHECKING:
    from ..wiring.app import Services

FORGET_DETAILS = """\
Case-insensitive. Every line of MEMORY.md (and of its kept versions), of the daily files and dream
diaries, every conversation turn and summary line holding the text goes, with its index entries and
vectors; then the index is vacuumed. --dry-run lists the matches only."""

ERASE_DETAILS = """\
What the person said in groups stays in the group's memory (forget it there by text).
Without --yes it says what would go and changes nothing."""


def cmd_memory_forget(services: Services, args: argparse.Namespace) -> int:
    from memory import NothingToForget  # imported when used: --help stays fast

    scope = scope_arg(services, args, must_exist=False)
    if args.scope and not any(services.forgetter.holdings(scope).values()):
        raise CommandError(f"unknown scope {scope!r}: nothing is stored for it (known scopes: {_known(services)})")
    try:
        found = services.forgetter.find(scope, args.text) if args.dry_run else services.forgetter.forget(scope, args.text)
    except NothingToForget as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print_json({"scope": scope, "dry_run": args.dry_run, "counts": found.counts(),
                     "matches": [match.__dict__ for match in found.matches]})
    elif args.dry_run:
        print(f"{scope}: would forget ({found.listing()})" if found.matches else f"{scope}: nothing matches")
    else:
        print(f"{scope}: forgotten ({found.listing()})" if found.matches else
              f"{scope}: nothing matched; the index was wiped anyway")
    return 0


def cmd_memory_erase(services: Services, args: argparse.Namespace) -> int:
    scope = args.scope
    holdings = services.forgetter.holdings(scope)
    summary = ", ".join(f"{count} {what}" for what, count in holdings.items())
    if not any(holdings.values()):
        raise CommandError(f"nothing is stored for scope {scope!r} (known scopes: {_known(services)})")
    if not args.yes:
        raise CommandError(f"this would erase scope {scope} for good ({summary}); add --yes to do it")
    services.forgetter.erase(scope)
    if args.json:
        print_json({"scope": scope, "erased": holdings})
    else:
        print(f"{scope}: erased ({summary})")
    return 0




def _known(services: Services) -> str:
    """The scopes that hold anything: a folder, or only conversations (a chat nothing was written for yet)."""
    return ", ".join(services.forgetter.known_scopes()) or "none yet"
