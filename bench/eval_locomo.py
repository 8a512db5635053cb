"""LoCoMo retrieval evaluation: does membridge's search find the memory that answers a question?

    .venv/bin/python bench/eval_locomo.py                       # turns protocol, both datings, 5 conversations
    .venv/bin/python bench/eval_locomo.py --protocol notes      # the facts a flush writes, per conversation
    .venv/bin/python bench/eval_locomo.py --protocol notes --merged   # all five in one memory
    .venv/bin/python bench/eval_locomo.py --dating recent --conv conv-26 --set memory.half_life_days=1000

Protocol (``/work/shared/eval/locomo/README.md``): one workspace per conversation and dating,
``memory.scope: global``, default configuration otherwise (the real local embedder). Each session
is written into the daily file of its date, ``memory/YYYY-MM-DD.md``, under ``## HH:MM
conversation notes``, one line per turn ``- [D1:3] Caroline: text`` (plus ``[shares a photo:
<caption>]``). Datings: ``original`` (the sessions' own dates, 2022-2023) and ``recent`` (every date
of a conversation shifted by one offset so that its last session is yesterday). A whole-process
``membridge memory sync`` indexes each workspace (timed), then every question of categories 1-4
goes through the CLI's search code with limit 5 (see ``evalkit``). A question is a hit when one of
the 5 returned texts contains one of its evidence ids as ``[D1:3]``.

Figures: hit@5, MRR over the 5, per category and per conversation, mean total characters of the
5 texts, and for ``recent`` hit@5 by the age of the newest evidence session.

``--protocol notes`` writes, instead of the turns, each session's observations (the authors' short
facts, the shape of what membridge's flush writes) as ``- <fact>`` bullets with no id in the text,
speaker A's first; a side map keeps each line's dia_ids, and a result is a hit when its ``path`` and
``start_line``..``end_line`` cover a line whose ids meet the question's evidence. Only questions with
an evidence id that some observation carries are asked. ``--merged`` puts all conversations' notes
in one workspace (a day two conversations share holds both, in conversation order; ``recent``
shifts each conversation by its own offset) and asks every question there. LoCoMo is CC BY-NC
4.0 (Maharana et al., ACL 2024): it is read from ``--data`` and never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import evalkit
from evalkit import Searcher, summarise

DATINGS = ("original", "recent")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
AGE_BUCKETS = ((30, "age <= 30 d"), (90, "age 31-90 d"), (10**9, "age > 90 d"))
FIXED = {"memory": {"scope": "global"}}
_EVIDENCE_RE = re.compile(r"^D:?(\d+):(\d+)$")


@dataclass
class Session:
    index: int
    when: datetime
    turns: list[dict[str, Any]]


@dataclass
class Question:
    qid: str
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    sessions: list[Session]
    questions: list[Question]
    session_of: dict[str, int]  # turn id -> session index
    normalised: int = 0
    dropped: int = 0
    unanswerable: list[str] = field(default_factory=list)

    def date_of(self, session: int, shift: int) -> date:
        return next(s.when.date() for s in self.sessions if s.index == session) + timedelta(days=shift)


# -------------------------------------------------------------------------- data
def normalise_evidence(raw: list[str], known: dict[str, int]) -> tuple[list[str], int, int]:
    """Canonical ids (``D:11:26`` -> ``D11:26``, ``D8:6; D9:17`` -> two ids), minus ids of no turn:
    (ids, entries normalised, ids dropped)."""
    ids: list[str] = []
    normalised = dropped = 0
    for entry in raw:
        pieces = [p for p in re.split(r"[;,\s]+", entry.strip()) if p]
        canonical = [f"D{m.group(1)}:{m.group(2)}" if (m := _EVIDENCE_RE.match(p)) else p for p in pieces]
        normalised += canonical != [entry]
        for item in canonical:
            if item in known and item not in ids:
                ids.append(item)
            elif item not in known:
                dropped += 1
    return ids, normalised, dropped


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = []
    for key, turns in data.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and turns:
            when = datetime.strptime(data[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            sessions.append(Session(int(match.group(1)), when, turns))
    sessions.sort(key=lambda s: (s.when, s.index))
    session_of = {t["dia_id"]: s.index for s in sessions for t in s.turns}
    conv = Conversation(path.stem, sessions, [], session_of)
    for number, qa in enumerate(data["qa"]):
        if qa["category"] not in CATEGORIES:
            continue
        ids, normalised, dropped = normalise_evidence(qa.get("evidence", []), session_of)
        conv.normalised += normalised
        conv.dropped += dropped
        if not ids:
            conv.unanswerable.append(qa["question"])
            continue
        conv.questions.append(Question(f"{path.stem}#{number}", qa["question"], qa["category"], ids))
    return conv


def turn_line(turn: dict[str, Any]) -> str:
    text = " ".join(str(turn["text"]).split())
    caption = turn.get("blip_caption")
    photo = f" [shares a photo: {' '.join(str(caption).split())}]" if caption else ""
    return f"- [{turn['dia_id']}] {turn['speaker']}: {text}{photo}"


def daily_files(conv: Conversation, shift: int) -> dict[str, str]:
    """File name -> content: one ``## HH:MM conversation notes`` block per session, by date."""
    files: dict[str, str] = {}
    for session in conv.sessions:
        day = session.when.date() + timedelta(days=shift)
        block = "\n".join([f"## {session.when:%H:%M} conversation notes", *map(turn_line, session.turns)]) + "\n"
        files[f"{day.isoformat()}.md"] = files.get(f"{day.isoformat()}.md", "") + block
    return files


