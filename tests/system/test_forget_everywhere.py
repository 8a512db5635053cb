"""A token planted through every path a real bot has, then `/memory forget!`: no byte of it is left.

Paths: chat turns that get trimmed and flushed (the summary carries it, and becomes the session's
summary), the `memory_write` tool, a Deep Dream whose MEMORY.md and diary carry it. Then every file
under the workspace is read as bytes, search and the console are asked, and every older MEMORY.md
version is restored in turn.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse

import pytest
from aiohttp.test_utils import TestClient, TestServer
from support.bot import dm, is_summary_request, system_prompt
from support.forgetting import occurrences

from bridge.console import create_app

SCOPE = "telegram-42"
READ = {"Authorization": "Bearer read-tok"}


def responder(token: str):  # type: ignore[no-untyped-def]
    def respond(request):  # type: ignore[no-untyped-def]
        last = request["messages"][-1]
        if is_summary_request(request):
            return f"- Ann talked about the {token}"
        if "long-term memory file" in system_prompt(request):
            return f"[MEMORY]\n- Ann keeps the {token} in the attic\n- likes tea\n[DREAM]\nThe {token} again."
        if last["role"] == "user" and last["content"].startswith("please remember"):
            return {"tool_calls": [("memory_write", {"text": f"the {token} box is blue"})]}
        return "noted"

    return respond


@pytest.mark.parametrize("token", ["Zorblaxquint", "紫藤萝瀑布"])
async def test_a_token_planted_through_every_path_is_gone_after_forget(running, fake_llm, token: str) -> None:
    bridge, channel = await running(
        context={"max_turns": 2}, console={"token": "read-tok"},
        embedding={"provider": "openai", "base_url": fake_llm.base_url, "api_key": "test-key"})
    services = bridge.services
    fake_llm.responder = responder(token)
    await channel.push(dm(f"please remember the {token}"))
    for i in range(3):
        await channel.push(dm(f"chatter {i}, I like tea"))
    await channel.wait_sent(4)
    await services.flush_worker.drain()
    assert (await services.dream(SCOPE, days=1, force=True)).status == "written"
    await asyncio.to_thread(services.dreamer.memory_file.write, SCOPE, b"- likes tea\n", "test")  # a later version
    root = services.workspace.root
    planted = occurrences(root / "scopes", token)
    assert sorted(planted.values()) == [1, 2], planted  # the diary; the daily file (memory_write and the flush)
    session = services.conversations.get_session(f"{SCOPE}|telegram::42:")
    assert session is not None and token in (session.summary or "")
    assert any(token in r.text for r in await asyncio.to_thread(services.memory.search, token, SCOPE))

    await channel.push(dm(f"/memory forget {token}"))
    await channel.push(dm(f"/memory forget! {token}"))
    await channel.wait_sent(6)
    listing, done = channel.texts()[4:6]
    counts = "memory files: 2; dream diaries: 1; file versions: 1; messages: 2; session summaries: 1; index: 1"
    assert listing.startswith(f"“{token}” is in:\n```\n{counts}\n"), listing
    assert done == ("Forgotten for good: 2 in memory files, 1 in dream diaries, 1 in file versions, 2 in messages, "
                    "1 in session summaries, 1 in index.")

    assert occurrences(root, token) == {}
    found = await asyncio.to_thread(services.memory.search, token, SCOPE, min_score=0.0)
    assert not any(token in r.text for r in found)
    async with TestClient(TestServer(create_app(services))) as console:
        for path in (f"/api/scopes/{SCOPE}/memory", f"/api/scopes/{SCOPE}/daily", f"/api/scopes/{SCOPE}/dreams",
                     f"/api/search?q={urllib.parse.quote(token)}&scope={SCOPE}&weak=1"):
            response = await console.get(path, headers=READ)
            body = await response.json()
            shown = body["results"] if path.startswith("/api/search") else body  # a search echoes the query
            assert response.status == 200 and token not in json.dumps(shown, ensure_ascii=False)
    memory_file = services.dreamer.memory_file
    for version in memory_file.versions(SCOPE):
        await asyncio.to_thread(memory_file.revert, SCOPE, version.id)
        assert token not in services.workspace.memory_file(SCOPE).read_text(encoding="utf-8")
    assert "likes tea" in services.workspace.memory_file(SCOPE).read_text(encoding="utf-8")


async def test_a_forget_while_the_model_answers_keeps_the_answer_out_of_memory(running, fake_llm) -> None:
    bridge, channel = await running()
    services, token = bridge.services, "Zorblaxquint"
    fake_llm.responder = lambda _request: f"Noted: your locker code is {token}"  # the answer repeats it
    release = asyncio.Event()
    arrived = fake_llm.hold_first(lambda body: token in body["messages"][-1]["content"], release)
    await channel.push(dm(f"my locker code is {token}"))
    await asyncio.wait_for(arrived.wait(), 30)
    await asyncio.to_thread(services.forgetter.forget, SCOPE, token)  # an operator, while the model thinks
    release.set()
    await channel.wait_sent(1)
    assert channel.texts() == ["That message was forgotten while I was answering it, so I've dropped my answer."]
    assert occurrences(services.workspace.root, token) == {}
    session = services.conversations.get_session(f"{SCOPE}|telegram::42:")
    assert session is not None and services.conversations.context_messages(session.id) == []


@pytest.mark.parametrize(("tool", "arguments"), [
    ("memory_write", {"text": "locker code Zorblaxquint"}),
    ("knowledge_write", {"page": "lockers/codes", "content": "# Codes\nlocker code Zorblaxquint\n"}),
])
async def test_a_forget_while_the_model_answers_is_not_undone_by_its_tool_call(
        running, fake_llm, tool: str, arguments: dict[str, str]) -> None:
    """The model, asked before the forget, calls a tool that writes the text after it: refused."""
    bridge, channel = await running(admins=["telegram:42"])
    services, token = bridge.services, "Zorblaxquint"
    fake_llm.responder = lambda _request: {"tool_calls": [(tool, arguments)]}
    release = asyncio.Event()
    arrived = fake_llm.hold_first(lambda body: token in body["messages"][-1]["content"], release)
    await channel.push(dm(f"my locker code is {token}, please save it"))
    await asyncio.wait_for(arrived.wait(), 30)
    await asyncio.to_thread(services.forgetter.forget, SCOPE, token)
    release.set()
    await channel.wait_sent(1)
    assert channel.texts() == ["That message was forgotten while I was answering it, so I've dropped my answer."]
    assert occurrences(services.workspace.root, token) == {}
