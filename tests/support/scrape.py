"""Reading a process's /metrics, /healthz and /readyz as Prometheus and an orchestrator would."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from fakes import HANG_GUARD_S
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def scrape(base: str) -> Samples:
    """Every sample of ``base``/metrics, parsed by prometheus-client's own parser."""
    status, body = await asyncio.to_thread(_get, f"{base}/metrics")
    assert status == 200, body
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body.decode()) for sample in family.samples}


async def probe(base: str, path: str) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of ``/healthz`` or ``/readyz``."""
    status, body = await asyncio.to_thread(_get, f"{base}{path}")
    return status, json.loads(body)


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist yet: a counter before its first event)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = HANG_GUARD_S) -> None:
    """Return once ``check()`` holds (asked again as soon as the last answer came); fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)  # between two polls of a condition, never instead of one