@dataclass
class NoteLayout:
    """The notes protocol's daily files (name -> text) and the dia_ids of each (file, line)."""

    files: dict[str, str] = field(default_factory=dict)
    ids: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    def add_session(self, conv: Conversation, session: Session, day: date, observations: list[tuple[str, set[str]]]) -> None:
        name = f"{day.isoformat()}.md"
        lines = self.files.get(name, "").split("\n")[:-1] if name in self.files else []
        lines.append(f"## {session.when:%H:%M} conversation notes")
        for fact, ids in observations:
            lines.append(f"- {' '.join(fact.split())}")
            self.ids[(f"memory/{name}", len(lines))] = {f"{conv.name}/{i}" for i in ids}
        self.files[name] = "\n".join(lines) + "\n"

    def covers(self, result: dict[str, Any], evidence: set[str]) -> bool:
        return any(self.ids.get((result["path"], n), set()) & evidence
                   for n in range(result["start_line"], result["end_line"] + 1))


def observations(data: dict[str, Any], session: int, speakers: tuple[str, str]) -> list[tuple[str, set[str]]]:
    """The session's facts with their dia_ids, speaker A's first, in the data's order (ids split and
    normalised as the questions' evidence is)."""
    raw = data.get(f"session_{session}_observation") or {}
    facts: list[tuple[str, set[str]]] = []
    for speaker in [*speakers, *(s for s in raw if s not in speakers)]:
        for fact, ids in raw.get(speaker, []):
            pieces = ids if isinstance(ids, list) else [ids]
            found = {f"D{m.group(1)}:{m.group(2)}" for p in pieces for part in re.split(r"[;,\s]+", str(p))
                     if (m := _EVIDENCE_RE.match(part))}
            facts.append((str(fact), found))
    return facts


def note_layout(convs: list[Conversation], dating: str, today: date, data: dict[str, dict[str, Any]]) -> NoteLayout:
    """One layout holding ``convs`` (one conversation, or all of them for ``--merged``)."""
    layout = NoteLayout()
    for conv in convs:
        shift = shift_for(conv, dating, today)
        speakers = (data[conv.name]["speaker_a"], data[conv.name]["speaker_b"])
        for session in conv.sessions:
            layout.add_session(conv, session, session.when.date() + timedelta(days=shift),
                               observations(data[conv.name], session.index, speakers))
    return layout


def noted_questions(conv: Conversation, layout: NoteLayout) -> list[Question]:
    """The questions with at least one evidence id that some observation carries."""
    carried = set().union(*layout.ids.values()) if layout.ids else set()
    return [q for q in conv.questions if any(f"{conv.name}/{e}" in carried for e in q.evidence)]


def shift_for(conv: Conversation, dating: str, today: date) -> int:
    """Days added to every date: 0, or what makes the last session yesterday."""
    if dating == "original":
        return 0
    return (today - timedelta(days=1) - conv.sessions[-1].when.date()).days


