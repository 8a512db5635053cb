"""The console's JSON API: thin async handlers over :mod:`bridge.console.views`.

Every handler hands the blocking work (files, SQLite, search) to a worker thread so a slow search
never stalls the bot's channels when the console runs inside ``membridge run``. Every failure under
``/api/`` is a JSON ``{"error": "..."}`` with the status that says whose fault it was.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from memory import KnowledgeError, KnowledgeNotFound, MemoryPathError, ScopeError

from .. import offload
from ..wiring.app import Services
from . import conversation, recalls, views
from .security import API_PREFIX, Handler, Role, json_error, role_for
from .status import status_view

log = logging.getLogger(__name__)

SERVICES = web.AppKey("services", Services)
T = TypeVar("T")

routes = web.RouteTableDef()
_dumps = functools.partial(json.dumps, ensure_ascii=False)

# Checked in order: KnowledgeNotFound is a KnowledgeError, so it must come first.
_ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (views.NotFound, 404),
    (KnowledgeNotFound, 404),
    (views.Conflict, 409),
    (views.BadRequest, 400),
    (ScopeError, 400),
    (MemoryPathError, 400),
    (KnowledgeError, 400),
)


async def _in_thread(request: web.Request, func: Callable[..., T], *args: Any) -> T:
    return await offload.run(func, request.app[SERVICES], *args)


def _reply(data: object) -> web.Response:
    return web.json_response(data, dumps=_dumps)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map domain errors and aiohttp's own (unknown route, wrong method) to JSON for ``/api/``."""
    if not request.path.startswith(API_PREFIX):
        return await handler(request)
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return json_error(exc.status, f"{exc.reason}: {request.method} {request.path}")
    except Exception as exc:
        status = next((code for kind, code in _ERROR_STATUS if isinstance(exc, kind)), None)
        if status is None:
            log.exception("console request %s %s failed", request.method, request.path)
            return json_error(500, "internal error; the server log has the details")
        return json_error(status, str(exc))


async def _json_body(request: web.Request, example: str) -> object:
    """The request's JSON body ({} when empty); anything else is a 400 showing ``example``."""
    raw = await request.text()
    try:
        return json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        raise views.BadRequest(f"the body must be JSON like {example}") from None


@routes.get("/api/whoami")
async def whoami(request: web.Request) -> web.Response:
    settings = request.app[SERVICES].config.console
    return _reply({"admin": role_for(request.headers.get("Authorization"), settings) is Role.ADMIN})


@routes.get("/api/scopes")
async def scopes(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.list_scopes))


@routes.get("/api/scopes/{scope}/overview")
async def overview(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.overview, request.match_info["scope"]))


@routes.get("/api/scopes/{scope}/memory")
async def memory(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.memory_view, request.match_info["scope"]))


@routes.get("/api/scopes/{scope}/memory/versions/{version}")
async def memory_version(request: web.Request) -> web.Response:
    version = views.parse_version(request.match_info["version"])
    return _reply(await _in_thread(request, views.version_view, request.match_info["scope"], version))


@routes.post("/api/scopes/{scope}/memory/revert")
async def memory_revert(request: web.Request) -> web.Response:
    version = views.parse_revert_body(await _json_body(request, '{"version": 3}'))
    return _reply(await _in_thread(request, views.revert, request.match_info["scope"], version))


@routes.post("/api/scopes/{scope}/lines")
async def edit_lines(request: web.Request) -> web.Response:
    edit = views.parse_line_edit(await _json_body(request, '{"file": "MEMORY.md", "op": "add", ...}'))
    return _reply(await _in_thread(request, views.edit_lines, request.match_info["scope"], edit))


@routes.get("/api/scopes/{scope}/recalls")
async def scope_recalls(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, recalls.recalls, request.match_info["scope"]))


@routes.get("/api/scopes/{scope}/conversation")
async def scope_conversation(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, conversation.conversation, request.match_info["scope"],
                                   dict(request.query)))


@routes.get("/api/scopes/{scope}/daily")
async def daily(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.daily_list, request.match_info["scope"]))


@routes.get("/api/scopes/{scope}/daily/{date}")
async def daily_day(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.daily_file, request.match_info["scope"], request.match_info["date"]))


@routes.get("/api/scopes/{scope}/daily/{date}/versions/{version}")
async def daily_version(request: web.Request) -> web.Response:
    file, version = views.daily_path(request.match_info["date"]), views.parse_version(request.match_info["version"])
    return _reply(await _in_thread(request, views.version_view, request.match_info["scope"], version, file))


@routes.post("/api/scopes/{scope}/daily/{date}/revert")
async def daily_revert(request: web.Request) -> web.Response:
    file = views.daily_path(request.match_info["date"])
    version = views.parse_revert_body(await _json_body(request, '{"version": 3}'))
    return _reply(await _in_thread(request, views.revert, request.match_info["scope"], version, file))


@routes.get("/api/scopes/{scope}/dreams")
async def dreams(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.dreams_list, request.match_info["scope"]))


@routes.get("/api/scopes/{scope}/dreams/{date}")
async def dreams_day(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.dream_file, request.match_info["scope"], request.match_info["date"]))


@routes.get("/api/search")
async def search(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.search, dict(request.query)))


@routes.get("/api/knowledge")
async def knowledge(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.knowledge_pages))


@routes.get("/api/knowledge/page")
async def knowledge_page(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.knowledge_page, request.query.get("path")))


@routes.get("/api/knowledge/graph")
async def knowledge_graph(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, views.knowledge_graph))


@routes.get("/api/status")
async def status(request: web.Request) -> web.Response:
    return _reply(await _in_thread(request, status_view))
