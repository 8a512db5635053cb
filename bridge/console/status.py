"""``GET /api/status``: what an operator looks at first, from the durable records in ``index.db``.

The console is often a process of its own (``membridge console``), so nothing here comes from the
bot's in-process counters: turns and their outcomes, model latencies and each scope's tokens come
from the usage book (:mod:`bridge.ops.usage`), the flush backlog from the jobs table, the nightly pass
from the index's meta. In a cluster the receivers drop redeliveries before any workspace sees them:
those come from their record in Redis (:mod:`bridge.cluster.duplicates`), counted over the 24 clock
hours of ``turns_by_hour``. Times are ISO 8601 with their offset; the page draws them in the
browser's own time zone.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime
from typing import Any

from ..ops.usage import percentile
from ..wiring.app import Services

log = logging.getLogger(__name__)
HOURS = 24


def status_view(services: Services, now: float | None = None) -> dict[str, Any]:
    """The status page's figures (the keys are a contract: README "Operating membridge")."""
    now = time.time() if now is None else now
    book = services.usage
    day_ago = now - HOURS * 3600
    latencies = book.request_latencies(day_ago)
    jobs, oldest = services.conversations.job_backlog()
    turns = book.outcomes_since(day_ago)
    dropped, warnings = _receivers_dropped(services, now)
    turns["deduplicated"] += dropped
    return {
        "turns_24h": turns,
        "turns_by_hour": _by_hour(services, now),
        "model_latency_ms": {"p50": _ms(percentile(latencies, 0.5)), "p95": _ms(percentile(latencies, 0.95)),
                             "count": len(latencies)},
        "flush_backlog": {"pending": jobs.get("pending", 0),
                          "oldest_pending_age_s": round(now - oldest, 1) if oldest is not None else None},
        "nightly": _nightly(services, now),
        "top_usage": [{"scope": row.scope, "prompt_tokens": row.prompt_tokens, "completion_tokens": row.completion_tokens,
                       "turns": row.turns, "upkeep_tokens": row.upkeep_tokens} for row in book.top(date.today(), 10)],
        "warnings": warnings,
    }


def _receivers_dropped(services: Services, now: float) -> tuple[int, list[str]]:
    """Redeliveries the cluster's receivers dropped in the last 24 clock hours: of this workspace's
    shard when the console serves one, else of every shard; 0 without a cluster. Redis not
    answering leaves them out and says so (the page still shows the rest)."""
    config = services.config
    if not config.cluster.redis_url:
        return 0, []
    from ..cluster.connection import UNAVAILABLE
    from ..cluster.duplicates import dropped, hour_of
    from ..cluster.scrub import shard_of_workspace
    from ..redaction import redact_url

    try:
        return dropped(config, hour_of(now) - (HOURS - 1), hour_of(now), shard_of_workspace(config)), []
    except UNAVAILABLE as exc:
        log.warning("status: Redis did not answer (%s); the receivers' dropped redeliveries are left out", exc)
        return 0, [f"Redis at {redact_url(config.cluster.redis_url)} did not answer: redeliveries the receivers "
                   "dropped are not counted in 'deduplicated'"]


def _by_hour(services: Services, now: float) -> list[dict[str, Any]]:
    """The last 24 clock hours, this one included, oldest first; an hour without turns is zeros."""
    first = (int(now) // 3600 - (HOURS - 1)) * 3600
    counts = services.usage.hourly(first)
    return [{"hour": datetime.fromtimestamp(first + n * 3600, tz=UTC).isoformat(timespec="seconds"),
             "answered": counts.get(n, (0, 0))[0], "failed": counts.get(n, (0, 0))[1]} for n in range(HOURS)]


def _nightly(services: Services, now: float) -> dict[str, str | None]:
    success = services.nightly_last_success()
    local_now = datetime.fromtimestamp(now)
    next_run = services.timer.next_run_after(local_now, services.nightly_last_run())
    return {"last_success": success.isoformat(timespec="seconds") if success else None,
            "next_run": next_run.astimezone().isoformat(timespec="seconds")}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
