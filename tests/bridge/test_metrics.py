"""/metrics, /healthz and /readyz of `membridge run`, scraped over HTTP around real turns.

The bot is the real stack (python-telegram-bot against the fake Telegram server, the openai client
against the fake OpenAI server, SQLite); each test scrapes before and after and checks exact deltas.
"""

from __future__ import annotations

import json
from datetime import date, datetime

import pytest
from fakes.openai_server import _count_tokens
from support.bot import DREAM_ANSWER, trim_a_turn
from support.scrape import Samples, delta, eventually, probe, scrape, value


async def one_turn(metered_bot, text: str, answer: str) -> tuple[Samples, Samples, dict]:
    """A first message answered with ``answer``: /metrics before it and once its latency is observed
    (after the answer is sent), and the model request it made."""
    telegram, llm, _services, base = metered_bot
    before = await scrape(base)
    llm.reply(answer)
    telegram.push_text(501, 501, text)
    await telegram.wait_sent(1)

    async def sent_and_timed() -> bool:
        return delta(before, await scrape(base), "membridge_turn_seconds_count", channel="telegram") == 1

    await eventually(sent_and_timed, "the turn's latency to be observed")
    [request] = llm.requests
    return before, await scrape(base), request


async def test_an_answered_turn_counts_the_turn_the_request_its_tokens_and_its_latency(metered_bot) -> None:
    services = metered_bot[2]
    before, after, request = await one_turn(metered_bot, "hi, I'm Ann", "Hello Ann, nice to meet you.")
    prompt = _count_tokens(json.dumps(request["messages"]))
    completion = _count_tokens("Hello Ann, nice to meet you.")
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="answered") == 1
    assert delta(before, after, "membridge_model_requests_total", model="fake-model", outcome="ok") == 1
    assert delta(before, after, "membridge_model_tokens_total", model="fake-model", kind="prompt", estimated="false") == prompt
    assert delta(before, after, "membridge_model_tokens_total", model="fake-model", kind="completion",
                 estimated="false") == completion
    assert delta(before, after, "membridge_model_request_seconds_count", model="fake-model") == 1
    assert delta(before, after, "membridge_model_request_seconds_bucket", model="fake-model", le="+Inf") == 1
    assert delta(before, after, "membridge_turn_seconds_bucket", channel="telegram", le="+Inf") == 1
    [row] = services.usage.report(date.today(), date.today())
    assert (row.scope, row.prompt_tokens, row.completion_tokens, row.turns, row.estimated) == (
        "telegram-501", prompt, completion, 1, False)


async def test_a_failed_model_a_redelivery_and_a_tool_search_are_counted_as_such(metered_bot) -> None:
    telegram, llm, services, base = metered_bot
    before = await scrape(base)
    llm.fail(500, times=3)  # the client's two retries fail too
    update = telegram.push_text(501, 501, "are you there?")
    [failure] = await telegram.wait_sent(1)
    assert "Something went wrong" in failure["text"]
    llm.tool_call("memory_search", {"query": "nothing like this"})
    llm.reply("I found nothing.")
    telegram.push_update({**update, "update_id": update["update_id"] + 100})  # the same message again: dropped
    telegram.push_text(501, 501, "what do you know about sailing?")
    await telegram.wait_sent(2)
    after = await scrape(base)
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="failed") == 1
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="deduplicated") == 1
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="answered") == 1
    assert delta(before, after, "membridge_model_requests_total", model="fake-model", outcome="server") == 1
    assert delta(before, after, "membridge_model_requests_total", model="fake-model", outcome="ok") == 2
    assert delta(before, after, "membridge_memory_search_seconds_count") == 1
    assert delta(before, after, "membridge_memory_searches_empty_total") == 1
    assert delta(before, after, "membridge_memory_search_results_bucket", le="0.0") == 1
    since = datetime.now().timestamp() - 3600
    assert services.usage.outcomes_since(since) == {"answered": 1, "refused": 0, "failed": 1, "deduplicated": 1}


