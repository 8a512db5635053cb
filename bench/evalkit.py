"""Shared parts of the retrieval-quality evaluations (``eval_locomo.py``, ``eval_bilingual.py``).

What is measured: whether membridge's public search, with the real local embedder and the
default configuration, returns the memory line that answers a question among its first 5
results. How:

1. each evaluation writes a workspace of daily memory files and a temporary ``config.yaml``
   (:func:`write_config`: the default configuration, the evaluation's fixed keys, then the
   ``--set key.path=value`` overrides);
2. a whole-process ``membridge --config <config> memory sync --json`` indexes it
   (:func:`run_sync`, timed: what a user would pay);
3. every question goes through :class:`Searcher`, which runs exactly what the CLI's
   ``memory search`` runs (``Services(config).memory.search(query, scope, limit=5)`` with the
   config loaded by ``bridge.config.load_config``), in-process for speed;
   :func:`check_cli_equivalence` proves on a few questions that the real CLI returns the same
   paths and lines;
4. :func:`summarise` turns per-question ranks into hit@5 (recall@5), MRR over the 5 (1/rank of
   the first hit, 0 if none) and the mean total characters of the returned texts.

Workspaces are kept between runs (membridge's sync is incremental and caches embeddings), so
files are rewritten only when their content differs (:func:`write_if_changed`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Self

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info

from bridge.config import ConfigError, load_config
from bridge.wiring.app import Services

LIMIT = 5
RESULTS_DIR = REPO / "bench" / "results"


# ------------------------------------------------------------------------- config
def parse_sets(pairs: Sequence[str]) -> dict[str, Any]:
    """``["memory.half_life_days=1000", ...]`` as a nested mapping; values are parsed as YAML."""
    tree: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r}: expected key.path=value")
        node = tree
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {pair!r}: {part} is already a value")
        node[leaf] = yaml.safe_load(raw)
    return tree


def _merge(base: dict[str, Any], extra: dict[str, Any], fixed: dict[str, Any], path: str = "") -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        where = f"{path}{key}"
        if key in fixed and not isinstance(fixed[key], dict):
            raise ConfigError(f"--set {where}: fixed by the evaluation's protocol")
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value, fixed.get(key, {}), f"{where}.")
        else:
            merged[key] = value
    return merged


def write_config(path: Path, workspace: Path, fixed: dict[str, Any], sets: dict[str, Any]) -> Path:
    """The temporary config: ``workspace`` + the evaluation's ``fixed`` keys + ``--set`` overrides.

    Loaded back once with the project's loader, so a bad key fails here with its path.
    """
    data = _merge({"workspace": str(workspace), **fixed}, sets, {"workspace": None, **fixed})
    write_if_changed(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    load_config(str(path))
    return path


# -------------------------------------------------------------------------- files
def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file already holds exactly it; True when written."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def sync_daily_files(folder: Path, files: dict[str, str]) -> tuple[int, int]:
    """Make ``folder`` hold exactly ``files`` (name -> text) among its ``*.md``: (written, removed)."""
    written = sum(write_if_changed(folder / name, text) for name, text in files.items())
    removed = 0
    if folder.is_dir():
        for stale in folder.glob("*.md"):
            if stale.name not in files:
                stale.unlink()
                removed += 1
    return written, removed


def prepare_workdir(workdir: Path, fresh: bool) -> Path:
    if fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


# ------------------------------------------------------------------ the processes
def _membridge() -> list[str]:
    script = REPO / ".venv" / "bin" / "membridge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bridge"]


def _run_cli(config: Path, *args: str) -> str:
    done = subprocess.run(
        [*_membridge(), "--config", str(config), *args],
        check=False, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"membridge {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


@dataclass
class SyncRun:
    seconds: float
    report: dict[str, Any]


def run_sync(config: Path) -> SyncRun:
    """``membridge --config <config> memory sync --json`` as its own process, wall-clock timed."""
    started = time.perf_counter()
    out = _run_cli(config, "memory", "sync", "--json")
    return SyncRun(time.perf_counter() - started, json.loads(out))


def cli_search(config: Path, query: str, limit: int = LIMIT) -> list[dict[str, Any]]:
    """``membridge --config <config> memory search --json --limit N QUERY`` as its own process."""
    return json.loads(_run_cli(config, "memory", "search", "--json", "--limit", str(limit), "--", query))


# ------------------------------------------------------------------------- search
class Searcher:
    """What ``membridge memory search`` runs, in this process: one :class:`Services` per config."""

    def __init__(self, config: Path) -> None:
        self.config_path = config
        self.services = Services(load_config(str(config)))
        self.scope = self.services.terminal_scope()  # the CLI's scope when --scope is not given

    def search(self, query: str, limit: int = LIMIT) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.services.memory.search(query, self.scope, limit=limit)]

    def close(self) -> None:
        self.services.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _locations(results: Iterable[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(r["path"], r["start_line"], r["end_line"]) for r in results]


def check_cli_equivalence(searcher: Searcher, queries: Sequence[str]) -> None:
    """Assert that the real CLI returns the same paths and lines as the in-process search."""
    for query in queries:
        mine, theirs = _locations(searcher.search(query)), _locations(cli_search(searcher.config_path, query))
        if mine != theirs:
            raise AssertionError(f"CLI and in-process search differ for {query!r}:\n  in-process {mine}\n  CLI        {theirs}")
    print(f"check: `membridge memory search --json --limit {LIMIT}` (subprocess) returned the same paths and lines "
          f"as the in-process search for {len(queries)} questions")


# ------------------------------------------------------------------------ metrics
@dataclass
class Tally:
    """Per-question outcomes of one group: rank of the first hit (None: no hit) and returned characters."""

    ranks: list[int | None] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)

    def add(self, rank: int | None, chars: int) -> None:
        self.ranks.append(rank)
        self.chars.append(chars)


def summarise(tally: Tally) -> dict[str, float | int]:
    """n, hit@5 (= recall@5 for one answer), MRR over the 5 and mean returned characters."""
    n = len(tally.ranks)
    if n == 0:
        return {"n": 0, "hit@5": 0.0, "mrr": 0.0, "chars": 0.0}
    hits = [r for r in tally.ranks if r is not None]
    return {
        "n": n,
        "hit@5": round(len(hits) / n, 4),
        "mrr": round(sum(1 / r for r in hits) / n, 4),
        "chars": round(sum(tally.chars) / n, 1),
    }


def first_rank(flags: Sequence[bool]) -> int | None:
    """1-based rank of the first true flag, None when there is none."""
    return next((rank for rank, flag in enumerate(flags, start=1) if flag), None)


def total_chars(results: Sequence[dict[str, Any]]) -> int:
    return sum(len(r["text"]) for r in results)


def group(rows: Iterable[dict[str, Any]], key: str) -> Iterator[tuple[Any, Tally]]:
    """A :class:`Tally` per value of ``rows[i][key]``, in first-seen order."""
    tallies: dict[Any, Tally] = {}
    for row in rows:
        tallies.setdefault(row[key], Tally()).add(row["rank"], row["chars"])
    yield from tallies.items()


def tally_of(rows: Iterable[dict[str, Any]]) -> Tally:
    tally = Tally()
    for row in rows:
        tally.add(row["rank"], row["chars"])
    return tally


# ------------------------------------------------------------------------- output
def table(title: str, rows: Sequence[tuple[str, dict[str, float | int]]], extra: Sequence[str] = ()) -> str:
    """A fixed-width table of :func:`summarise` figures, one row per group."""
    lines = [title, f"  {'':<26}{'n':>6}{'hit@5':>9}{'MRR':>9}{'chars':>9}" + "".join(f"{e:>14}" for e in extra)]
    for name, fig in rows:
        more = "".join(f"{fig.get(e, ''):>14}" for e in extra)
        lines.append(f"  {name:<26}{fig['n']:>6}{fig['hit@5']:>9.3f}{fig['mrr']:>9.3f}{fig['chars']:>9.0f}{more}")
    return "\n".join(lines)


def code_fingerprint() -> dict[str, Any]:
    """The commit, the uncommitted changes, and a sha256 of every module of ``memory/`` and ``bridge/``
    (subpackages included): a result names the code it measured."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], check=False, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    modules = sorted(p for package in ("memory", "bridge") for p in (REPO / package).rglob("*.py"))
    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": git("status", "--porcelain", "--", "memory", "bridge").splitlines(),
        "sha256": {p.relative_to(REPO).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in modules},
    }


def write_results(kind: str, label: str, data: dict[str, Any]) -> Path:
    """``bench/results/<kind>-<YYYY-MM-DD>-<label>.json`` with the machine and code fingerprint."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{kind}-{date.today().isoformat()}-{label}.json"
    payload = {"machine": machine_info(), "code": code_fingerprint(), **data}
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path
