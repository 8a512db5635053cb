"""The memory console: a small web page to see and fix what the bot remembers.

``membridge console`` serves it alone (:func:`serve`); ``membridge run`` serves it beside the bot
with :func:`start_in_background` when ``console.enabled`` is true. The page and its scripts are
static files with no data in them; everything else is the token-guarded JSON API under ``/api/``
(see :mod:`bridge.console.api`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from .. import offload
from ..logs import STATUS_LOGGER
from ..ops.health import index_problem, start_health
from ..wiring.app import Services
from .api import SERVICES, json_errors, routes
from .security import ConsoleError, add_security_headers, auth_middleware, check_settings

__all__ = ["STATIC_DIR", "ConsoleError", "check_settings", "create_app", "serve", "start_in_background"]

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"


def create_app(services: Services) -> web.Application:
    """The console's aiohttp application; refuses (ConsoleError) when no token is configured."""
    settings = services.config.console
    check_settings(settings)
    app = web.Application(middlewares=[json_errors, auth_middleware(settings)])
    app[SERVICES] = services
    app.router.add_routes(routes)
    app.router.add_get("/", _index)
    app.router.add_static("/static/", STATIC_DIR)
    app.on_response_prepare.append(add_security_headers)
    app.on_startup.append(_open_memory)
    return app


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html")


async def _open_memory(app: web.Application) -> None:
    """Build the memory parts once, before requests race to create them from several threads."""
    services = app[SERVICES]
    await offload.run(lambda: (services.memory, services.dreamer, services.knowledge))


async def serve(services: Services, *, on_started: Callable[[str], None] | None = None, health: bool = False) -> None:
    """Serve the console on ``console.host:console.port`` until cancelled.

    ``on_started`` gets the page's URL (never with the token) once the port is bound. ``health``
    (``membridge console``, a process of its own) also serves its ``/metrics``, ``/healthz`` and
    ``/readyz`` (ready: the index opens); inside ``membridge run`` the bot's endpoints cover it.
    """
    settings = services.config.console
    app = create_app(services)
    runner = web.AppRunner(app)
    await runner.setup()
    stop_health: Callable[[], None] | None = None
    try:
        try:
            await web.TCPSite(runner, settings.host, settings.port).start()
        except OSError as exc:
            raise ConsoleError(f"the memory console cannot listen on {settings.host}:{settings.port} "
                               f"({exc.strerror or exc}); change console.host or console.port") from exc
        url = _url(settings.host, settings.port)
        _warn_if_exposed(settings.host)
        if on_started is not None:
            on_started(url)
        if health:
            stop_health = start_health(services.config.metrics, lambda: [("index", lambda: index_problem(
                services.memory.db.path))], lambda: [services])
        await asyncio.Event().wait()
    finally:
        if stop_health is not None:
            stop_health()
        await runner.cleanup()


async def start_in_background(services: Services) -> asyncio.Task[None] | None:
    """For ``membridge run``: the console as a task of the running loop, or None when not enabled.

    Returns once the console listens (its URL, never a token, is a status line of ``run``) or has
    failed to. A missing token raises :class:`ConsoleError` here, before the bot starts; a failure
    to listen (the port is taken) is logged and the bot runs on. Cancel the task to stop it.
    """
    if not services.config.console.enabled:
        return None
    check_settings(services.config.console)
    listening = asyncio.Event()

    def started(url: str) -> None:
        logging.getLogger(STATUS_LOGGER).info("console: %s (sign in with console.token or console.admin_token)", url)
        listening.set()

    task = asyncio.create_task(serve(services, on_started=started), name="console")
    task.add_done_callback(_log_failure)
    waiter = asyncio.create_task(listening.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    return task


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the memory console stopped: %s", task.exception())


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _warn_if_exposed(host: str) -> None:
    """Tokens cross the network in clear over plain HTTP; say so when the console leaves this machine."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        log.warning("the memory console listens on %s over plain HTTP: put it behind HTTPS (a reverse proxy) "
                    "or keep console.host at 127.0.0.1", host)