@pytest.mark.parametrize("bot_settings", [{"context": {"max_turns": 1}}])
async def test_a_flush_and_a_dream_move_the_job_and_dream_metrics(metered_bot) -> None:
    telegram, llm, _services, base = metered_bot
    before = await scrape(base)
    assert value(before, "membridge_flush_jobs", state="pending") == 0
    await trim_a_turn(telegram, llm)

    async def flushed() -> bool:
        return delta(before, await scrape(base), "membridge_flush_jobs", state="done") >= 1

    await eventually(flushed, "the flush job to be done")
    llm.reply(DREAM_ANSWER)
    telegram.push_text(501, 501, "/memory dream")
    await telegram.wait_sent(3)
    after = await scrape(base)
    assert delta(before, after, "membridge_dream_runs_total", outcome="changed") == 1
    assert value(after, "membridge_flush_oldest_pending_age_seconds") == 0


async def test_readyz_says_which_check_fails_and_recovers_while_healthz_stays_alive(metered_bot) -> None:
    _telegram, _llm, services, base = metered_bot
    assert await probe(base, "/readyz") == (200, {"status": "ready", "checks": {
        "index": "ok", "flush_worker": "ok", "telegram": "ok"}})
    index = services.memory.db.path
    moved = index.with_name("index.db.away")
    index.rename(moved)
    status, body = await probe(base, "/readyz")
    assert status == 503 and body["status"] == "not ready"
    assert body["checks"]["index"].startswith(f"cannot open {index}")
    assert body["checks"]["telegram"] == "ok"
    assert await probe(base, "/healthz") == (200, {"status": "alive"})
    moved.rename(index)
    assert (await probe(base, "/readyz"))[0] == 200
    assert await probe(base, "/healthz") == (200, {"status": "alive"})
    assert (await probe(base, "/nothing"))[0] == 404


def test_the_index_is_counted_per_scope_kind_never_per_scope(tmp_path) -> None:
    from support.bot import make_services

    from bridge.ops.metrics import WorkspaceCollector, scope_kind

    assert [scope_kind(s) for s in ("telegram-42", "telegram-chat--100", "slack-T1-U2", "slack-channel-T1-C9",
                                    "terminal-alice", "global", "knowledge")] == [
        "telegram", "telegram-chat", "slack", "slack-channel", "terminal", "global", "knowledge"]
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1")
    for scope in ("telegram-1", "telegram-2", "telegram-chat--5"):
        services.memory.append_daily(scope, f"- a note of {scope}")
    services.memory.indexer.sync()
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in WorkspaceCollector(lambda: [services]).collect() for sample in family.samples}
    assert samples[("membridge_indexed_chunks", (("kind", "telegram"),))] == 2
    assert samples[("membridge_indexed_chunks", (("kind", "telegram-chat"),))] == 1
    assert samples[("membridge_indexed_vectors", (("kind", "telegram"),))] == 0  # embedding.provider: none
    assert not any("telegram-1" in str(labels) for _name, labels in samples)
    services.close()


async def test_a_refused_photo_is_counted_by_kind_and_reason(metered_bot) -> None:
    telegram, llm, _services, base = metered_bot
    before = await scrape(base)
    telegram.push_photo(501, 501, caption="what is this?")  # llm.vision is off
    [refusal] = await telegram.wait_sent(1)
    assert refusal["text"].startswith("Photos are off")
    after = await scrape(base)
    assert delta(before, after, "membridge_media_total", kind="photo", outcome="refused", reason="vision_off") == 1
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="answered") == 0
    assert llm.requests == []


@pytest.mark.parametrize("bot_settings", [{"llm__stream_usage": False}])
async def test_without_the_servers_usage_the_tokens_are_estimated_and_marked(metered_bot) -> None:
    from bridge.llm import estimate_usage

    services = metered_bot[2]
    before, after, request = await one_turn(metered_bot, "how are you?", "Fine, thanks")
    assert request["stream"] is True and "stream_options" not in request
    guess = estimate_usage(request["messages"], "Fine, thanks", [])
    assert guess.estimated and guess.prompt_tokens > 0
    assert delta(before, after, "membridge_model_tokens_total", model="fake-model", kind="prompt", estimated="true") == (
        guess.prompt_tokens)
    assert delta(before, after, "membridge_model_tokens_total", model="fake-model", kind="completion",
                 estimated="true") == guess.completion_tokens == 3
    [row] = services.usage.report(date.today(), date.today())
    assert row.estimated and row.tokens == guess.prompt_tokens + 3
