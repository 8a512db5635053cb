"""The memory console's JSON API over HTTP: tokens, exact answers on a small workspace, bad input."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from fakes import HANG_GUARD_S
from support.bot import make_services
from support.ports import free_port

from bridge.console import ConsoleError, create_app, serve, start_in_background
from bridge.console.views import iso_time
from bridge.wiring.app import Services
from memory import Turn
from memory.files.memory_file import unified_diff
from memory.knowledge.knowledge import KnowledgeService

ROOT = Path(__file__).resolve().parents[2]
READ = {"Authorization": "Bearer read-tok"}
ADMIN = {"Authorization": "Bearer admin-tok"}
SHA_V2 = hashlib.sha256(b"- likes tea\n- lives in Lisbon\n").hexdigest()
TOKENS = {"token": "read-tok", "admin_token": "admin-tok"}

# 2026-02-01T10:00:00Z and later: fixed mtimes make last_activity and modified exact.
T0 = 1769940000.0
V1 = "- likes tea\r\n- café ☕".encode()  # CRLF, no final newline, non-ASCII: revert must keep every byte
V2 = b"- likes tea\n- lives in Lisbon\n"
BOB = b"- plays chess\n"


def _write(path: Path, text: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console=TOKENS)
    memory_file = services.dreamer.memory_file
    memory_file.write("alice", V1, "hand edit")  # version 1
    memory_file.write("alice", V2, "deep dream")  # version 2
    memory_file.write("bob", BOB, "deep dream")  # version 3
    workspace = services.workspace
    os.utime(workspace.memory_file("alice"), (T0, T0))
    os.utime(workspace.memory_file("bob"), (T0 + 5, T0 + 5))
    _write(workspace.daily_dir("alice") / "2026-01-30.md", "- booked flights to Porto\n", T0 + 10)
    _write(workspace.daily_dir("alice") / "2026-01-31.md", "- the cat is called Miso\n", T0 + 20)
    _write(workspace.daily_dir("alice") / "notes.md", "not a dated file\n", T0 + 99)
    _write(workspace.dreams_dir("alice") / "2026-01-31.md", "## 03:00\nTravel plans again.\n", T0 + 30)
    knowledge = workspace.knowledge_dir
    _write(knowledge / "tech" / "deploy.md", "# Deploying\nSee [[tech/servers]] and [cats](../pets/cats.md).\n", T0)
    _write(knowledge / "tech" / "servers.md", "# Servers\nThe Porto box.\n", T0 + 1)
    _write(knowledge / "pets" / "cats.md", "# Cats\nMiso is a cat.\n", T0 + 2)
    yield services
    services.close()


@pytest.fixture
async def client(services: Services) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(create_app(services))) as test_client:
        yield test_client


async def _json(client: TestClient, path: str, status: int = 200, *, method: str = "GET",
                headers: dict[str, str] = READ, **kwargs: Any) -> Any:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return await response.json()


def _iso(offset: float) -> str:
    return iso_time(T0 + offset)


# ---------------------------------------------------------------- tokens
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic read-tok"},
                                     {"Authorization": "Bearer"}, {"Authorization": "read-tok"}])
async def test_a_missing_or_wrong_token_is_401(client: TestClient, headers: dict[str, str]) -> None:
    response = await client.get("/api/scopes", headers=headers)
    assert response.status == 401
    assert "Bearer" in response.headers["WWW-Authenticate"]
    assert "token" in (await response.json())["error"]


@pytest.mark.parametrize("query", ["token=read-tok", "access_token=admin-tok", "authorization=Bearer%20admin-tok"])
async def test_a_token_in_the_query_string_is_not_accepted(client: TestClient, query: str) -> None:
    response = await client.get(f"/api/scopes?{query}")
    assert response.status == 401


async def test_whoami_tells_the_page_whether_it_may_revert(client: TestClient) -> None:
    assert await _json(client, "/api/whoami", headers=READ) == {"admin": False}
    assert await _json(client, "/api/whoami", headers=ADMIN) == {"admin": True}


async def test_the_read_token_cannot_revert(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/scopes/alice/memory/revert", 403, method="POST", json={"version": 1})
    assert "admin_token" in body["error"]
    assert services.workspace.memory_file("alice").read_bytes() == V2


async def test_the_page_and_its_scripts_need_no_token(client: TestClient) -> None:
    page = await client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    html = await page.text()
    assert "/static/app.js" in html and "/static/vendor/cytoscape.min.js" in html and "alice" not in html
    for path in ("/static/app.js", "/static/app.css", "/static/vendor/cytoscape.min.js", "/static/favicon.svg"):
        assert (await client.get(path)).status == 200, path


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/scopes", "/api/nothing-here"])
async def test_security_headers_are_on_every_response(client: TestClient, path: str) -> None:
    for headers in (READ, {}):
        response = await client.get(path, headers=headers)
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        if path.startswith("/api/"):
            assert response.headers["Cache-Control"] == "no-store"


def test_no_token_configured_refuses_to_start(tmp_path: Path) -> None:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={"enabled": True})
    with pytest.raises(ConsoleError, match=r"console\.token"):
        create_app(services)
    with pytest.raises(ConsoleError, match=r"console\.token"):
        asyncio.run(serve(services))


# ---------------------------------------------------------------- scopes
async def test_scopes_are_listed_with_counts_and_last_activity(client: TestClient, services: Services) -> None:
    store = services.conversations
    store.ensure_session("bob|chat", "bob")
    store.append_messages("bob|chat", [Turn("user", "hello")])
    [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    store.fail_job_attempt(job.id, "[Errno 28] No space left on device")
    assert await _json(client, "/api/scopes") == [
        {"scope": "alice", "memory_entries": 2, "daily_files": 2, "dream_files": 1, "last_activity": _iso(30),
         "versions": 2, "failing_flush_jobs": 0, "flush_error": None},
        {"scope": "bob", "memory_entries": 1, "daily_files": 0, "dream_files": 0, "last_activity": _iso(5),
         "versions": 1, "failing_flush_jobs": 1, "flush_error": "[Errno 28] No space left on device"},
    ]


async def test_memory_shows_the_file_and_its_versions(client: TestClient, services: Services) -> None:
    created = {v.id: v.created_at for v in services.dreamer.memory_file.versions("alice")}
    assert await _json(client, "/api/scopes/alice/memory") == {
        "scope": "alice",
        "content": V2.decode(),
        "sha256": SHA_V2,
        "versions": [
            {"id": 2, "created_at": iso_time(created[2]), "cause": "deep dream", "entries": 2},
            {"id": 1, "created_at": iso_time(created[1]), "cause": "hand edit", "entries": 2},
        ],
    }


async def test_a_version_comes_with_its_diff_against_the_one_before(client: TestClient) -> None:
    second = await _json(client, "/api/scopes/alice/memory/versions/2")
    assert second["content"] == V2.decode() and second["previous"] == 1
    assert second["diff"] == unified_diff(V1.decode(), V2.decode())
    assert "+- lives in Lisbon\n" in second["diff"]
    first = await _json(client, "/api/scopes/alice/memory/versions/1")
    assert first["content"] == V1.decode() and first["previous"] is None
    assert first["diff"] == unified_diff("", V1.decode())


@pytest.mark.parametrize(("path", "status"), [
    ("/api/scopes/alice/memory/versions/99", 404),
    ("/api/scopes/alice/memory/versions/3", 404),  # bob's version, not alice's
    ("/api/scopes/alice/memory/versions/0", 400),
    ("/api/scopes/alice/memory/versions/two", 400),
])
async def test_a_version_that_is_not_there(client: TestClient, path: str, status: int) -> None:
    body = await _json(client, path, status)
    assert "version" in body["error"]


# ---------------------------------------------------------------- revert
async def test_revert_restores_the_exact_bytes_of_the_chosen_version(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/scopes/alice/memory/revert", method="POST", json={"version": 1}, headers=ADMIN)
    assert body == {"scope": "alice", "version": 4, "diff": unified_diff(V2.decode(), V1.decode()), "changed": True,
                    "changes": [{"kind": "changed", "entry": 2, "line": 2, "before": "lives in Lisbon", "after": "café ☕"}]}
    assert services.workspace.memory_file("alice").read_bytes() == V1
    versions = (await _json(client, "/api/scopes/alice/memory"))["versions"]
    assert [(v["id"], v["cause"]) for v in versions] == [(4, "revert to version 1"), (2, "deep dream"),
                                                         (1, "hand edit")]


async def test_revert_to_what_the_file_already_holds_records_nothing(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/scopes/alice/memory/revert", method="POST", json={"version": 2}, headers=ADMIN)
    assert body == {"scope": "alice", "version": 2, "diff": "", "changed": False, "changes": []}
    assert len(services.dreamer.memory_file.versions("alice")) == 2


async def test_revert_without_a_version_goes_back_one(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/scopes/alice/memory/revert", method="POST", json={"version": None}, headers=ADMIN)
    assert body["version"] == 4
    assert services.workspace.memory_file("alice").read_bytes() == V1


@pytest.mark.parametrize(("scope", "payload", "status"), [
    ("alice", {"version": 99}, 404),
    ("alice", {"version": 3}, 404),  # another scope's version
    ("alice", {"version": "1"}, 400),
    ("alice", {"version": True}, 400),
    ("alice", {"version": 0}, 400),
    ("alice", [1], 400),
    ("bob", {"version": None}, 409),  # nothing earlier to go back to
    ("carol", {"version": 1}, 404),
    ("..%2Fx", {"version": 1}, 400),
])
async def test_revert_refuses_what_it_cannot_do(client: TestClient, services: Services, scope: str,
                                                payload: object, status: int) -> None:
    await _json(client, f"/api/scopes/{scope}/memory/revert", status, method="POST", json=payload, headers=ADMIN)
    assert services.workspace.memory_file("alice").read_bytes() == V2


async def test_revert_with_a_body_that_is_not_json(client: TestClient) -> None:
    await _json(client, "/api/scopes/alice/memory/revert", 400, method="POST", data=b"{version", headers=ADMIN)


# ------------------------------------------------------------- line edits
def _edit(**fields: object) -> dict[str, object]:
    return {"file": "MEMORY.md", "base": SHA_V2, **fields}


async def test_an_edit_is_previewed_then_saved_as_a_new_version(client: TestClient, services: Services) -> None:
    path = services.workspace.memory_file("alice")
    edit = _edit(op="edit", line=2, text="- lives in Porto")
    preview = await _json(client, "/api/scopes/alice/lines", method="POST", json={**edit, "preview": True}, headers=ADMIN)
    after = b"- likes tea\n- lives in Porto\n"
    assert preview == {"scope": "alice", "file": "MEMORY.md", "preview": True, "version": None,
                       "diff": unified_diff(V2.decode(), after.decode()), "content": after.decode(),
                       "sha256": hashlib.sha256(after).hexdigest(),
                       "changes": [{"kind": "changed", "entry": 2, "line": 2, "before": "lives in Lisbon",
                                    "after": "lives in Porto"}]}
    assert path.read_bytes() == V2  # a preview writes nothing
    saved = await _json(client, "/api/scopes/alice/lines", method="POST", json=edit, headers=ADMIN)
    assert saved == {**preview, "preview": False, "version": 4}
    assert path.read_bytes() == after
    versions = services.dreamer.memory_file.versions("alice")
    assert [(v.id, v.cause) for v in versions][:2] == [(4, "console: edit line 2"), (2, "deep dream")]
    assert [r.text for r in services.memory.search("Porto", "alice") if r.path == "MEMORY.md"] == [after.decode().strip()]


async def test_add_and_delete_lines(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/scopes/alice/lines", method="POST", headers=ADMIN,
                       json=_edit(op="add", line=None, text="- has a cat called Miso"))
    assert body["content"] == "- likes tea\n- lives in Lisbon\n- has a cat called Miso\n"
    body = await _json(client, "/api/scopes/alice/lines", method="POST", headers=ADMIN,
                       json=_edit(base=body["sha256"], op="add", line=0, text="# Alice"))
    assert body["content"] == "# Alice\n- likes tea\n- lives in Lisbon\n- has a cat called Miso\n"
    assert body["changes"] == [{"kind": "added", "entry": None, "line": 1, "before": None, "after": "# Alice"}]
    body = await _json(client, "/api/scopes/alice/lines", method="POST", headers=ADMIN,
                       json=_edit(base=body["sha256"], op="delete", line=3))
    assert services.workspace.memory_file("alice").read_text() == "# Alice\n- likes tea\n- has a cat called Miso\n"
    assert "\n-- lives in Lisbon\n" in body["diff"]
    assert body["changes"] == [{"kind": "removed", "entry": 2, "line": 3, "before": "lives in Lisbon", "after": None}]


async def test_an_edit_over_someone_elses_change_is_refused(client: TestClient, services: Services) -> None:
    services.dreamer.memory_file.write("alice", b"- likes coffee\n", "deep dream")  # after the page loaded
    body = await _json(client, "/api/scopes/alice/lines", 409, method="POST", headers=ADMIN,
                       json=_edit(op="delete", line=1))
    assert body["error"] == ("MEMORY.md of scope 'alice' has changed since you opened it (another edit, a dream or "
                             "the bot wrote to it); reload it to see the change, then make your edit again")
    assert services.workspace.memory_file("alice").read_bytes() == b"- likes coffee\n"


async def test_a_daily_line_edit_and_the_index_follows(client: TestClient, services: Services) -> None:
    day = await _json(client, "/api/scopes/alice/daily/2026-01-31")
    body = await _json(client, "/api/scopes/alice/lines", method="POST", headers=ADMIN, json={
        "file": "memory/2026-01-31.md", "base": day["sha256"], "op": "edit", "line": 1,
        "text": "- the cat is called Mochi"})
    assert body["version"] == 5 and body["content"] == "- the cat is called Mochi\n"  # 4: the file as it was
    assert "+- the cat is called Mochi\n" in body["diff"] and body["diff"].startswith("--- memory/2026-01-31.md (before)")
    found = await _json(client, "/api/search?q=Mochi&scope=alice")
    assert [r["path"] for r in found["results"]] == ["memory/2026-01-31.md"]
    assert (await _json(client, "/api/search?q=Miso&scope=alice"))["results"][0]["path"] == "knowledge/pets/cats.md"


DAY = "/api/scopes/alice/daily/2026-01-31"
MISO = b"- the cat is called Miso\n"


async def _edit_daily(client: TestClient, **fields: object) -> dict[str, Any]:
    base = (await _json(client, DAY))["sha256"]
    return await _json(client, "/api/scopes/alice/lines", method="POST", headers=ADMIN,
                       json={"file": "memory/2026-01-31.md", "base": base, **fields})


async def _found(client: TestClient, query: str) -> set[str]:
    return {r["path"] for r in (await _json(client, f"/api/search?q={query}&scope=alice"))["results"]}


async def test_a_daily_edit_is_listed_with_its_diff_and_can_be_undone(client: TestClient, services: Services) -> None:
    path = services.workspace.daily_file("alice", "2026-01-31")
    saved = await _edit_daily(client, op="delete", line=1)
    assert saved["version"] == 5 and path.read_bytes() == b""
    assert await _found(client, "Miso") == {"knowledge/pets/cats.md"}
    versions = (await _json(client, DAY))["versions"]
    assert [(v["id"], v["cause"], v["entries"]) for v in versions] == [
        (5, "console: delete line 1", 0), (4, "as found on disk", 1)]
    shown = await _json(client, f"{DAY}/versions/5")
    assert shown["previous"] == 4 and shown["content"] == ""
    assert shown["diff"] == unified_diff(MISO.decode(), "", "memory/2026-01-31.md")
    assert (await _json(client, f"{DAY}/versions/4"))["diff"].endswith("+- the cat is called Miso\n")
    assert shown["changes"] == [{"kind": "removed", "entry": 1, "line": 1, "before": "the cat is called Miso",
                                 "after": None}]
    undone = await _json(client, f"{DAY}/revert", method="POST", json={"version": 4}, headers=ADMIN)
    assert undone == {"scope": "alice", "version": 6, "changed": True,
                      "diff": unified_diff("", MISO.decode(), "memory/2026-01-31.md"),
                      "changes": [{"kind": "added", "entry": 1, "line": 1, "before": None,
                                   "after": "the cat is called Miso"}]}
    assert path.read_bytes() == MISO
    assert await _found(client, "Miso") == {"memory/2026-01-31.md", "knowledge/pets/cats.md"}  # the index follows
    assert [v.id for v in services.dreamer.memory_file.versions("alice")] == [2, 1]  # MEMORY.md's are its own


async def test_what_the_bot_wrote_after_an_edit_survives_a_revert(client: TestClient, services: Services) -> None:
    await _edit_daily(client, op="edit", line=1, text="- the cat is called Mochi")
    services.memory.append_daily("alice", "- Mochi sleeps all day", when=datetime(2026, 1, 31, 22, 0))
    undone = await _json(client, f"{DAY}/revert", method="POST", json={"version": None}, headers=ADMIN)
    versions = (await _json(client, DAY))["versions"]
    assert [(v["id"], v["cause"]) for v in versions] == [
        (7, "revert to version 5"), (6, "as found on disk"), (5, "console: edit line 1"), (4, "as found on disk")]
    assert undone["version"] == 7 and "-- Mochi sleeps all day\n" in undone["diff"]
    assert (await _json(client, f"{DAY}/versions/6"))["content"] == "- the cat is called Mochi\n- Mochi sleeps all day\n"


@pytest.mark.parametrize(("path", "payload", "status"), [
    (f"{DAY}/revert", {"version": None}, 409),  # no edit yet: nothing earlier to go back to
    (f"{DAY}/revert", {"version": 1}, 404),  # a MEMORY.md version, not this file's
    (f"{DAY}/revert", {"version": "1"}, 400),
    ("/api/scopes/alice/daily/2026-02-30/revert", {"version": 1}, 400),
    ("/api/scopes/alice/daily/2025-12-31/revert", {"version": None}, 409),
])
async def test_a_daily_revert_refuses_what_it_cannot_do(client: TestClient, services: Services, path: str,
                                                       payload: object, status: int) -> None:
    body = await _json(client, path, status, method="POST", json=payload, headers=ADMIN)
    assert "version" in body["error"] or "date" in body["error"]
    assert services.workspace.daily_file("alice", "2026-01-31").read_bytes() == MISO
    assert services.workspace.memory_file("alice").read_bytes() == V2


async def test_daily_versions_need_the_admin_token_to_revert(client: TestClient, services: Services) -> None:
    await _edit_daily(client, op="delete", line=1)
    await _json(client, f"{DAY}/versions/4")  # reading is for every token
    await _json(client, f"{DAY}/revert", 403, method="POST", json={"version": 4})
    await _json(client, "/api/scopes/alice/daily/2026-01-30/versions/4", 404)  # another day's version
    assert services.workspace.daily_file("alice", "2026-01-31").read_bytes() == b""


@pytest.mark.parametrize(("payload", "status"), [
    (_edit(op="edit", line=9, text="x"), 400),  # no such line
    (_edit(op="add", line=5, text="x"), 400),
    (_edit(op="edit", line=0, text="x"), 400),
    (_edit(op="edit", line=1, text="two\nlines"), 400),
    (_edit(op="edit", line=1, text="  "), 400),
    (_edit(op="rename", line=1, text="x"), 400),
    (_edit(op="delete", line=1, base="abc"), 400),
    (_edit(op="delete", line=1, file="../bob/MEMORY.md"), 400),
    (_edit(op="delete", line=1, file="memory/2026-13-01.md"), 400),
    (_edit(op="delete", line=1, file="memory/2026-01-29.md"), 404),
    (_edit(op="delete", line=1, preview="yes"), 400),
    ([1], 400),
])
async def test_a_bad_edit_is_refused_and_changes_nothing(client: TestClient, services: Services, payload: object,
                                                        status: int) -> None:
    await _json(client, "/api/scopes/alice/lines", status, method="POST", json=payload, headers=ADMIN)
    assert services.workspace.memory_file("alice").read_bytes() == V2


async def test_the_read_token_cannot_edit(client: TestClient, services: Services) -> None:
    await _json(client, "/api/scopes/alice/lines", 403, method="POST", json=_edit(op="delete", line=1))
    assert services.workspace.memory_file("alice").read_bytes() == V2


# ---------------------------------------------------------- daily, dreams
async def test_daily_memory_by_date(client: TestClient) -> None:
    assert await _json(client, "/api/scopes/alice/daily") == [
        {"date": "2026-01-31", "size": len("- the cat is called Miso\n")},
        {"date": "2026-01-30", "size": len("- booked flights to Porto\n")},
    ]
    assert await _json(client, "/api/scopes/alice/daily/2026-01-30") == {
        "date": "2026-01-30", "content": "- booked flights to Porto\n",
        "sha256": hashlib.sha256(b"- booked flights to Porto\n").hexdigest(), "versions": []}
    assert await _json(client, "/api/scopes/bob/daily") == []


async def test_dream_diaries_by_date(client: TestClient) -> None:
    assert await _json(client, "/api/scopes/alice/dreams") == [
        {"date": "2026-01-31", "size": len("## 03:00\nTravel plans again.\n")}]
    assert await _json(client, "/api/scopes/alice/dreams/2026-01-31") == {
        "date": "2026-01-31", "content": "## 03:00\nTravel plans again.\n",
        "sha256": hashlib.sha256(b"## 03:00\nTravel plans again.\n").hexdigest()}


@pytest.mark.parametrize("day", ["2026-13-01", "2026-02-30", "2026-1-1", "notes", "..%2FMEMORY", "..%2F..%2Findex.db"])
@pytest.mark.parametrize("kind", ["daily", "dreams"])
async def test_a_bad_date_is_400(client: TestClient, kind: str, day: str) -> None:
    body = await _json(client, f"/api/scopes/alice/{kind}/{day}", 400)
    assert "date" in body["error"]


@pytest.mark.parametrize("kind", ["daily", "dreams"])
async def test_a_date_without_a_file_is_404(client: TestClient, kind: str) -> None:
    await _json(client, f"/api/scopes/alice/{kind}/2025-12-31", 404)


# ------------------------------------------------------------ bad scopes
@pytest.mark.parametrize("scope", ["..%2Fx", "..%2F..", "%40knowledge", "a%20b", ".hidden", "-x"])
@pytest.mark.parametrize("tail", ["memory", "daily", "dreams", "memory/versions/1"])
async def test_an_invalid_scope_name_is_400(client: TestClient, scope: str, tail: str) -> None:
    body = await _json(client, f"/api/scopes/{scope}/{tail}", 400)
    assert "scope" in body["error"]


async def test_an_unknown_scope_is_404_and_names_the_known_ones(client: TestClient) -> None:
    body = await _json(client, "/api/scopes/carol/memory", 404)
    assert body == {"error": "unknown scope 'carol' (known scopes: alice, bob)"}


async def test_unknown_endpoints_and_methods_answer_in_json(client: TestClient) -> None:
    await _json(client, "/api/nothing-here", 404)
    await _json(client, "/api/scopes/alice/memory/revert", 405)  # GET on a POST-only endpoint
    await _json(client, "/api/scopes", 403, method="DELETE")  # not a read: the read token may not
    await _json(client, "/api/scopes", 405, method="DELETE", headers=ADMIN)


# ---------------------------------------------------------------- search
async def test_search_shows_every_score(client: TestClient, services: Services) -> None:
    body = await _json(client, "/api/search?q=Miso&scope=alice&limit=5")
    expected = services.memory.search("Miso", "alice", limit=5)  # what the CLI finds: memory.min_score applies
    weights = {"hybrid": False, "vector": 0.7, "keyword": 0.3, "coverage": 0.05, "recency": 0.1, "min_score": 0.1}
    assert body == {"query": "Miso", "scope": "alice", "weak": False, "weights": weights,
                    "results": [r.to_dict() for r in expected]}
    weak = await _json(client, "/api/search?q=Miso&scope=alice&limit=5&weak=1")
    everything = services.memory.search("Miso", "alice", limit=5, min_score=0.0)
    assert weak == {"query": "Miso", "scope": "alice", "weak": True, "weights": weights,
                    "results": [r.to_dict() for r in everything]}
    hits = {(r.path, r.start_line, r.end_line, r.source, r.scope) for r in expected}
    assert hits == {("memory/2026-01-31.md", 1, 1, "memory", "alice"),
                    ("knowledge/pets/cats.md", 1, 2, "knowledge", "@knowledge")}
    for result in expected:  # keyword-only search: no vector score, final = keyword × recency
        assert result.vector_score is None and result.keyword_score and 0.9 <= result.recency <= 1
        assert result.relevance == result.keyword_score and result.time_boost == 1.0
        assert result.score == pytest.approx(result.keyword_score * result.recency, abs=1e-5)


async def test_search_keeps_to_the_scope(client: TestClient) -> None:
    body = await _json(client, "/api/search?q=Porto&scope=bob")
    assert [r["path"] for r in body["results"]] == ["knowledge/tech/servers.md"]


async def test_weak_vector_neighbours_show_only_when_asked_but_the_best_is_always_shown(tmp_path: Path) -> None:
    from memory import HashEmbedding, MemoryManager

    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console=TOKENS)
    services.__dict__["memory"] = MemoryManager(services.workspace, services.config.memory,
                                                embedder=HashEmbedding(dim=64))  # vectors, deterministic
    notes = "".join(f"- note number {n} about topic {n * 7}\n\n" for n in range(30))  # no word of the query
    _write(services.workspace.daily_dir("alice") / "2026-01-31.md", notes, T0)
    async with TestClient(TestServer(create_app(services))) as client:
        plain = await _json(client, "/api/search?q=zebra%20migration&scope=alice")
        weak = await _json(client, "/api/search?q=zebra%20migration&scope=alice&weak=1")
    services.close()
    # what `membridge memory search` shows: nothing passes memory.min_score, so only the best, labelled weak
    [best] = plain["results"]
    assert best["weak"] is True and best["keyword_score"] is None
    assert weak["results"] and all(r["keyword_score"] is None and r["weak"] for r in weak["results"])
    assert weak["results"][0]["path"] == best["path"] and weak["results"][0]["start_line"] == best["start_line"]


@pytest.mark.parametrize(("query", "status"), [
    ("scope=alice", 400), ("q=%20&scope=alice", 400), ("q=Miso", 400), ("q=Miso&scope=..%2Fx", 400),
    ("q=Miso&scope=carol", 404), ("q=Miso&scope=alice&limit=0", 400), ("q=Miso&scope=alice&limit=101", 400),
    ("q=Miso&scope=alice&limit=ten", 400), ("q=Miso&scope=alice&weak=yes", 400),
])
async def test_search_refuses_bad_parameters(client: TestClient, query: str, status: int) -> None:
    await _json(client, f"/api/search?{query}", status)


# ------------------------------------------------------------- knowledge
async def test_knowledge_pages_and_their_text(client: TestClient) -> None:
    assert await _json(client, "/api/knowledge") == [
        {"path": "knowledge/pets/cats.md", "category": "pets", "slug": "cats", "title": "Cats",
         "size": len("# Cats\nMiso is a cat.\n"), "modified": _iso(2)},
        {"path": "knowledge/tech/deploy.md", "category": "tech", "slug": "deploy", "title": "Deploying",
         "size": len("# Deploying\nSee [[tech/servers]] and [cats](../pets/cats.md).\n"), "modified": _iso(0)},
        {"path": "knowledge/tech/servers.md", "category": "tech", "slug": "servers", "title": "Servers",
         "size": len("# Servers\nThe Porto box.\n"), "modified": _iso(1)},
    ]
    assert await _json(client, "/api/knowledge/page?path=tech/servers") == {
        "path": "tech/servers", "content": "# Servers\nThe Porto box.\n", "html": "<h1>Servers</h1>\n<p>The Porto box.</p>\n"}
    deploy = await _json(client, "/api/knowledge/page?path=knowledge/tech/deploy.md")
    assert deploy["html"] == (
        '<h1>Deploying</h1>\n<p>See <a href="#/knowledge/tech/servers" class="page-link" '
        'data-page="knowledge/tech/servers.md">Servers</a> and <a href="#/knowledge/pets/cats" '
        'class="page-link" data-page="knowledge/pets/cats.md">cats</a>.</p>\n')  # a bare [[link]]: the title


HOSTILE = """# Hostile <img src=x onerror="window.pwned=1">
<script>window.pwned = 1</script>
<a href="javascript:window.pwned=1">raw link</a> [md link](javascript:window.pwned=1) [data](data:text/html,x)
![pixel](https://tracker.example/p.png) [[tech/servers|the <b>servers</b>]] [[nowhere]] [away](https://example.org/)
"""


async def test_a_hostile_page_renders_as_inert_html(client: TestClient, services: Services) -> None:
    KnowledgeService(services.memory).write("tech/hostile", HOSTILE, actor="test")
    html = (await _json(client, "/api/knowledge/page?path=tech/hostile"))["html"]
    assert "<script" not in html and "<img" not in html and "<b>" not in html and 'href="javascript' not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html and 'href="data' not in html
    assert "[md link](javascript:window.pwned=1)" in html  # an unsafe link stays text
    assert ('<a href="#/knowledge/tech/servers" class="page-link" data-page="knowledge/tech/servers.md">'
            "the &lt;b&gt;servers&lt;/b&gt;</a>") in html
    assert '<span class="dead-link" title="no such page in the knowledge base">nowhere</span>' in html
    assert '<a href="https://example.org/" target="_blank" rel="noopener noreferrer">away</a>' in html


@pytest.mark.parametrize(("path", "status"), [
    ("tech/nothing", 404), ("", 400), ("..%2F..%2Findex.db", 400), ("%2Fetc%2Fpasswd", 400), ("tech%2F..%2F..%2Fx", 400),
])
async def test_a_bad_knowledge_page(client: TestClient, path: str, status: int) -> None:
    await _json(client, f"/api/knowledge/page?path={path}", status)


async def test_knowledge_graph(client: TestClient) -> None:
    assert await _json(client, "/api/knowledge/graph") == {
        "nodes": [
            {"id": "knowledge/pets/cats.md", "title": "Cats", "category": "pets"},
            {"id": "knowledge/tech/deploy.md", "title": "Deploying", "category": "tech"},
            {"id": "knowledge/tech/servers.md", "title": "Servers", "category": "tech"},
        ],
        "edges": [
            {"source": "knowledge/pets/cats.md", "target": "knowledge/tech/deploy.md"},
            {"source": "knowledge/tech/deploy.md", "target": "knowledge/tech/servers.md"},
        ],
    }


# ------------------------------------------------------------ serve, CLI


async def test_serve_runs_until_cancelled(tmp_path: Path) -> None:
    port = free_port()
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={**TOKENS, "port": port})
    started: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(serve(services, on_started=started.put_nowait))
    try:
        url = await asyncio.wait_for(started.get(), HANG_GUARD_S)
        assert url == f"http://127.0.0.1:{port}/"
        async with aiohttp.ClientSession() as session, session.get(f"{url}api/whoami", headers=ADMIN) as response:
            assert await response.json() == {"admin": True}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        services.close()
    with socket.socket() as again:  # the port is free once serve has returned
        again.bind(("127.0.0.1", port))


async def test_start_in_background_serves_beside_the_bot(tmp_path: Path) -> None:
    port = free_port()
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={**TOKENS, "port": port,
                                                                               "enabled": True})
    task = await start_in_background(services)
    assert task is not None
    try:
        for _ in range(100):  # the port is bound once start_in_background returns
            try:
                async with aiohttp.ClientSession() as session, \
                        session.get(f"http://127.0.0.1:{port}/api/whoami", headers=READ) as response:
                    assert await response.json() == {"admin": False}
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("the console never answered")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        services.close()


async def test_start_in_background_when_disabled_or_misconfigured(tmp_path: Path) -> None:
    disabled = make_services(tmp_path / "a", "http://127.0.0.1:9/v1", console=TOKENS)
    assert await start_in_background(disabled) is None
    no_token = make_services(tmp_path / "b", "http://127.0.0.1:9/v1", console={"enabled": True})
    with pytest.raises(ConsoleError, match=r"console\.token"):
        await start_in_background(no_token)


async def test_start_in_background_logs_a_port_in_use(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={**TOKENS, "port": port,
                                                                                   "enabled": True})
        task = await start_in_background(services)
        assert task is not None and task.done()
        with pytest.raises(ConsoleError, match="cannot listen"):
            await task
        await asyncio.sleep(0)  # let the done-callback run
    services.close()
    assert f"cannot listen on 127.0.0.1:{port}" in caplog.text and "console.port" in caplog.text


def _config(tmp_path: Path, console: dict[str, object]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
                                    "console": console}), encoding="utf-8")
    return path


async def _membridge(*args: str) -> asyncio.subprocess.Process:
    """``python -m bridge`` with faulthandler on, so :func:`_stopped` can show where a hang is."""
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "bridge", *args, cwd=ROOT,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, "PYTHONFAULTHANDLER": "1"})


async def _stopped(process: asyncio.subprocess.Process, timeout: float) -> str:
    """Its stderr once it exits. One that does not exit within ``timeout`` is aborted, and the test
    fails with every thread's stack (faulthandler's dump on SIGABRT), not a bare timeout."""
    try:
        _out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.send_signal(signal.SIGABRT)
        _out, err = await process.communicate()
        pytest.fail(f"membridge did not stop within {timeout} s; where it was:\n{err.decode(errors='replace')}")
    return err.decode()


async def test_cli_console_refuses_without_a_token(tmp_path: Path) -> None:
    process = await _membridge("--config", str(_config(tmp_path, {})), "console")
    err = await _stopped(process, 60)
    assert process.returncode == 1 and "console.token" in err


async def test_cli_console_serves_its_own_metrics_and_readiness(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    config = _config(tmp_path, {**TOKENS, "port": port})
    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, "metrics": {"port": metrics_port}}), encoding="utf-8")
    process = await _membridge("--config", str(config), "console")
    assert process.stderr is not None
    try:
        await asyncio.wait_for(process.stderr.readline(), 60)  # the console's URL
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert f"metrics: http://127.0.0.1:{metrics_port}/metrics (health: /healthz, /readyz)" in line
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{metrics_port}/readyz") as response:
                assert (response.status, await response.json()) == (200, {"status": "ready", "checks": {"index": "ok"}})
            async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
                assert response.status == 200 and "membridge_flush_jobs" in await response.text()
    finally:
        process.send_signal(signal.SIGINT)
        err = await _stopped(process, 30)
    assert process.returncode == 0, err


async def test_cli_console_prints_the_url_without_the_token(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, {**TOKENS, "port": port})
    process = await _membridge("--config", str(config), "console")
    assert process.stderr is not None
    try:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert f"http://127.0.0.1:{port}/" in line and "read-tok" not in line and "admin-tok" not in line
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/api/scopes", headers=READ) as response:
            assert response.status == 200 and await response.json() == []
    finally:
        process.send_signal(signal.SIGINT)
        err = await _stopped(process, 30)
    assert process.returncode == 0, err
