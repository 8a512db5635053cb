"""Full ``membridge memory sync`` of one generated workspace under two versions of the code, alternating.

    .venv/bin/python bench/bench_sync_ab.py --before DIR [--rounds 3] [--chunks-per-file 3] [--workdir DIR]

The issue 38 cost target: a full sync of the 1,000-file generated workspace (``common.py``) with
the default configuration (the local USE model) must take at most 1.1 x what it took before.
``--before`` is a checkout of the earlier code (e.g. ``git worktree add /tmp/before 202f251``);
this repository is "after". Each round syncs the same workspace on a fresh index (``index.db*`` and
``vectors/`` deleted) once with each version, in alternating order, as its own process
(``python -m bridge`` with the version's folder as the working directory), and records wall clock
and the child's CPU seconds (user + system, from ``resource.getrusage``): CPU time moves less than
wall clock when other work shares the machine. Results: ``bench/results/sync-ab-<date>[-tag].json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import WorkspaceSpec, generate_workspace, machine_info

REPO = Path(__file__).resolve().parent.parent


def one_sync(code: Path, config: Path, workspace: Path) -> dict[str, float | int]:
    """A fresh-index sync by the code in ``code``: wall seconds, CPU seconds and its report."""
    for stale in workspace.glob("index.db*"):
        stale.unlink()
    shutil.rmtree(workspace / "vectors", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bridge", "--config", str(config), "memory", "sync", "--json"],
                          cwd=code, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(done.stdout)
    return {"wall_s": round(wall, 2), "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "chunks": report["chunks_written"], "vectors": report["vectors_written"], "embed_calls": report["embed_calls"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks-per-file", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/membridge-bench/sync-ab"))
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    workspace = args.workdir / "workspace"
    if not workspace.exists():
        generate_workspace(workspace, WorkspaceSpec(files=1000, chunks_per_file=args.chunks_per_file))
    config = args.workdir / "config.yaml"
    config.write_text(f"workspace: {workspace}\n", encoding="utf-8")
    runs: dict[str, list[dict[str, float | int]]] = {"before": [], "after": []}
    for number in range(args.rounds):
        order = ("before", "after") if number % 2 == 0 else ("after", "before")
        for which in order:
            runs[which].append(one_sync(args.before if which == "before" else REPO, config, workspace))
            print(f"round {number + 1} {which:>6}: {runs[which][-1]}", flush=True)
    summary = {which: {key: statistics.median(float(r[key]) for r in rows) for key in ("wall_s", "cpu_s")}
               for which, rows in runs.items()}
    ratio = {key: round(summary["after"][key] / summary["before"][key], 3) for key in ("wall_s", "cpu_s")}
    print(f"median before {summary['before']}, after {summary['after']}, after/before {ratio} (target <= 1.1)")
    path = REPO / "bench" / "results" / f"sync-ab-{date.today().isoformat()}{'-' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps({"machine": machine_info(), "args": {k: str(v) for k, v in vars(args).items()},
                                "runs": runs, "median": summary, "ratio": ratio}, indent=1) + "\n", encoding="utf-8")
    print(f"results: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
