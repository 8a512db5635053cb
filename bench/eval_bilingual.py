"""Bilingual (English + Chinese) retrieval evaluation over one person's long memory.

    .venv/bin/python bench/eval_bilingual.py [--data PATH] [--check] [--fresh] [--set memory.half_life_days=90] [--label L]

Data: ``bench/data/bilingual.json``, written for membridge (every note and question is original):
one person's memory in one scope (``terminal-eval``, ``memory.scope: user``): a small MEMORY.md and
~215 note lines over ~150 days of the last 14 months, about half English and half Chinese, in the
format the bot's flush writes (``## HH:MM conversation notes <!-- flush:N -->`` then ``- ...``
lines in ``memory/YYYY-MM-DD.md``). Days are stored as offsets from today and written relative to
the real ``date.today()``, so relative-time questions hold on any day.

~100 questions, each with the ids of the note lines that answer it, tagged by kind: ``exact``
(shares key words), ``paraphrase`` (same language, other words), ``crosslingual`` (Chinese
question about an English note, and the reverse), ``update`` (asks for a fact that changed: the
answer is the newer note), ``time`` (a window resolved against today: yesterday, last week, a
month name, a weekday, two months ago, last month, a date; notes of the same topic lie outside the
window) and ``old`` (the answer is 300+ days old and yesterday holds a loosely related note).

A whole-process ``membridge memory sync`` indexes the workspace, then every question goes through
the CLI's search code with limit 5 (see ``evalkit``). A returned result **covers** a note when its
path is the note's file and its line range holds the note's line (exact, independent of how the
text is chunked). Figures: recall@5 (a question is found when one of its answer lines is covered)
and MRR over the 5, overall, per kind and per question language; for ``update`` questions also the
share where the newer note ranks above the older one ("older absent from the top 5" counts as
above; a tie, both in one chunk, does not).

``--data bench/data/bilingual_lists.json`` runs the set of list-shaped days (issue 38): another
person, 15-26 unrelated notes a day, exact, paraphrase and crosslingual questions only. A set
holding ``"strict_words": true`` is checked before anything runs (:mod:`shared_words`): a
paraphrase or crosslingual question sharing a key word with an answer, or an exact question
sharing none, is printed and the script exits with status 1 (``--check`` runs only this). A
set's results and default work folder are named after its file: ``bilingual-lists-<date>-<label>.json``.
"""

from __future__ import annotations

import argparse
import calendar
import json
import re
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import evalkit
import shared_words
from evalkit import Searcher, summarise

DATA = Path(__file__).resolve().parent / "data" / "bilingual.json"
KINDS = ("exact", "paraphrase", "crosslingual", "update", "time", "old")
MONTHS_EN = tuple(calendar.month_name)[1:]
WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_PLACEHOLDER = re.compile(r"\{(month_en|month_zh|weekday_en|weekday_zh|date|date_zh):(-?\d+)\}")
_MONTH_DAY = re.compile(r"^m(-?\d+)/(\d+)$")
_CJK = re.compile(r"[\u3400-\u9fff]")


# ----------------------------------------------------------------------- dates
def add_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def resolve_day(spec: int | str, today: date) -> date:
    """An offset in days, or ``m<months>/<day>``: that day of the month ``months`` from today's
    (clamped to the month's length and to today)."""
    if isinstance(spec, int):
        return today + timedelta(days=spec)
    match = _MONTH_DAY.match(spec)
    if not match:
        raise ValueError(f"bad day {spec!r}")
    year, month = add_months(today, int(match.group(1)))
    last = calendar.monthrange(year, month)[1]
    return min(date(year, month, min(int(match.group(2)), last)), today)


