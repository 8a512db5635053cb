"""Start-up time of ``membridge`` commands, as a user runs them: a fresh process each time.

A small seeded workspace (``common.generate_workspace``: 100 files, ~300 chunks) is written once
and indexed twice, keyword-only and with the local embedding model; then hyperfine times each
command (one warm-up run, then ``--runs``). The table gives, per command and tree, the median and
the fastest wall-clock run and the mean CPU time (user + system): on a shared machine the CPU time
and the fastest run say most about the code, the median about the load.
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
import subprocess
import tempfile
from pathlib import Path

from common import REPO, WorkspaceSpec, generate_workspace

SCOPE = "telegram-chat-1001"
MEMBRIDGE = REPO / ".venv" / "bin" / "membridge"

#: (label, config, arguments); the config is "keyword" (embedding.provider: none) or "hybrid".
COMMANDS: list[tuple[str, str, str]] = [
    ("--help", "keyword", "--help"),
    ("--version", "keyword", "--version"),
    ("memory history", "keyword", f"memory history --scope {SCOPE}"),
    ("memory get MEMORY.md", "keyword", f"memory get MEMORY.md --scope {SCOPE}"),
    ("knowledge list", "keyword", "knowledge list"),
    ("doctor --offline", "keyword", "doctor --offline"),
    ("memory search, keyword-only", "keyword", f"memory search 'deploy server' --scope {SCOPE}"),
    ("memory search, hybrid (local model)", "hybrid", f"memory search 'deploy server' --scope {SCOPE}"),
]


def write_configs(work: Path) -> dict[str, Path]:
    """One workspace, two copies: an index without vectors and one with the local model's."""
    configs = {}
    for name, provider in (("keyword", "none"), ("hybrid", "local")):
        generate_workspace(work / name, WorkspaceSpec(files=100, chunks_per_file=3))
        path = work / f"{name}.yaml"
        path.write_text(f"workspace: ./{name}\nembedding:\n  provider: {provider}\n", encoding="utf-8")
        configs[name] = path
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
        for config in configs.values():
            subprocess.run([str(MEMBRIDGE), "--config", str(config), "memory", "sync"], check=True, capture_output=True)
        trees = ([args.before] if args.before else []) + [args.after]
        heads = (["before"] if args.before else []) + [args.after or "this tree"]
        print(f"| command ({args.runs} runs: p50 / fastest / CPU) | " + " | ".join(heads) + " |")
        print("|---|" + "---:|" * len(trees))
        for label, config_name, arguments in COMMANDS:
            lines = [command_line(configs[config_name], arguments, tree) for tree in trees]
            timed = [line for line in lines if works(line)]
            figures = dict(zip(timed, timings(timed, args.runs, work), strict=True)) if timed else {}
            cells = [figures.get(line, "n/a") for line in lines]
            print(f"| `{label}` | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
