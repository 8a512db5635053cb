"""Rank LoCoMo's candidates again under other scoring rules, without re-indexing (research tool).

``bench/eval_locomo.py`` measures what users run. To try a ranking idea in seconds rather than
minutes, this script gathers each question's candidates once through the retriever's own steps
(the same pool, vector and keyword scores, recency, time windows, update rule and passages that
``Retriever.search`` uses), then ranks them under each variant below. The ``base`` variant
reproduces ``Retriever.search`` exactly (checked against ``bench/eval_locomo.py``: 0.8934 / 0.7959
and 0.8724 / 0.7681 on 2026-12-06, session 13), and ``chunks (before)`` the rule before passages
(chunks as ranked, repeats skipped, no budget), so a difference is the variant's. It reaches into the retriever's
private steps on purpose: it is a measuring tool, not a user of the memory package.

    .venv/bin/python bench/eval_locomo.py --label base --workdir /tmp/lm-base --fresh
    .venv/bin/python bench/rescore_locomo.py /tmp/lm-base
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import eval_locomo
from evalkit import LIMIT, REPO, Searcher

from memory.retrieval import engine, passages, querytext
from memory.retrieval.result import SearchResult
from memory.retrieval.timewindow import asks_about_now, find_window

Ranked = list[tuple[str, SearchResult]]


@dataclass(frozen=True)
class Variant:
    rescore: Callable[[Ranked], None] | None = None  # changes scores in place, before the update rule
    chars_per_result: int | None = None  # the passages' budget per result; None: memory.chunk_max_chars
    joins: bool = True  # False: the rule before passages (chunks as they are, repeats skipped, no budget)
    trims: bool = False  # True: a passage too long for the rest of the budget is cut, not skipped


def file_neighbours(beta: float) -> Callable[[Ranked], None]:
    """Each result gains ``beta`` times the best other candidate of its file: a session prior."""
    def rescore(ranked: Ranked) -> None:
        scores: dict[str, list[float]] = {}
        for _, result in ranked:
            scores.setdefault(result.path, []).append(result.score)
        for _, result in ranked:
            others = sorted(scores[result.path], reverse=True)
            others.remove(result.score)
            result.score += beta * (others[0] if others else 0.0)
    return rescore


def vector_power(power: float) -> Callable[[Ranked], None]:
    """Relevance with the similarity raised to ``power`` (sharper or flatter vector side)."""
    def rescore(ranked: Ranked) -> None:
        for _, result in ranked:
            relevance = (0.7 * (result.vector_score or 0.0) ** power + 0.3 * (result.keyword_score or 0.0)
                         + 0.05 * result.coverage)
            result.score = relevance * result.recency * result.time_boost
    return rescore


def min_max_fusion(weight: float) -> Callable[[Ranked], None]:
    """Relevance from each side min-max normalised over the question's candidates (a common
    fusion rule), with ``weight`` on the vector side."""
    def rescore(ranked: Ranked) -> None:
        def scaled(values: list[float | None]) -> Callable[[float | None], float]:
            known = [v for v in values if v is not None]
            low, high = (min(known), max(known)) if known else (0.0, 0.0)
            return lambda v: 0.0 if v is None else (v - low) / (high - low) if high > low else 1.0
        vector = scaled([r.vector_score for _, r in ranked])
        keyword = scaled([r.keyword_score for _, r in ranked])
        for _, result in ranked:
            relevance = (weight * vector(result.vector_score) + (1 - weight) * keyword(result.keyword_score)
                         + 0.05 * result.coverage)
            result.score = relevance * result.recency * result.time_boost
    return rescore


def trimmed_to(result: SearchResult, room: int, weights: dict[str, float]) -> SearchResult | None:
    """The run of ``result``'s lines that fits ``room`` characters and holds the most of the
    question's weighted terms (the first such run on a tie); None when no line fits."""
    lines = result.text.split("\n")
    best: tuple[float, int, int] | None = None
    for first in range(len(lines)):
        size, terms = -1, 0.0
        for last in range(first, len(lines)):
            size += len(lines[last]) + 1
            if size > room:
                break
            terms += querytext.coverage(weights, lines[last])
            if best is None or terms > best[0]:
                best = (terms, first, last)
    if best is None:
        return None
    _, first, last = best
    return replace(result, start_line=result.start_line + first, end_line=result.start_line + last,
                   text="\n".join(lines[first:last + 1]))


