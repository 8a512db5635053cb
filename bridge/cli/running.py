"""The commands that start something (the bot, the terminal chat, the console, a cluster role) or
check it (``doctor``, ``cluster status``).

Each imports what it runs when it is called: the parser imports this module for every command,
``--help`` included.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from .common import CommandError, print_json

if TYPE_CHECKING:
    from ..wiring.app import Services


# ---------------------------------------------------------------------- bot
def cmd_run(services: Services, args: argparse.Namespace) -> int:
    import asyncio

    if args.role != "bot":
        return _run_cluster_role(services, args.role)
    from ..wiring.assembly import run_bot

    _prepare_terminal(services, chat=services.config.channels.terminal.enabled)
    try:
        asyncio.run(run_bot(services, terminal_only=False))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


def _run_cluster_role(services: Services, role: str) -> int:
    """``run --role receiver|worker``: one part of a cluster (README "Past one machine")."""
    import asyncio

    if not services.config.cluster.redis_url:
        raise CommandError(f"--role {role} needs cluster.redis_url in config.yaml (e.g. redis://127.0.0.1:6379/0)")
    from ..cluster.receiver import run_receiver
    from ..cluster.worker import run_worker

    try:
        asyncio.run(run_receiver(services) if role == "receiver" else run_worker(services))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


def cmd_cluster_status(services: Services, args: argparse.Namespace) -> int:
    import asyncio

    if not services.config.cluster.redis_url:
        raise CommandError("no cluster is configured: cluster.redis_url is unset (one process runs everything)")
    from ..cluster.connection import UNAVAILABLE
    from ..cluster.status import as_json, collect, render
    from ..redaction import redact, redact_url, url_secrets

    try:
        shards, workers = asyncio.run(collect(services.config))
    except UNAVAILABLE as exc:
        url = services.config.cluster.redis_url
        raise CommandError(f"cannot reach Redis at {redact_url(url)}: {redact(str(exc), *url_secrets(url))}") from None
    if args.json:
        print_json(as_json(shards, workers))
    else:
        print(render(shards, workers))
    return 0


def cmd_chat(services: Services, args: argparse.Namespace) -> int:
    import asyncio

    from ..wiring.assembly import run_bot

    _prepare_terminal(services, chat=True)
    asyncio.run(run_bot(services, terminal_only=True))
    return 0


def _prepare_terminal(services: Services, *, chat: bool) -> None:
    """Before the terminal chat starts: its user is an admin, and it gets the screen to itself.

    The person at this terminal already owns the workspace (``membridge memory revert`` is theirs),
    so in the chat they may do what an admin may, ``/memory revert`` of their own memory included.
    On a real terminal, log records go to the log file instead of between the chat's lines.
    """
    if not chat:
        return
    from ..logs import STATUS_LOGGER, chat_owns_terminal
    from ..wiring.app import local_user

    services.config.admins.append(f"terminal:{services.config.channels.terminal.user or local_user()}")
    if sys.stdin.isatty():
        path = chat_owns_terminal(services.config)
        logging.getLogger(STATUS_LOGGER).info("log: %s (the chat below shows the bot's messages only)", path)


# ------------------------------------------------------------------ console
def cmd_console(services: Services, args: argparse.Namespace) -> int:
    import asyncio

    from ..console import ConsoleError, serve
    from ..wiring.stopping import until_stopped

    def started(url: str) -> None:
        print(f"membridge: memory console at {url} (sign in with console.token or console.admin_token; "
              "Ctrl-C stops it)", file=sys.stderr)

    try:
        asyncio.run(until_stopped(serve(services, on_started=started, health=True)))
    except ConsoleError as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        pass  # Ctrl-C where the loop cannot take the signal itself (Windows): still how the console stops
    return 0


# ------------------------------------------------------------------- doctor
def cmd_doctor(services: Services, args: argparse.Namespace) -> int:
    from ..ops.doctor import run_checks

    checks = run_checks(services, offline=args.offline)
    if args.json:
        print_json([{"name": c.name, "ok": c.ok, "skipped": c.skipped, "detail": c.detail} for c in checks])
    else:
        for check in checks:
            label = "skip" if check.skipped else "ok  " if check.ok else "FAIL"
            print(f"{label}  {check.name}: {check.detail}")
    return 0 if all(c.ok for c in checks) else 1
