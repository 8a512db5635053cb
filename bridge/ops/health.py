"""``/metrics``, ``/healthz`` and ``/readyz`` of a long-running role, on ``metrics.host:metrics.port``.

They are served from a thread of their own, not from the event loop: a probe must be able to say
that the loop is stuck, which a handler on that loop could never do. ``/healthz`` (alive) asks the
loop to run a no-op and waits :data:`LOOP_BOUND_S` for it. ``/readyz`` (ready for traffic) runs
each readiness check the role registered (the index opens, each channel has connected, Redis
answers, the flush worker runs): 200 when every one passes, else 503, with a JSON body naming each
check and what is wrong. ``membridge doctor`` reads a running process's ``/readyz`` and runs the
same index and Redis checks itself (:func:`index_problem`, :func:`redis_problem`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from ..config import MetricsSettings
from ..logs import STATUS_LOGGER
from . import metrics

if TYPE_CHECKING:
    from ..wiring.app import Services

log = logging.getLogger(__name__)

LOOP_BOUND_S = 2.0  # an event loop that cannot run a no-op in this long is not alive
PROBE_TIMEOUT_S = 1.0  # Redis and SQLite get this long to answer a readiness check

#: A readiness check: None when all is well, else what is wrong, in words an operator can act on.
Check = Callable[[], str | None]
StartResponse = Callable[..., Any]


def index_problem(path: Path) -> str | None:
    """The index can be opened and read (a fresh read-only connection, as a restart would make)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=PROBE_TIMEOUT_S)
    except sqlite3.Error as exc:
        return f"cannot open {path}: {exc}"
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return f"cannot read {path}: {exc}"
    finally:
        conn.close()
    return None


def redis_problem(url: str) -> str | None:
    """Redis at ``url`` answers a PING within :data:`PROBE_TIMEOUT_S`."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"Redis at {url} does not answer: {exc}"
    finally:
        client.close()
    return None


def workspace_checks(services: Services) -> list[tuple[str, Check]]:
    """What a process answering turns needs: its index opens, and its flush worker runs."""
    def flush_worker() -> str | None:
        return None if services.flush_worker.alive else "the flush worker is not running"

    return [("index", lambda: index_problem(services.memory.db.path)), ("flush_worker", flush_worker)]


def channel_check(name: str, started: Container[str]) -> Check:
    """A channel is ready once it has started (connected, or listening for its webhook)."""
    return lambda: None if name in started else f"the {name} channel has not connected"


def start_health(settings: MetricsSettings, checks: Callable[[], Iterable[tuple[str, Check]]],
                 workspaces: Callable[[], Iterable[Services]]) -> Callable[[], None]:
    """Serve this process's endpoints (when ``metrics.enabled``) and count its ``workspaces`` in
    ``/metrics``; returns what stops both. Called from the running event loop."""
    if not settings.enabled:
        return lambda: None
    unwatch = metrics.watch_workspaces(workspaces)
    server = HealthServer(asyncio.get_running_loop(), checks)
    url = server.start(settings)
    if url is not None:
        logging.getLogger(STATUS_LOGGER).info("metrics: %s (health: /healthz, /readyz)", url)

    def stop() -> None:
        server.close()
        unwatch()

    return stop


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes come every few seconds: they do not belong in the log."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scrape never holds the process at exit


class HealthServer:
    """The three endpoints of one process; :meth:`close` stops them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, checks: Callable[[], Iterable[tuple[str, Check]]]) -> None:
        self._loop = loop
        self._checks = checks
        self._metrics = make_wsgi_app()
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, settings: MetricsSettings) -> str | None:
        """Listen on ``metrics.host:port``; the URL, or None (logged) when the port is taken."""
        try:
            self._server = make_server(settings.host, settings.port, self._app, _ThreadingServer, _QuietHandler)
        except OSError as exc:
            log.warning("metrics and health endpoints are off: cannot listen on %s:%d (%s); set metrics.port "
                        "(or MEMBRIDGE_METRICS_PORT) to a free port", settings.host, settings.port, exc.strerror or exc)
            return None
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)
        self._thread.start()
        return f"http://{settings.host}:{self._server.server_port}/metrics"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body: Iterable[bytes] = self._metrics(environ, start_response)
            return body
        if path == "/healthz":
            return _json(start_response, *self.alive())
        if path == "/readyz":
            return _json(start_response, *self.ready())
        return _json(start_response, 404, {"error": f"no {path}: try /metrics, /healthz or /readyz"})

    def alive(self) -> tuple[int, dict[str, Any]]:
        """The event loop runs a no-op within :data:`LOOP_BOUND_S`."""
        answered = threading.Event()
        try:
            self._loop.call_soon_threadsafe(answered.set)
        except RuntimeError:
            return 503, {"status": "down", "problem": "the event loop is closed"}
        if not answered.wait(LOOP_BOUND_S):
            return 503, {"status": "stuck", "problem": f"the event loop did not answer within {LOOP_BOUND_S:.0f} s"}
        return 200, {"status": "alive"}

    def ready(self) -> tuple[int, dict[str, Any]]:
        """Every readiness check; 503 names each one that fails."""
        results: dict[str, str] = {}
        for name, check in self._checks():
            try:
                problem = check()
            except Exception as exc:  # a check that breaks is a failed check, never a broken probe
                problem = f"{type(exc).__name__}: {exc}"
            results[name] = problem or "ok"
        ready = all(result == "ok" for result in results.values())
        return (200 if ready else 503), {"status": "ready" if ready else "not ready", "checks": results}


def _json(start_response: StartResponse, status: int, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body, ensure_ascii=False).encode()
    reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[status]
    start_response(f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                                          ("Cache-Control", "no-store")])
    return [data]
