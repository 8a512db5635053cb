"""Conversation → daily memory → MEMORY.md under concurrency (issue 15): nothing lost, doubled or
resurrected. Real SQLite and files; the LLM is the fake OpenAI server, or an in-process model that
holds its answer until the test lets it go, so every interleaving is driven by events."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from support.bot import dm, is_summary_request, make_config, make_services
from support.channel import RecordingChannel

from bridge.llm import LLMClient, LLMResponse
from bridge.wiring.app import Services
from bridge.wiring.runtime import Bridge
from memory import Turn
from plugins import PluginRegistry
from plugins.builtin.commands import CommandsPlugin

NO_DREAM = {"dream": {"enabled": False}}


def summarise(request: dict[str, Any]) -> str:
    """The summariser every test uses: one bullet per user line it was given."""
    lines = request["messages"][1]["content"].splitlines()
    return "\n".join(f"- {line[len('user: '):]}" for line in lines if line.startswith("user: "))


def answer(request: dict[str, Any]) -> str:
    return summarise(request) if is_summary_request(request) else "ok"


def bullets(path: Path) -> list[str]:
    """The remembered lines of a daily file (its block headers carry the time of day)."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]


def today() -> str:
    return date.today().isoformat()


class HeldLLM(LLMClient):
    """An in-process model: chat turns answer "ok" at once; summaries wait for ``release``."""

    def __init__(self, dream_answer: str = "[MEMORY]\n- nothing\n[DREAM]\nquiet") -> None:
        self.dream_answer = dream_answer
        self.summary_asked = asyncio.Event()
        self.release = asyncio.Event()
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()) -> LLMResponse:
        self.requests.append(list(messages))
        request = {"messages": list(messages)}
        if is_summary_request(request):
            self.summary_asked.set()
            await self.release.wait()
            return LLMResponse(summarise(request))
        if "long-term memory file" in messages[0]["content"]:
            return LLMResponse(self.dream_answer)
        return LLMResponse("ok")


async def running(services: Services) -> tuple[Bridge, RecordingChannel]:
    """The bot as users reach it: the channel, the built-in commands, the flush worker."""
    channel = RecordingChannel()
    bridge = Bridge(services, [channel], PluginRegistry([CommandsPlugin(None)]))
    await bridge.start(timer=False)
    return bridge, channel


async def say(channel: RecordingChannel, *texts: str) -> None:
    """Send each text from Ann's DM and wait for every answer."""
    for text in texts:
        await channel.push(dm(text))
    await channel.wait_sent(len(channel.sent) + len(texts))


@pytest.fixture
def held(tmp_path: Path):
    made: list[Services] = []

    def make(llm: HeldLLM, **overrides: Any) -> Services:
        services = Services(make_config(tmp_path / "ws", "http://127.0.0.1:9/v1", **overrides), llm=llm)
        made.append(services)
        return services

    yield make
    for services in made:
        services.close()


async def test_a_turn_reaches_daily_memory_once_through_the_nightly_summary_and_a_later_trim(tmp_path, fake_llm) -> None:
    """#5: the trim's job started at the old context boundary, so "my cat is Tom", already in the
    nightly summary, was summarised a second time when it left the context."""
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 2}, memory=NO_DREAM)
    fake_llm.responder = answer
    await services.agent.handle(dm("my cat is Tom"))
    await services.nightly(date.today(), 1)
    for text in ("I like jazz", "I live in Oslo"):
        await services.agent.handle(dm(text))
    await services.flush_worker.drain()
    assert bullets(services.workspace.daily_file("telegram-42", today())) == ["- my cat is Tom", "- I like jazz"]
    await services.aclose()


async def test_clear_sends_the_days_unsummarised_turns_to_daily_memory(tmp_path, fake_llm) -> None:
    """#4a: /clear moved the context boundary without a flush job, and the nightly summary reads
    only the context: the turns before /clear never reached daily memory."""
    services = make_services(tmp_path / "ws", fake_llm.base_url, memory=NO_DREAM)
    fake_llm.responder = answer
    bridge, channel = await running(services)
    await say(channel, "my cat is Tom", "/clear")
    await services.nightly(date.today(), 1)
    assert bullets(services.workspace.daily_file("telegram-42", today())) == ["- my cat is Tom"]
    await bridge.shutdown()


async def test_a_flush_that_finishes_after_clear_stays_out_of_the_fresh_context(held) -> None:
    """#4b: the summary of turns trimmed before /clear was written into the fresh session."""
    llm = HeldLLM()
    bridge, channel = await running(held(llm, context={"max_turns": 2}))
    await say(channel, "my cat is Tom", "I like jazz", "I live in Oslo")
    await llm.summary_asked.wait()  # the trim's flush is in flight
    await say(channel, "/clear")
    llm.release.set()
    await bridge.services.flush_worker.drain()
    await say(channel, "a fresh start")
    fresh = llm.requests[-1]
    assert [m["content"] for m in fresh if m["role"] != "system"] == ["a fresh start"]
    assert [m for m in fresh if m["role"] == "system" and "Summary of the earlier" in m["content"]] == []
    assert bullets(bridge.services.workspace.daily_file("telegram-42", today())) == [
        "- my cat is Tom", "- I like jazz", "- I live in Oslo"]
    await bridge.shutdown()