# --------------------------------------------------------------------- workspaces
def build(name: str, files: dict[str, str], dating: str, workdir: Path, sets: dict[str, Any]) -> Path:
    """Write a workspace of daily ``files`` and its config; returns the config's path."""
    base = workdir / dating / name
    workspace = base / "workspace"
    written, removed = evalkit.sync_daily_files(workspace / "memory", files)
    if written or removed:
        print(f"  {dating}/{name}: {written} daily files written, {removed} removed")
    return evalkit.write_config(base / "config.yaml", workspace, FIXED, sets)


def evaluate(conv: Conversation, dating: str, searcher: Searcher, today: date, layout: NoteLayout | None) -> list[dict[str, Any]]:
    """One row per question: the turns protocol looks for ``[D1:3]`` in the texts, the notes
    protocol (``layout``) for a returned line range covering a line of the evidence."""
    shift = shift_for(conv, dating, today)
    rows = []
    questions = conv.questions if layout is None else noted_questions(conv, layout)
    for q in questions:
        results = searcher.search(q.text)
        if layout is None:
            tags = [f"[{e}]" for e in q.evidence]
            flags = [any(t in r["text"] for t in tags) for r in results]
        else:
            evidence = {f"{conv.name}/{e}" for e in q.evidence}
            flags = [layout.covers(r, evidence) for r in results]
        newest = max(conv.date_of(conv.session_of[e], shift) for e in q.evidence)
        rows.append({
            # the question's id, not its text: LoCoMo (CC BY-NC 4.0) is not redistributed here
            "conv": conv.name, "dating": dating, "qid": q.qid,
            "category": CATEGORIES[q.category], "evidence": q.evidence,
            "returned": [f"{r['path']}:{r['start_line']}-{r['end_line']}" for r in results],
            "scores": [r["score"] for r in results],
            "rank": evalkit.first_rank(flags),
            "chars": evalkit.total_chars(results),
            "age_days": (today - newest).days,
        })
    return rows


def age_bucket(days: int) -> str:
    return next(name for bound, name in AGE_BUCKETS if days <= bound)


# ------------------------------------------------------------------------ figures
def figures(rows: list[dict[str, Any]], dating: str) -> dict[str, Any]:
    out: dict[str, Any] = {"all": summarise(evalkit.tally_of(rows))}
    out["by_category"] = {name: summarise(evalkit.tally_of(r for r in rows if r["category"] == name))
                          for name in CATEGORIES.values()}
    out["by_conversation"] = {name: summarise(t) for name, t in evalkit.group(rows, "conv")}
    if dating == "recent":
        out["by_age"] = {name: summarise(evalkit.tally_of(r for r in rows if age_bucket(r["age_days"]) == name))
                         for _, name in AGE_BUCKETS}
    return out


def print_dating(dating: str, fig: dict[str, Any]) -> None:
    rows = [*fig["by_conversation"].items(), *fig["by_category"].items()]
    if "by_age" in fig:
        rows += list(fig["by_age"].items())
    print()
    print(evalkit.table(f"LoCoMo, {dating} dating (top {evalkit.LIMIT})", [*rows, ("all (micro)", fig["all"])]))


# --------------------------------------------------------------------------- main
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=evalkit.REPO.parent / "shared" / "eval" / "locomo")
    parser.add_argument("--protocol", choices=["turns", "notes"], default="turns")
    parser.add_argument("--merged", action="store_true", help="notes protocol: every conversation in one memory")
    parser.add_argument("--dating", choices=[*DATINGS, "both"], default="both")
    parser.add_argument("--conv", default="", help="comma-separated subset, e.g. conv-26,conv-30")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/membridge-eval/locomo"))
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument("--fresh", action="store_true", help="delete the workdir first")
    parser.add_argument("--label", default="run")
    return parser.parse_args()


def load_all(data: Path, subset: str) -> list[Conversation]:
    wanted = [c.strip() for c in subset.split(",") if c.strip()]
    paths = [data / f"{name}.json" for name in wanted] if wanted else sorted(data.glob("conv-*.json"))
    convs = [load_conversation(p) for p in paths]
    print(f"{len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions of categories 1-4; "
          f"evidence ids: {sum(c.normalised for c in convs)} malformed entries normalised, "
          f"{sum(c.dropped for c in convs)} ids dropped (no such turn), "
          f"{sum(len(c.unanswerable) for c in convs)} questions left without evidence (not counted)")
    return convs