def fill(text: str, today: date) -> str:
    """Replace ``{month_en:-120}`` and the other placeholders by today's values."""
    def one(match: re.Match[str]) -> str:
        kind, day = match.group(1), today + timedelta(days=int(match.group(2)))
        return {
            "month_en": MONTHS_EN[day.month - 1], "month_zh": f"{day.month}月",
            "weekday_en": WEEKDAYS_EN[day.weekday()], "weekday_zh": WEEKDAYS_ZH[day.weekday()],
            "date": day.isoformat(), "date_zh": f"{day.year}年{day.month}月{day.day}日",
        }[kind]

    return _PLACEHOLDER.sub(one, text)


def window(spec: dict[str, int], today: date) -> tuple[date, date]:
    """A time question's window (inclusive): day, week (-1 = last calendar week), month (the
    month of an offset), month_ago (calendar months back), or around ± tol days."""
    if "day" in spec:
        day = today + timedelta(days=spec["day"])
        return day, day
    if "week" in spec:
        start = today - timedelta(days=today.weekday()) + timedelta(weeks=spec["week"])
        return start, start + timedelta(days=6)
    if "around" in spec:
        mid = today + timedelta(days=spec["around"])
        return mid - timedelta(days=spec["tol"]), mid + timedelta(days=spec["tol"])
    if "month" in spec:
        shifted = today + timedelta(days=spec["month"])
        year, month = shifted.year, shifted.month
    else:
        year, month = add_months(today, -spec["month_ago"])
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


# ------------------------------------------------------------------- the files
@dataclass
class Layout:
    files: dict[str, str] = field(default_factory=dict)  # path in the scope -> content
    where: dict[str, tuple[str, int]] = field(default_factory=dict)  # note id -> (path, line)
    dates: dict[str, date] = field(default_factory=dict)  # note id -> its day (daily notes only)
    topics: dict[str, str] = field(default_factory=dict)  # note id -> topic


def materialise(data: dict[str, Any], today: date) -> Layout:
    """The scope's files for ``today``: MEMORY.md and one daily file per day, blocks in time order."""
    layout = Layout()
    lines = [f"- {m['text']}" for m in data["memory_md"]]
    layout.files["MEMORY.md"] = "\n".join(lines) + "\n"
    layout.where.update({m["id"]: ("MEMORY.md", n) for n, m in enumerate(data["memory_md"], start=1)})
    blocks = [(resolve_day(b["day"], today), b["time"], number, b) for number, b in enumerate(data["days"], start=1)]
    by_path: dict[str, list[str]] = {}
    for day, time, number, block in sorted(blocks, key=lambda item: item[:3]):
        path = f"memory/{day.isoformat()}.md"
        body = by_path.setdefault(path, [])
        body.append(f"## {time} conversation notes <!-- flush:{number} -->")
        for note in block["notes"]:
            body.append(f"- {fill(note['text'], today)}")
            layout.where[note["id"]] = (path, len(body))
            layout.dates[note["id"]] = day
            if "topic" in note:
                layout.topics[note["id"]] = note["topic"]
    layout.files.update({path: "\n".join(body) + "\n" for path, body in by_path.items()})
    return layout


def check_questions(data: dict[str, Any], layout: Layout, today: date) -> list[str]:
    """Today's problems with the data: a time question's answer outside its window, another note
    of the same topic inside it, or no note of the topic outside it; an old answer under 300 days."""
    problems = [f"{q['id']}: answer {a} is under 300 days old" for q in data["questions"] if q["kind"] == "old"
                for a in q["answers"] if (today - layout.dates[a]).days < 300]
    for q in (q for q in data["questions"] if q["kind"] == "time"):
        start, end = window(q["window"], today)
        inside = {i for i, t in layout.topics.items() if t == q["topic"] and start <= layout.dates[i] <= end}
        outside = [i for i, t in layout.topics.items() if t == q["topic"] and i not in inside]
        if any(not start <= layout.dates[a] <= end for a in q["answers"]):
            problems.append(f"{q['id']}: an answer lies outside {start}..{end}")
        if inside - set(q["answers"]):
            problems.append(f"{q['id']}: {sorted(inside - set(q['answers']))} also in {start}..{end}")
        if not outside:
            problems.append(f"{q['id']}: no note of topic {q['topic']!r} outside the window")
    return problems


