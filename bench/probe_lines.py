"""The vector side alone, outside the product: a bilingual set's questions against one vector per note line and one per day.

    .venv/bin/python bench/probe_lines.py [--data bench/data/bilingual_lists.json]

Why: issue 38 moves search from one vector per ~800-character chunk to one per entry. This probe
says what that unit can reach on a set with the real local model (USE v3), before any of the
product's other parts (keywords, recency, thresholds) count: every note line (``- text``, as the
flush writes it) and every day (its lines joined, about what one chunk of a list-shaped day
holds) is embedded once; each question's top 5 lines and top 5 days by cosine are taken. Figures
per kind: hit@5 and MRR over the lines (a hit: an answer line), and hit@5 over the days (a hit:
an answer's day). No workspace, no index; the model loads from its package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import evalkit
from eval_bilingual import DATA, KINDS

from memory.vectors.embedding import LocalEmbedding


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA.with_name("bilingual_lists.json"))
    args = parser.parse_args()
    data: dict[str, Any] = json.loads(args.data.read_text(encoding="utf-8"))
    lines = [(m["id"], "MEMORY.md", m["text"]) for m in data["memory_md"]]
    lines += [(n["id"], str(b["day"]), n["text"]) for b in data["days"] for n in b["notes"]]
    days = {day: "\n".join(f"- {text}" for _, d, text in lines if d == day) for _, day, _ in lines}
    model = LocalEmbedding()
    line_vectors, _ = model.embed_all([f"- {text}" for _, _, text in lines])
    day_vectors, _ = model.embed_all(list(days.values()))
    day_of = {note_id: day for note_id, day, _ in lines}
    by_line: dict[str, evalkit.Tally] = {}
    by_day: dict[str, evalkit.Tally] = {}
    for q in data["questions"]:
        query = model.embed_query(q["q"])
        top_lines = [lines[i][0] for i in (-(line_vectors @ query)).argsort()[: evalkit.LIMIT]]
        top_days = [list(days)[i] for i in (-(day_vectors @ query)).argsort()[: evalkit.LIMIT]]
        for group in (q["kind"], "all"):
            by_line.setdefault(group, evalkit.Tally()).add(evalkit.first_rank([i in q["answers"] for i in top_lines]), 0)
            by_day.setdefault(group, evalkit.Tally()).add(evalkit.first_rank([d in {day_of[a] for a in q["answers"]} for d in top_days]), 0)
    order = [k for k in (*KINDS, "all") if k in by_line]
    print(evalkit.table(f"{args.data.name}: USE v3 alone, one vector per note line", [(k, evalkit.summarise(by_line[k])) for k in order]))
    print(evalkit.table(f"{args.data.name}: USE v3 alone, one vector per day", [(k, evalkit.summarise(by_day[k])) for k in order]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
