"""The ``membridge`` parser: every command, its options, help and examples, and which handler runs it.

Only the standard library and the command modules (which import what they use when called) are
imported, so ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from .common import Handler
from .forgetting import ERASE_DETAILS, FORGET_DETAILS, cmd_memory_erase, cmd_memory_forget
from .knowledge import (
    cmd_knowledge_add,
    cmd_knowledge_graph,
    cmd_knowledge_list,
    cmd_knowledge_rm,
    cmd_knowledge_show,
)
from .memory import (
    cmd_memory_add,
    cmd_memory_dream,
    cmd_memory_get,
    cmd_memory_history,
    cmd_memory_revert,
    cmd_memory_search,
    cmd_memory_stats,
    cmd_memory_sync,
)
from .portability import EXPORT_DETAILS, IMPORT_DETAILS, cmd_memory_export, cmd_memory_import
from .running import cmd_chat, cmd_cluster_status, cmd_console, cmd_doctor, cmd_run
from .usage import USAGE_DETAILS, cmd_usage


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples keep their line breaks."""


class _Version(argparse.Action):
    """``--version``: read from the installed package only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from .. import installed_version

        print(f"membridge {installed_version()}")
        parser.exit()


_MAIN_EPILOG = """\
--config and -v may also follow the command (membridge memory search tea -v).
Put -- before a query that starts with "-": membridge memory search -- -v2 release notes
Without a config file membridge uses a workspace in ~/.local/share/membridge (see docs/configuration.md).

