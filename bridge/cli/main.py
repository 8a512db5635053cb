"""The ``membridge`` command line (also ``python -m bridge``): load the config, run one command.

Every command prints its result on stdout (one JSON document with ``--json``); errors go to stderr
with a non-zero exit status: 2 for a bad command line or configuration, 1 for a failure at run time.

Only the standard library is imported here: each command imports what it uses, so ``--help`` and
``--version`` answer at once and ``memory history`` never loads LanceDB or the LLM client. The
parser is :mod:`.parser`; the commands that start something or check it are :mod:`.running`; the
memory and knowledge commands have modules of their own (:mod:`.memory`, :mod:`.knowledge`,
:mod:`.portability`, :mod:`.forgetting`, :mod:`.usage`), on what they share (:mod:`.common`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .common import CommandError
from .parser import build_parser

if TYPE_CHECKING:
    from ..config import AppConfig
    from ..llm import LLMClient


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.handler is None:  # `membridge` or `membridge memory` alone: show what can follow
        args.help_parser.print_help()
        return 0
    from ..config import ConfigError, load_config, no_config_notice
    from ..logs import config_secrets, setup_logging

    setup_logging(args.verbose)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"membridge: {exc}", file=sys.stderr)
        return 2
    if config.source is None:
        print(f"membridge: {no_config_notice()}", file=sys.stderr)
    setup_logging(args.verbose, config_secrets(config), config.logging, long_running=args.long_running)
    from memory import ForgetDeferred, KnowledgeError, MemoryPathError, ScopeError, WorkspaceLockTimeout

    from ..wiring.app import Services

    services = Services(config, llm=_memory_only_llm(config) if args.memory_only_llm else None)
    try:
        code = int(args.handler(services, args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except (CommandError, MemoryPathError, ScopeError, KnowledgeError, WorkspaceLockTimeout, ForgetDeferred) as exc:
        print(f"membridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("membridge: interrupted", file=sys.stderr)
        return 130
    finally:
        services.close()


def _memory_only_llm(config: AppConfig) -> LLMClient | None:
    """With no LLM configured, the chat still shows memory working (see :mod:`bridge.offline`)."""
    if config.llm.base_url or config.llm.api_key:
        return None
    from ..offline import MemoryOnlyLLM

    return MemoryOnlyLLM()


def _closed_pipe() -> int:
    """The reader went away (``| head``): stop quietly, as ``cat`` would, with 128 + SIGPIPE.

    stdout is pointed at /dev/null so the interpreter's final flush cannot fail a second time.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