def write_workspace(data: dict[str, Any], layout: Layout, workspace: Path) -> None:
    scope_dir = workspace / "scopes" / data["scope"]
    daily = {Path(p).name: text for p, text in layout.files.items() if p.startswith("memory/")}
    written, removed = evalkit.sync_daily_files(scope_dir / "memory", daily)
    written += evalkit.write_if_changed(scope_dir / "MEMORY.md", layout.files["MEMORY.md"])
    print(f"workspace {workspace}: {len(layout.files)} files, {written} written, {removed} removed")


# -------------------------------------------------------------------- searching
def covers(result: dict[str, Any], place: tuple[str, int]) -> bool:
    return result["path"] == place[0] and result["start_line"] <= place[1] <= result["end_line"]


def rank_of(results: list[dict[str, Any]], ids: list[str], layout: Layout) -> int | None:
    return evalkit.first_rank([any(covers(r, layout.where[i]) for i in ids) for r in results])


def evaluate(searcher: Searcher, data: dict[str, Any], layout: Layout, today: date) -> list[dict[str, Any]]:
    rows = []
    for q in data["questions"]:
        text = fill(q["q"], today)
        results = searcher.search(text)
        rows.append({
            "id": q["id"], "kind": q["kind"], "lang": "zh" if _CJK.search(text) else "en", "question": text,
            "answers": {i: "{}:{}".format(*layout.where[i]) for i in q["answers"]},
            "older": {i: "{}:{}".format(*layout.where[i]) for i in q.get("older", [])},
            "returned": [f"{r['path']}:{r['start_line']}-{r['end_line']}" for r in results],
            "scores": [r["score"] for r in results],
            "rank": rank_of(results, q["answers"], layout),
            "older_rank": rank_of(results, q["older"], layout) if q.get("older") else None,
            "chars": evalkit.total_chars(results),
        })
    return rows