async def test_a_flush_slower_than_any_timeout_does_not_cancel_the_night(held, monkeypatch) -> None:
    """#3: the night awaited a drain that gave up after 60 s (one LLM request may take 4 × 60 s);
    the TimeoutError skipped every Deep Dream and the cleanup. While the flush is in flight the
    loop's clock jumps an hour at every look, so any timeout at all would fire: none may, and the
    night dreams over the flushed turns."""
    llm = HeldLLM(dream_answer="[MEMORY]\n- has a cat named Tom\n[DREAM]\na slow night")
    services = held(llm, context={"max_turns": 2})
    services.flush_worker.start()
    for text in ("my cat is Tom", "I like jazz", "I live in Oslo"):
        await services.agent.handle(dm(text))
    await llm.summary_asked.wait()
    night = asyncio.create_task(services.nightly(date.today(), 1))
    loop = asyncio.get_running_loop()
    clock, hours = loop.time, itertools.count(1)
    monkeypatch.setattr(loop, "time", lambda: clock() + 3600 * next(hours))
    llm.release.set()
    await night
    monkeypatch.undo()
    assert services.workspace.memory_file("telegram-42").read_text() == "- has a cat named Tom\n"
    dream_prompt = llm.requests[-1][1]["content"]
    assert "- my cat is Tom\n- I like jazz" in dream_prompt and "- I live in Oslo" in dream_prompt
    await services.flush_worker.stop()


async def test_a_chat_whose_scope_changed_flushes_into_its_new_scope(tmp_path, fake_llm) -> None:
    """#7: the session kept the scope it was created with, so after memory.scope went from global
    to user a DM's trimmed turns went to the global scope, which no one reads any more."""
    fake_llm.responder = answer
    before = make_services(tmp_path / "ws", fake_llm.base_url, memory={"scope": "global"})
    await before.agent.handle(dm("said while memory was global"))
    await before.aclose()
    after = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 2}, memory=NO_DREAM)
    for text in ("my cat is Tom", "I like jazz", "I live in Oslo"):
        await after.agent.handle(dm(text))
    await after.flush_worker.drain()
    assert bullets(after.workspace.daily_file("telegram-42", today())) == ["- my cat is Tom", "- I like jazz"]
    assert not after.workspace.daily_file("global", today()).exists()
    await after.nightly(date.today(), 1)  # the old session's turn is kept where it was said
    assert bullets(after.workspace.daily_file("global", today())) == ["- said while memory was global"]
    assert bullets(after.workspace.daily_file("telegram-42", today()))[-1] == "- I live in Oslo"
    await after.aclose()


async def test_a_trim_under_asyncio_debug_answers_and_flushes(tmp_path, fake_llm) -> None:
    """#9: the trim ran in a worker thread and set the flush worker's asyncio.Event from there; with
    PYTHONASYNCIODEBUG=1 the turn raised after its answer was stored."""
    asyncio.get_running_loop().set_debug(True)
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 2})
    fake_llm.responder = answer
    services.flush_worker.start()
    await services.flush_worker.drain()  # the worker now waits for a wake-up
    replies = [(await services.agent.handle(dm(text))).text for text in ("my cat is Tom", "I like jazz", "I live in Oslo")]
    assert replies == ["ok", "ok", "ok"]
    await services.flush_worker.drain()
    assert bullets(services.workspace.daily_file("telegram-42", today())) == ["- my cat is Tom", "- I like jazz"]
    await services.aclose()


async def test_a_job_recorded_in_another_thread_wakes_the_worker(tmp_path, fake_llm) -> None:
    """#9, at the worker: notify() from a thread hands the wake-up to the loop."""
    asyncio.get_running_loop().set_debug(True)
    services = make_services(tmp_path / "ws", fake_llm.base_url)
    summarised = asyncio.Event()

    def respond(request: dict[str, Any]) -> str:
        summarised.set()
        return summarise(request)

    fake_llm.responder = respond
    services.flush_worker.start()
    await services.flush_worker.drain()
    store = services.conversations

    def record_in_a_thread() -> None:
        store.ensure_session("a chat", "telegram-42", "telegram")
        store.append_messages("a chat", [Turn("user", "my cat is Tom"), Turn("assistant", "ok")])
        store.trim("a chat", 3, "trim", today())
        services.flush_worker.notify()

    await asyncio.to_thread(record_in_a_thread)
    await asyncio.wait_for(summarised.wait(), 30)  # woken by notify alone: nothing else calls the worker
    await services.flush_worker.drain()
    assert bullets(services.workspace.daily_file("telegram-42", today())) == ["- my cat is Tom"]
    await services.aclose()
