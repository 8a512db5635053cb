"""``membridge doctor``: one line per part, ok or why not, so setup problems are found in seconds.

``--offline`` reaches no server and loads nothing heavy (LanceDB, the embedding model): it answers
in well under a second, for scripts and a first look; the full run proves each part works.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

from ..config import no_config_notice
from ..wiring.app import Services


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    skipped: bool = False  # not checked (--offline); never a failure


def _check(name: str, probe: Callable[[], str]) -> Check:
    try:
        return Check(name, True, probe())
    except Exception as exc:
        return Check(name, False, str(exc) or type(exc).__name__)


def _config(services: Services) -> str:
    source = services.config.source
    return str(source) if source else no_config_notice()


def _sqlite(services: Services) -> str:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE a USING fts5(x, tokenize='unicode61')")
        conn.execute("CREATE VIRTUAL TABLE b USING fts5(x, tokenize='trigram')")
    except sqlite3.OperationalError as exc:
        raise RuntimeError(f"SQLite {sqlite3.sqlite_version} lacks FTS5 or trigram ({exc}); use Python with SQLite >= 3.34") from exc
    finally:
        conn.close()
    return f"SQLite {sqlite3.sqlite_version} with FTS5 unicode61 and trigram; index.db holds {_sizes(services)}"


def _sizes(services: Services) -> str:
    """What the nightly garbage collection bounds: cached vectors, MEMORY.md versions, flush jobs."""
    services.workspace.ensure()
    vectors = services.memory.count_cached_vectors()
    versions = services.dreamer.memory_file.version_count()
    jobs = services.conversations.job_counts()
    by_status = ", ".join(f"{jobs.get(status, 0)} {status}" for status in ("pending", "done"))
    return f"{vectors} cached vectors, {versions} MEMORY.md versions, {sum(jobs.values())} flush jobs ({by_status})"


def _flush(services: Services) -> str:
    """Failing flush jobs are not an error of setup, but a person should act on them (a full disk,
    a lock held too long): their turns wait, unsummarised, until a retry succeeds."""
    failing = services.conversations.failing_jobs()
    if not failing:
        return "no flush job is failing"
    oldest = failing[0]
    raise RuntimeError(
        f"{len(failing)} flush job(s) failing and retried with backoff; oldest: job {oldest.id} of scope "
        f"{oldest.scope}, {oldest.attempts} attempts since {_when(oldest.created_at)}, next try "
        f"{_when(oldest.next_try_at)}, last error: {oldest.error}")


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec="seconds")


def _workspace(services: Services) -> str:
    services.workspace.ensure()
    check = services.memory.check_index()
    if check.rebuilt:
        return f"{services.workspace.root}: keyword index was damaged and has been rebuilt"
    filled = f"; {check.caught_up} queued for the substring index, added now" if check.caught_up else ""
    return f"{services.workspace.root}: {check.chunks} chunks indexed, keyword index intact{filled}"


def _lancedb_installed() -> str:
    if importlib.util.find_spec("lancedb") is None:
        raise RuntimeError("the lancedb package is not installed (reinstall membridge: scripts/bootstrap)")
    return f"LanceDB {version('lancedb')} installed (not opened: --offline)"


def _lancedb() -> str:
    import lancedb
    import numpy as np

    from memory import LanceDBBackend, VectorRow

    with tempfile.TemporaryDirectory() as tmp:
        backend = LanceDBBackend(Path(tmp), "doctor")
        backend.upsert([VectorRow("a", "s", "p.md", np.ones(4, dtype=np.float32))])
        hits = backend.search(np.ones(4, dtype=np.float32), ["s"], 1)
    if [h[0] for h in hits] != ["a"]:
        raise RuntimeError("LanceDB round trip returned the wrong row")
    return f"LanceDB {lancedb.__version__} round trip ok"


def _embeddings(services: Services, *, load: bool = True) -> str:
    """The provider, and (unless ``load`` is off, for --offline) one real embedding through it."""
    embedder = services.memory.embedder
    if embedder is None:
        return "provider 'none': keyword search only"
    if not load:
        return f"{embedder.model_id} (not loaded: --offline)"
    vectors = embedder.embed(["doctor check"])
    return f"{embedder.model_id}: {vectors.shape[1]}-dimensional vectors"


def _running(services: Services) -> Check:
    """The running process's own ``/readyz`` (the checks it makes of itself), when one answers."""
    import json
    import urllib.error
    import urllib.request

    settings = services.config.metrics
    url = f"http://{settings.host}:{settings.port}/readyz"
    if not settings.enabled:
        return Check("running", True, "metrics.enabled is false: no /readyz to read", skipped=True)
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read() or b"{}")
    except (OSError, ValueError) as exc:
        return Check("running", True, f"no membridge process answers at {url} ({exc})", skipped=True)
    checks = body.get("checks", {})
    failing = [f"{name}: {result}" for name, result in checks.items() if result != "ok"]
    if failing:
        return Check("running", False, f"{url} says not ready: " + "; ".join(failing))
    return Check("running", True, f"{url}: ready ({', '.join(checks) or 'no checks'})")


def _redis(services: Services) -> str:
    from .health import redis_problem

    url = str(services.config.cluster.redis_url)
    problem = redis_problem(url)
    if problem:
        raise RuntimeError(problem)
    return f"Redis at {url} answers"


def _llm(services: Services) -> str:
    from ..llm import probe_llm

    return probe_llm(services.config.llm)


def run_checks(services: Services, *, offline: bool = False) -> list[Check]:
    """Every part in order; ``offline`` checks only what needs no server and no heavy import."""
    checks = [
        _check("config", lambda: _config(services)),
        _check("sqlite", lambda: _sqlite(services)),
        _check("workspace", lambda: _workspace(services)),
        _check("flush", lambda: _flush(services)),
    ]
    if offline:
        where = services.config.llm.base_url or "the OpenAI API"
        return [*checks, _check("lancedb", _lancedb_installed), _check("embeddings", lambda: _embeddings(services, load=False)), Check("llm", True, f"{where}, model {services.config.llm.model!r} (not called: --offline)", skipped=True)]
    checks += [_check("lancedb", _lancedb), _check("embeddings", lambda: _embeddings(services)), _check("llm", lambda: _llm(services))]
    if services.config.cluster.redis_url:
        checks.append(_check("redis", lambda: _redis(services)))
    return [*checks, _running(services)]