def assemble_trimming(ranked: list[SearchResult], limit: int, budget: int, weights: dict[str, float]) -> list[SearchResult]:
    """:func:`passages.assemble`, except that a passage too long for what is left of the budget is
    cut to its best lines that fit (at least 200 characters) instead of being skipped."""
    kept: list[SearchResult] = []
    for result in ranked:
        if any(result.text.strip() == k.text.strip() for k in kept) or passages._join(kept, result, budget):
            continue
        if any(passages._repeats(result, k) for k in kept):
            continue
        room = budget - sum(len(k.text) for k in kept)
        if kept and len(result.text) > room:
            cut = trimmed_to(result, room, weights) if room >= 200 else None
            if cut is None:
                continue
            result = cut
        kept.append(result)
        if len(kept) == limit:
            break
    return kept


def chunks_only(ranked: list[SearchResult], limit: int) -> list[SearchResult]:
    """The rule before passages (2026-12-05): chunks as ranked, repeats skipped, no budget."""
    kept: list[SearchResult] = []
    for result in ranked:
        if not any(result.text.strip() == k.text.strip() or passages._repeats(result, k) for k in kept):
            kept.append(result)
            if len(kept) == limit:
                break
    return kept


VARIANTS = {
    "base": Variant(),
    "chunks (before)": Variant(joins=False),
    "budget 700": Variant(chars_per_result=700),
    "budget 760": Variant(chars_per_result=760),
    "budget 800": Variant(chars_per_result=800),
    "file prior 0.1": Variant(file_neighbours(0.1)),
    "vector ^0.75": Variant(vector_power(0.75)),
    "min-max 0.6": Variant(min_max_fusion(0.6)),
    "min-max 0.7": Variant(min_max_fusion(0.7)),
    "trim the last": Variant(trims=True),
}



@dataclass
class Candidates:
    found: Any  # engine._Candidates
    window: Any
    about_now: bool


def gather(retriever: engine.Retriever, query: str, scopes: list[str]) -> Candidates:
    """The candidates ``Retriever.search`` scores."""
    window = find_window(query, retriever._today())
    found = retriever._gather(query, scopes, window, max(retriever.settings.candidates, LIMIT * 4))
    return Candidates(found, window, asks_about_now(query))


def rank(retriever: engine.Retriever, c: Candidates, variant: Variant, limit: int) -> list[SearchResult]:
    """``Retriever.search``'s steps over the gathered candidates, with the variant's rules."""
    found = c.found
    today = retriever._today()
    ranked = retriever._results(found, c.window, today, c.about_now, keep=len(found.chunks))  # every candidate, exactly
    ranked = [(cid, r) for cid, r in ranked if r.score > 0 and engine._wanted(r, retriever.settings.min_score)]
    if variant.rescore is not None:
        variant.rescore(ranked)
    retriever._order(ranked, found, promote=c.about_now and found.hybrid)
    ordered = [r for _, r in ranked]
    if not variant.joins:
        return chunks_only(ordered, limit)
    budget = limit * (variant.chars_per_result or retriever.settings.chunk_max_chars)
    if variant.trims:
        return assemble_trimming(ordered, limit, budget, c.found.weights)
    return passages.assemble(ordered, limit, budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("workdir", type=Path, help="a folder synced by bench/eval_locomo.py")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "locomo")
    args = parser.parse_args()
    conversations = eval_locomo.load_all(args.data, "")
    tally = {(dating, name): [0, 0.0, 0, 0] for dating in eval_locomo.DATINGS for name in VARIANTS}
    for dating in eval_locomo.DATINGS:
        for conv in conversations:
            with Searcher(args.workdir / dating / conv.name / "config.yaml") as searcher:
                retriever = searcher.services.memory.retriever
                scopes = [searcher.scope, "knowledge"]
                for question in conv.questions:
                    candidates = gather(retriever, question.text, scopes)
                    tags = [f"[{e}]" for e in question.evidence]
                    for name, variant in VARIANTS.items():
                        results = rank(retriever, candidates, variant, LIMIT)
                        found = [i for i, r in enumerate(results, 1) if any(t in r.text for t in tags)]
                        hits, rr, n, chars = tally[(dating, name)]
                        tally[(dating, name)] = [hits + bool(found), rr + (1 / found[0] if found else 0.0), n + 1,
                                                 chars + sum(len(r.text) for r in results)]
    print(f"{'dating':9} {'variant':16} {'hit@5':>7} {'MRR':>7} {'chars':>6}")
    for (dating, name), (hits, rr, n, chars) in tally.items():
        print(f"{dating:9} {name:16} {hits / n:7.4f} {rr / n:7.4f} {chars / n:6.0f}")


if __name__ == "__main__":
    main()