# ---------------------------------------------------------------------- figures
def ordering(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Update pairs: newer above older (older absent counts as above; a tie does not)."""
    pairs = [r for r in rows if r["kind"] == "update"]
    above = [r for r in pairs if r["older_rank"] is None or (r["rank"] is not None and r["rank"] < r["older_rank"])]
    return {
        "pairs": len(pairs), "newer_above_older": len(above),
        "share": round(len(above) / len(pairs), 4) if pairs else 0.0,
        "older_absent": sum(r["older_rank"] is None for r in pairs),
        "both_absent": sum(r["older_rank"] is None and r["rank"] is None for r in pairs),
        "older_above_or_tie": len(pairs) - len(above),
    }


def figures(rows: list[dict[str, Any]], kinds: tuple[str, ...]) -> dict[str, Any]:
    def of(pick: Any) -> dict[str, Any]:
        return summarise(evalkit.tally_of(r for r in rows if pick(r)))

    return {
        "all": of(lambda r: True),
        "by_kind": {k: of(lambda r, k=k: r["kind"] == k) for k in kinds},
        "by_lang": {lang: of(lambda r, lang=lang: r["lang"] == lang) for lang in ("en", "zh")},
        "crosslingual": {"zh->en": of(lambda r: r["kind"] == "crosslingual" and r["lang"] == "zh"),
                         "en->zh": of(lambda r: r["kind"] == "crosslingual" and r["lang"] == "en")},
        "update_ordering": ordering(rows),
    }


def print_figures(fig: dict[str, Any]) -> None:
    rows = [*fig["by_kind"].items(), *(("crosslingual " + k, v) for k, v in fig["crosslingual"].items()),
            *(("question in " + k, v) for k, v in fig["by_lang"].items()), ("all", fig["all"])]
    print("\n" + evalkit.table(f"bilingual, recall@{evalkit.LIMIT} (hit@5) and MRR", rows))
    o = fig["update_ordering"]
    if not o["pairs"]:
        return
    print(f"  update pairs, newer ranked above older: {o['newer_above_older']}/{o['pairs']} ({o['share']:.0%}); "
          f"older absent {o['older_absent']} (both absent {o['both_absent']}), older above or tied {o['older_above_or_tie']}")


# ------------------------------------------------------------------------- main
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the question set (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="check the set's questions against its notes, then stop")
    parser.add_argument("--workdir", type=Path, help="default: /tmp/membridge-eval/<the set's name>")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument("--fresh", action="store_true", help="delete the workdir first")
    parser.add_argument("--label", default="run")
    return parser.parse_args()


def set_name(path: Path) -> str:
    """``bilingual_lists.json`` -> ``bilingual-lists``: the prefix of the set's results and work folder."""
    return path.stem.replace("_", "-")


def set_kinds(data: dict[str, Any]) -> tuple[str, ...]:
    """The kinds the set's questions use, in :data:`KINDS` order; an unknown kind stops the run."""
    unknown = [f"{q['id']}: {q['kind']!r}" for q in data["questions"] if q["kind"] not in KINDS]
    if unknown:
        raise SystemExit(f"unknown question kinds ({', '.join(unknown)}); known: {', '.join(KINDS)}")
    used = {q["kind"] for q in data["questions"]}
    return tuple(k for k in KINDS if k in used)


def words_ok(data: dict[str, Any]) -> bool:
    """Hold the set to its key-word promise (:mod:`shared_words`): every broken one is printed;
    False when the set promises (``strict_words``) and breaks it."""
    problems = shared_words.problems(data)
    lured, checked = shared_words.distractor_share(data)
    strict = bool(data.get("strict_words"))
    for problem in problems if strict else ():
        print(f"error: {problem}")
    print(f"key words: {len(problems)} of {len(data['questions'])} questions break the set's promise"
          f"{'' if strict else ' (not enforced: the set does not hold strict_words)'}; "
          f"{lured} of {checked} paraphrase and crosslingual questions share a key word with another note")
    return not (strict and problems)


def main() -> int:
    args = parse_args()
    today = date.today()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if not data["scope"].startswith("terminal-"):
        raise SystemExit("the data's scope must be terminal-<user>: the CLI's default scope")
    kinds = set_kinds(data)
    if not words_ok(data):
        return 1
    fixed = {"memory": {"scope": "user"}, "channels": {"terminal": {"user": data["scope"].removeprefix("terminal-")}}}
    layout = materialise(data, today)
    for problem in check_questions(data, layout, today):
        print(f"warning: {problem}")
    if args.check:
        return 0
    name = set_name(args.data)
    workdir = evalkit.prepare_workdir(args.workdir or Path("/tmp/membridge-eval") / name, args.fresh)
    write_workspace(data, layout, workdir / "workspace")
    config = evalkit.write_config(workdir / "config.yaml", workdir / "workspace", fixed, evalkit.parse_sets(args.sets))
    run = evalkit.run_sync(config)
    print(f"whole-process sync: {run.seconds:.1f} s, {run.report['files_changed']} files changed, "
          f"{run.report['chunks_written']} chunks, {run.report['embed_calls']} embedding calls")
    with Searcher(config) as searcher:
        if searcher.scope != data["scope"]:
            raise SystemExit(f"the CLI's scope is {searcher.scope}, not {data['scope']}")
        questions = [fill(q["q"], today) for q in data["questions"]]
        evalkit.check_cli_equivalence(searcher, [questions[0], questions[len(questions) // 2], questions[-1]])
        rows = evaluate(searcher, data, layout, today)
    fig = figures(rows, kinds)
    print_figures(fig)
    path = evalkit.write_results(name, args.label, {
        "args": {k: str(v) for k, v in vars(args).items()}, "today": today.isoformat(),
        "sync_seconds": round(run.seconds, 2), "sync_report": run.report, "figures": fig, "questions": rows,
    })
    print(f"\nresults: {path.relative_to(evalkit.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
