"""Start-up time of ``membridge`` commands, as a user runs them: a fresh process each time.

A small seeded workspace (``common.generate_workspace``: 100 files, ~300 chunks) is written once
per embedding provider (none, local, openai) and indexed keyword-only and with the local model;
then hyperfine times each command (one warm-up run, then ``--runs``), every reading command with
every provider. The table gives, per command and tree, the median and
the fastest wall-clock run and the mean CPU time (user + system), with the 1-minute load average
as each command's runs began: on a shared machine the CPU time and the fastest run say most about
the code, the median about the load.
``--before DIR`` also times another checkout of the code with the same venv (``PYTHONPATH=DIR``),
right before each command of this tree, so both see the same machine load:

    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python bench/bench_startup.py --before /tmp/before

``PYTHONDONTWRITEBYTECODE`` is dropped, as on a user's machine: modules are compiled once, then
loaded from ``__pycache__``. Needs hyperfine (``apt-get install hyperfine``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from common import REPO, WorkspaceSpec, generate_workspace

SCOPE = "telegram-chat-1001"
MEMBRIDGE = REPO / ".venv" / "bin" / "membridge"

#: The embedding provider of each config: ``none`` (keyword-only), ``local`` (the bundled model) and
#: ``openai`` (an endpoint nobody answers: a reading command must never reach for it, nor import it).
PROVIDERS = ("none", "local", "openai")
#: Commands that only read: each must stay light whatever the provider (issue 36, item 4).
READING: list[tuple[str, str]] = [
    ("--version", "--version"),
    ("memory history", f"memory history --scope {SCOPE}"),
    ("memory get MEMORY.md", f"memory get MEMORY.md --scope {SCOPE}"),
    ("knowledge list", "knowledge list"),
    ("usage", "usage"),
]
#: (label, config, arguments): every reading command with every provider, then the heavier ones.
COMMANDS: list[tuple[str, str, str]] = [
    ("--help", "none", "--help"),
    *((f"{label} ({provider})", provider, arguments) for label, arguments in READING for provider in PROVIDERS),
    ("doctor --offline", "none", "doctor --offline"),
    ("memory search, keyword-only", "none", f"memory search 'deploy server' --scope {SCOPE}"),
    ("memory search, hybrid (local model)", "local", f"memory search 'deploy server' --scope {SCOPE}"),
]
_EMBEDDING = {"none": "provider: none", "local": "provider: local",
              "openai": "provider: openai\n  base_url: http://127.0.0.1:9/v1\n  api_key: unused"}


def write_configs(work: Path) -> dict[str, Path]:
    """One workspace per provider: an index without vectors, one with the local model's, and one an
    OpenAI-compatible endpoint would embed (never indexed here: nothing reads its vectors)."""
    configs = {}
    for provider in PROVIDERS:
        generate_workspace(work / provider, WorkspaceSpec(files=100, chunks_per_file=3))
        path = work / f"{provider}.yaml"
        path.write_text(f"workspace: ./{provider}\nembedding:\n  {_EMBEDDING[provider]}\n", encoding="utf-8")
        configs[provider] = path
    return configs


def command_line(config: Path, arguments: str, tree: str | None) -> str:
    prefix = f"env PYTHONPATH={shlex.quote(tree)} " if tree else ""
    return f"{prefix}{MEMBRIDGE} --config {config} {arguments}"


def works(command: str) -> bool:
    return subprocess.run(command, shell=True, capture_output=True, check=False).returncode == 0


def timings(commands: list[str], runs: int, work: Path) -> list[str]:
    """"median / fastest / CPU" for each command, run one after the other (not in parallel)."""
    export = work / "hyperfine.json"
    subprocess.run(["hyperfine", "--style", "none", "--warmup", "1", "--runs", str(runs), "--export-json",
                    str(export), *commands], check=True, capture_output=True, text=True)
    return [f"{r['median']:.2f} / {r['min']:.2f} / {r['user'] + r['system']:.2f} s"
            for r in json.loads(export.read_text())["results"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", help="also time this checkout (PYTHONPATH), before each command of this tree")
    parser.add_argument("--after", help="time this checkout (PYTHONPATH) instead of the repository's working tree")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        configs = write_configs(work)
        for provider in ("none", "local"):
            subprocess.run([str(MEMBRIDGE), "--config", str(configs[provider]), "memory", "sync"], check=True,
                           capture_output=True)
        shutil.copy(work / "none" / "index.db", work / "openai" / "index.db")  # the same files, keyword-indexed
        trees = ([args.before] if args.before else []) + [args.after]
        heads = (["before"] if args.before else []) + [args.after or "this tree"]
        print(f"| command ({args.runs} runs: p50 / fastest / CPU) | " + " | ".join(heads) + " | load |")
        print("|---|" + "---:|" * (len(trees) + 1))
        for label, config_name, arguments in COMMANDS:
            load = f"{os.getloadavg()[0]:.1f}"
            lines = [command_line(configs[config_name], arguments, tree) for tree in trees]
            timed = [line for line in lines if works(line)]
            figures = dict(zip(timed, timings(timed, args.runs, work), strict=True)) if timed else {}
            cells = [figures.get(line, "n/a") for line in lines]
            print(f"| `{label}` | " + " | ".join(cells) + f" | {load} |", flush=True)


if __name__ == "__main__":
    main()