@dataclass
class Plan:
    """The workspaces of one run: a config per (dating, workspace name), the conversations each
    answers for, and (notes protocol) each one's layout."""

    configs: dict[tuple[str, str], Path] = field(default_factory=dict)
    members: dict[tuple[str, str], list[Conversation]] = field(default_factory=dict)
    layouts: dict[tuple[str, str], NoteLayout] = field(default_factory=dict)


def plan_workspaces(args: argparse.Namespace, convs: list[Conversation], datings: list[str], workdir: Path,
                    sets: dict[str, Any], today: date) -> Plan:
    plan = Plan()
    data = {c.name: json.loads((args.data / f"{c.name}.json").read_text(encoding="utf-8")) for c in convs}
    groups = [("merged", convs)] if args.merged else [(c.name, [c]) for c in convs]
    for dating in datings:
        for name, members in groups:
            key = (dating, name)
            plan.members[key] = members
            if args.protocol == "turns":
                files = daily_files(members[0], shift_for(members[0], dating, today))
            else:
                plan.layouts[key] = note_layout(members, dating, today, data)
                files = plan.layouts[key].files
            plan.configs[key] = build(name, files, dating, workdir / args.protocol, sets)
    return plan


def main() -> int:
    args = parse_args()
    if args.merged and args.protocol != "notes":
        raise SystemExit("--merged is a variant of --protocol notes")
    today = date.today()
    sets = evalkit.parse_sets(args.sets)
    convs = load_all(args.data, args.conv)
    datings = list(DATINGS) if args.dating == "both" else [args.dating]
    workdir = evalkit.prepare_workdir(args.workdir, args.fresh)
    plan = plan_workspaces(args, convs, datings, workdir, sets, today)
    configs = plan.configs
    syncs = {}
    for (dating, name), config in configs.items():
        syncs[f"{dating}/{name}"] = run = evalkit.run_sync(config)
        print(f"  sync {dating}/{name}: {run.seconds:.1f} s, {run.report['files_changed']} files changed, "
              f"{run.report['chunks_written']} chunks, {run.report['embed_calls']} embedding calls")
    sync_total = sum(r.seconds for r in syncs.values())
    print(f"whole-process syncs: {sync_total:.1f} s in total")
    with Searcher(next(iter(configs.values()))) as searcher:
        qs = convs[0].questions
        evalkit.check_cli_equivalence(searcher, [qs[0].text, qs[len(qs) // 2].text, qs[-1].text])
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    for dating in datings:
        started = time.perf_counter()
        mine = []
        for key, config in configs.items():
            if key[0] == dating:
                with Searcher(config) as searcher:
                    for conv in plan.members[key]:
                        mine += evaluate(conv, dating, searcher, today, plan.layouts.get(key))
        results[dating] = figures(mine, dating)
        results[dating]["search_seconds"] = round(time.perf_counter() - started, 1)
        print_dating(dating, results[dating])
        rows += mine
    if len(datings) > 1:
        overall = [(d, results[d]["all"]) for d in datings] + [("both (micro)", summarise(evalkit.tally_of(rows)))]
        print("\n" + evalkit.table("LoCoMo, overall", overall))
    kind = "locomo" if args.protocol == "turns" else ("locomo-notes-merged" if args.merged else "locomo-notes")
    path = evalkit.write_results(kind, args.label, {
        "args": {k: str(v) for k, v in vars(args).items()}, "today": today.isoformat(), "sets": sets,
        "sync_seconds": {k: round(v.seconds, 2) for k, v in syncs.items()}, "sync_seconds_total": round(sync_total, 1),
        "sync_reports": {k: v.report for k, v in syncs.items()},
        "evidence": {c.name: {"normalised": c.normalised, "dropped": c.dropped, "unanswerable": c.unanswerable}
                     for c in convs},
        "figures": results, "questions": rows,
    })
    print(f"\nresults: {path.relative_to(evalkit.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
