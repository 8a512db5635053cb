"""Render a results JSON written by bench_memory.py or bench_agent.py as a Markdown table.

    .venv/bin/python bench/results_table.py bench/results/memory-2026-12-02.json
    .venv/bin/python bench/results_table.py --section B --merge bench/results/memory-2026-12-02-B-rerun.json

``--merge`` puts each "... p50" figure and its "... p95" on one row; ``--section`` keeps the
sections whose name starts with the given text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import format_value


def _target(figure: dict[str, Any]) -> str:
    return f"≤ {figure['target']:g} {figure['unit']}" if figure["target"] is not None else ""


def render(payload: dict[str, Any], *, merge: bool = False, section: str | None = None) -> str:
    figures = [f for f in payload["figures"] if section is None or f["section"].startswith(section)]
    p95 = {(f["section"], f["name"][: -len(" p95")]): f for f in figures if merge and f["name"].endswith(" p95")}
    lines = ["| section | figure | value | target | verdict |", "|---|---|---:|---|---|"]
    for figure in figures:
        name = figure["name"]
        value = f"{format_value(float(figure['value']))} {figure['unit']}"
        if merge and name.endswith(" p95") and (figure["section"], name[: -len(" p95")]) in p95:
            continue
        if merge and name.endswith(" p50"):
            stem = name[: -len(" p50")]
            partner = p95.get((figure["section"], stem))
            if partner is not None:
                name = f"{stem} p50 / p95"
                value = (f"{format_value(float(figure['value']))} / {format_value(float(partner['value']))}"
                         f" {figure['unit']}")
        lines.append(f"| {figure['section']} | {name.strip()} | {value} | {_target(figure)} | {figure['verdict'] or ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--merge", action="store_true", help="one row per p50/p95 pair")
    parser.add_argument("--section", help="only sections starting with this text")
    args = parser.parse_args(argv)
    names = args.files or sorted(str(p) for p in (Path(__file__).resolve().parent / "results").glob("*.json"))
    for name in names:
        payload = json.loads(Path(name).read_text(encoding="utf-8"))
        print(f"### {payload['title']} ({Path(name).name})\n")
        print(render(payload, merge=args.merge, section=args.section))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