examples:
  membridge chat                          talk to the bot in this terminal
  membridge memory search "green tea"     what do I remember about green tea?
  membridge doctor                        is everything set up?"""


def _global_options(parser: argparse.ArgumentParser, *, after_command: bool) -> argparse.ArgumentParser:
    """--config and -v. After a command they default to SUPPRESS, so they never undo the same option
    given before it (argparse copies a subcommand's values over the main parser's)."""
    unset = argparse.SUPPRESS if after_command else None
    parser.add_argument("--config", default=unset,
                        help="config file (default: $MEMBRIDGE_CONFIG, ./config.yaml, ~/.config/membridge/config.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true", default=unset if after_command else False,
                        help="log debug messages")
    return parser


def build_parser() -> argparse.ArgumentParser:
    common = _global_options(argparse.ArgumentParser(add_help=False), after_command=True)
    parser = argparse.ArgumentParser(prog="membridge", description="A chat-bot bridge with a long memory.",
                                     epilog=_MAIN_EPILOG, formatter_class=_Formatter)
    _global_options(parser, after_command=False)
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    parser.set_defaults(handler=None, help_parser=parser, long_running=False, memory_only_llm=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def add(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, handler: Handler, help_text: str, *, scope: bool = True,
            json_flag: bool = True, example: str, details: str = "", **defaults: Any) -> argparse.ArgumentParser:
        description = help_text[0].upper() + help_text[1:] + "." + (f"\n\n{details}" if details else "")
        command = sub.add_parser(name, help=help_text, description=description, epilog=f"example:\n  {example}",
                                 parents=[common], formatter_class=_Formatter)
        command.set_defaults(handler=handler, **defaults)
        if scope:
            command.add_argument("--scope", help="whose memory (default: this terminal's user)")
        if json_flag:
            command.add_argument("--json", action="store_true", help="print one JSON document")
        return command

    def group(name: str, help_text: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        """A command with subcommands; alone, it prints its own help."""
        command = commands.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                                      parents=[common], formatter_class=_Formatter)
        command.set_defaults(help_parser=command)
        return command.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND", title="subcommands")

    run = add(commands, "run", cmd_run, "start the bot: every enabled channel, the flush worker and the nightly Deep Dream",
        scope=False, json_flag=False, example="membridge run", long_running=True, memory_only_llm=True,
        details="Channels are enabled in config.yaml (channels.*); the terminal is on by default. One log line names\n"
                "each part as it starts and one says when it stops; SIGINT (Ctrl-C) or SIGTERM stops it cleanly.\n"
                "With no LLM configured the bot saves what you tell it and answers questions with memory search\n"
                "results. --role receiver|worker runs one part of a cluster (needs cluster.redis_url).")
    run.add_argument("--role", choices=("bot", "receiver", "worker"), default="bot",
                     help="bot: everything in this process (default); receiver: take messages into Redis; "
                          "worker: answer the shards it holds")
    add(commands, "chat", cmd_chat, "chat with the bot in this terminal (no chat token needed)", scope=False,
        json_flag=False, example="membridge chat", long_running=True, memory_only_llm=True,
        details="Each line is a message from you; Ctrl-D quits. /help lists the chat commands.")
    add(commands, "console", cmd_console, "serve the memory console, a web page to see and fix what the bot remembers",
        scope=False, json_flag=False, example="MEMBRIDGE_CONSOLE_TOKEN=s3cret membridge console", long_running=True,
        details="It listens on console.host:console.port (default http://127.0.0.1:8765/) and needs\n"
                "console.token (read) or console.admin_token (read and write). Ctrl-C stops it.")

    memory = group("memory", "search and maintain memory")
    add(memory, "sync", cmd_memory_sync, "index changed memory and knowledge files", example="membridge memory sync")
    search = add(memory, "search", cmd_memory_search, "hybrid search over a scope's memory and knowledge",
                 example='membridge memory search "green tea" --limit 3',
                 details='Put -- before a query that starts with "-": membridge memory search -- -v2 release')
    search.add_argument("query")
    search.add_argument("--limit", type=_positive, default=None, help="most results (default: memory.max_results)")
    get = add(memory, "get", cmd_memory_get, "print lines of a memory file",
              example="membridge memory get MEMORY.md --start 1 --lines 20")
    get.add_argument("path", help="MEMORY.md, memory/YYYY-MM-DD.md or knowledge/<category>/<page>.md")
    get.add_argument("--start", type=_positive, default=1, help="first line (1-based)")
    get.add_argument("--lines", type=_positive, default=None, help="how many lines")
    mem_add = add(memory, "add", cmd_memory_add, "append a note to today's daily memory",
                  example='membridge memory add "passport expires 2027-03-01"',
                  details="--scope must name a scope that exists; --create starts a new one.")
    mem_add.add_argument("text", nargs="+")
    mem_add.add_argument("--create", action="store_true", help="create --scope if it does not exist yet")
    dream = add(memory, "dream", cmd_memory_dream, "run Deep Dream now and print the MEMORY.md diff",
                example="membridge memory dream --days 3", details="Needs an LLM (llm.* in config.yaml).")
    dream.add_argument("--days", type=_days, default=None, help="daily files to read (1-30; default memory.dream.lookback_days)")
    dream.add_argument("--force", action="store_true", help="dream even over daily memory already dreamt")
    add(memory, "stats", cmd_memory_stats, "a scope's memory at a glance: counts, last sync, Deep Dream, embeddings",
        example="membridge memory stats --json",
        details="The same figures as the memory console's overview: MEMORY.md entries, notes and days of daily\n"
                "memory, dream diaries, knowledge pages, last sync, last and next Deep Dream, the embedder,\n"
                "and (--json) the notes of each of the last 91 days.")
    history = add(memory, "history", cmd_memory_history, "list MEMORY.md versions", example="membridge memory history",
                  details="--file memory/YYYY-MM-DD.md lists a daily file's versions (one per console edit).")
    revert = add(memory, "revert", cmd_memory_revert, "restore a MEMORY.md version (default: the previous one)",
                 example="membridge memory revert 3",
                 details="The restore is itself a new version; when the file already equals that version, nothing\n"
                         "is written and no version is recorded. --file memory/YYYY-MM-DD.md restores a daily file.")
    revert.add_argument("version", nargs="?", type=_positive, default=None)
    for command in (history, revert):
        command.add_argument("--file", default="MEMORY.md", help="MEMORY.md (default) or memory/YYYY-MM-DD.md")

    export = add(memory, "export", cmd_memory_export, "write a scope's whole memory to a zip",
                 example="membridge memory export --scope telegram-42 --out telegram-42.zip", details=EXPORT_DETAILS)
    export.add_argument("--out", required=True, metavar="FILE.zip", help="where to write the zip")
    restore = add(memory, "import", cmd_memory_import, "restore an export zip into an empty scope",
                  example="membridge memory import telegram-42.zip --scope telegram-42", details=IMPORT_DETAILS)
    restore.add_argument("file", metavar="FILE.zip", help="a zip made by membridge memory export")
    forget = add(memory, "forget", cmd_memory_forget, "forget a text everywhere in a scope's memory, for good",
                 example='membridge memory forget "door code" --dry-run', details=FORGET_DETAILS)
    forget.add_argument("text")
    forget.add_argument("--dry-run", action="store_true", help="list what matches, per place with file:line; change nothing")
    erase = add(memory, "erase", cmd_memory_erase, "erase a whole scope: files, index, vectors, versions, chats",
                scope=False, example="membridge memory erase --scope slack-T1-U2 --yes", details=ERASE_DETAILS)
    erase.add_argument("--scope", required=True, help="the scope to erase")
    erase.add_argument("--yes", action="store_true", help="really erase it")

    knowledge = group("knowledge", "the shared knowledge base")
    k_list = add(knowledge, "list", cmd_knowledge_list, "list knowledge pages", scope=False,
                 example="membridge knowledge list --category tech")
    k_list.add_argument("--category")
    add(knowledge, "show", cmd_knowledge_show, "print a page", scope=False,
        example="membridge knowledge show tech/deploy").add_argument("page", help="<category>/<page>")
    k_add = add(knowledge, "add", cmd_knowledge_add, "create or replace a page (text, --file, or stdin)", scope=False,
                example="membridge knowledge add tech/deploy --file deploy.md")
    k_add.add_argument("page", help="<category>/<page>")
    k_add.add_argument("text", nargs="*", help="the content (default: read stdin)")
    k_add.add_argument("--file", help="read the content from this markdown file")
    add(knowledge, "rm", cmd_knowledge_rm, "delete a page", scope=False,
        example="membridge knowledge rm tech/old-notes").add_argument("page")
    add(knowledge, "graph", cmd_knowledge_graph, "pages and the links between them", scope=False,
        example="membridge knowledge graph --json")

    cluster = group("cluster", "receivers and shard workers on Redis (cluster.redis_url)")
    add(cluster, "status", cmd_cluster_status, "shards, their owners, stream lag, pending messages, last nightly run",
        scope=False, example="membridge cluster status")

    usage = add(commands, "usage", cmd_usage, "tokens and turns per scope per day (what each person costs)", scope=False,
                example="membridge usage --days 30 --scope telegram-42", details=USAGE_DETAILS)
    usage.add_argument("--days", type=_year_days, default=7, help="days back, today included (1-366; default 7)")
    usage.add_argument("--scope", help="one scope only (default: every scope)")

    doctor = add(commands, "doctor", cmd_doctor, "check config, paths, LLM, embeddings, SQLite and LanceDB", scope=False,
                 example="membridge doctor --offline",
                 details="One line per part, ok or FAIL and why; exit status 1 when any part fails.")
    doctor.add_argument("--offline", action="store_true",
                        help="no network and nothing heavy: skip the LLM, and check that LanceDB and the embedding "
                             "model are installed without loading them")
    return parser


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return number


def _days_up_to(most: int) -> Callable[[str], int]:
    """A parser of a number of days, 1 to ``most``."""
    def parse(value: str) -> int:
        number = _positive(value)
        if number > most:
            raise argparse.ArgumentTypeError(f"{number} days is more than {most}")
        return number

    return parse


_days = _days_up_to(30)
_year_days = _days_up_to(366)
