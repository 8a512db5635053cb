"""The agent turn end to end: real SQLite, real openai client, fake OpenAI server on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from support.bot import dm, group, is_summary_request, make_services, system_prompt

from bridge.conversation import session_key
from memory import Turn

ANN = session_key("telegram-42", "telegram::42:")  # Ann's DM: one session per chat and scope


@pytest.fixture
async def services(tmp_path, fake_llm):
    made = make_services(tmp_path / "ws", fake_llm.base_url)
    yield made
    await made.aclose()


def memory_file(services, scope: str, text: str) -> None:
    path = services.workspace.memory_file(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_a_turn_answers_and_stores_both_messages(services, fake_llm) -> None:
    fake_llm.reply("Hello Ann!")
    reply = await services.agent.handle(dm("hi"))
    assert reply.text == "Hello Ann!"
    stored = services.conversations.load_messages(ANN, 5)
    assert stored == [Turn("user", "hi"), Turn("assistant", "Hello Ann!")]
    assert fake_llm.requests[0]["stream"] is True and fake_llm.requests[0]["model"] == "fake-model"


async def test_prompt_has_own_memory_and_never_anothers(services, fake_llm) -> None:
    memory_file(services, "telegram-42", "- Ann's cat is called Miso\n")
    memory_file(services, "telegram-7", "- Bob's bank PIN is 9911\n")
    await services.agent.handle(dm("what is my cat called?"))
    await services.agent.handle(group("hello group"))
    own, grp = system_prompt(fake_llm.requests[0]), system_prompt(fake_llm.requests[1])
    assert "Miso" in own and "9911" not in own
    assert "Miso" not in grp and "9911" not in grp


async def test_memory_md_edits_show_up_on_the_next_turn(services, fake_llm) -> None:
    await services.agent.handle(dm("one"))
    memory_file(services, "telegram-42", "- prefers tea over coffee\n")
    await services.agent.handle(dm("two"))
    assert "prefers tea" not in system_prompt(fake_llm.requests[0])
    assert "prefers tea" in system_prompt(fake_llm.requests[1])


async def test_path_traversal_in_memory_get_is_an_error_the_model_sees(services, fake_llm) -> None:
    fake_llm.tool_call("memory_get", {"path": "../../etc/passwd"})
    fake_llm.reply("I can't read that.")
    reply = await services.agent.handle(dm("read /etc/passwd"))
    assert reply.text == "I can't read that."
    tool_message = fake_llm.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"].startswith("error:")
    assert "root:" not in tool_message["content"]


async def test_bad_tool_json_and_unknown_tools_are_reported_to_the_model(services, fake_llm) -> None:
    fake_llm.tool_call("memory_search", '{"query": "tea"')
    fake_llm.tool_call("launch_rockets", {})
    fake_llm.reply("done")
    assert (await services.agent.handle(dm("search"))).text == "done"
    first = fake_llm.requests[1]["messages"][-1]["content"]
    second = fake_llm.requests[2]["messages"][-1]["content"]
    assert first.startswith("error: the arguments are not valid JSON")
    assert second.startswith("error: unknown tool 'launch_rockets'")


async def test_memory_tools_search_and_write_in_the_turns_scope(services, fake_llm) -> None:
    memory_file(services, "telegram-42", "- Ann's sister lives in Porto\n")
    memory_file(services, "telegram-7", "- Bob's sister lives in Porto too\n")
    fake_llm.tool_call("memory_search", {"query": "Porto"})
    fake_llm.tool_call("memory_write", {"text": "Ann visits Porto on 2026-12-20"})
    fake_llm.reply("noted")
    await services.agent.handle(dm("where does my sister live?"))
    search_output = json.loads(fake_llm.requests[1]["messages"][-1]["content"])
    assert [r["path"] for r in search_output["results"]] == ["MEMORY.md"]
    assert "Ann's sister" in search_output["results"][0]["text"]
    daily = services.workspace.daily_file("telegram-42", datetime.now().strftime("%Y-%m-%d"))
    assert daily.read_text(encoding="utf-8") == "- Ann visits Porto on 2026-12-20\n"


async def test_a_429_then_200_still_answers(services, fake_llm) -> None:
    fake_llm.fail(429, retry_after=0.05)
    fake_llm.reply("after the rate limit")
    assert (await services.agent.handle(dm("hi"))).text == "after the rate limit"
    assert len(fake_llm.requests) == 2


async def test_an_llm_failure_gives_a_clear_reply_and_loses_nothing(services, fake_llm) -> None:
    fake_llm.fail(500, times=3)
    reply = await services.agent.handle(dm("remember my flight is at 9"))
    assert "language model" in reply.text and "saved" in reply.text
    assert services.conversations.load_messages(ANN, 5) == [Turn("user", "remember my flight is at 9")]
    fake_llm.reply("ok, 9 it is")
    await services.agent.handle(dm("did you get that?"))
    contents = [m["content"] for m in fake_llm.requests[-1]["messages"]]
    assert "remember my flight is at 9" in contents


async def test_a_wrong_key_is_explained_without_leaking_it(tmp_path, fake_llm) -> None:
    from support.bot import make_config

    from bridge.wiring.app import Services

    config = make_config(tmp_path / "ws", fake_llm.base_url)
    config.llm.api_key = "sk-secretsecretsecret"
    services = Services(config)
    reply = await services.agent.handle(dm("hi"))
    assert "credentials" in reply.text and "sk-secret" not in reply.text
    await services.aclose()


async def test_max_steps_bounds_the_tool_loop(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, agent={"max_steps": 3})
    fake_llm.responder = lambda request: {"tool_calls": [("memory_search", {"query": "x"})]}
    reply = await services.agent.handle(dm("loop forever"))
    assert len(fake_llm.requests) == 3 and "couldn't finish" in reply.text
    await services.aclose()


async def test_21_turns_over_max_turns_20_flush_a_summary_to_daily_memory(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 20})
    fake_llm.responder = lambda r: "- Ann planned a trip to Osaka on 2026-12-20" if is_summary_request(r) else "ok"
    for i in range(21):
        await services.agent.handle(dm(f"message {i}: I'm planning Osaka"))
    await services.flush_worker.drain()
    daily = services.workspace.daily_file("telegram-42", datetime.now().strftime("%Y-%m-%d"))
    text = daily.read_text(encoding="utf-8")
    assert text.count("- Ann planned a trip to Osaka on 2026-12-20") == 1
    assert "<!-- flush:1 -->" in text
    summary_requests = [r for r in fake_llm.requests if is_summary_request(r)]
    assert len(summary_requests) == 1 and "message 0:" in summary_requests[0]["messages"][1]["content"]
    assert services.conversations.pending_jobs() == []
    history = services.conversations.load_messages(ANN, 100)
    assert history[0].text == "message 11: I'm planning Osaka" and len(history) == 20
    fake_llm.reply("still here")
    await services.agent.handle(dm("next"))
    head = fake_llm.requests[-1]["messages"][1]
    assert head["role"] == "system" and "Osaka on 2026-12-20" in head["content"]
    await services.aclose()


async def test_the_nothing_worth_keeping_sentinel_writes_nothing(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 2})
    fake_llm.responder = lambda r: "NONE" if is_summary_request(r) else "ok"
    for i in range(3):
        await services.agent.handle(dm(f"small talk {i}"))
    await services.flush_worker.drain()
    assert not services.workspace.daily_dir("telegram-42").exists()
    assert services.conversations.pending_jobs() == []
    await services.aclose()


async def test_summariser_failure_falls_back_to_rules(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 2},
                             llm={"base_url": fake_llm.base_url, "api_key": "test-key", "max_retries": 0})

    def respond(request):
        if is_summary_request(request):
            raise RuntimeError("boom")  # the fake answers 500
        return "ok"

    fake_llm.responder = respond
    for i in range(3):
        await services.agent.handle(dm(f"my locker number is {100 + i}"))
    await services.flush_worker.drain()
    daily = services.workspace.daily_file("telegram-42", datetime.now().strftime("%Y-%m-%d"))
    assert "- user said: my locker number is 100" in daily.read_text(encoding="utf-8")
    await services.aclose()


async def test_context_overflow_records_a_job_trims_and_retries(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, context={"max_turns": 50})
    for i in range(4):
        fake_llm.reply(f"answer {i}")
        await services.agent.handle(dm(f"turn {i}"))
    fake_llm.fail(400)  # context_length_exceeded
    fake_llm.reply("answered after trimming")
    reply = await services.agent.handle(dm("one more"))
    assert reply.text == "answered after trimming"
    jobs = services.memory.db.query("SELECT reason, seq_from, seq_to FROM jobs")
    assert [tuple(j) for j in jobs] == [("overflow", 1, 4)]
    retried = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert "turn 0" not in retried and "one more" in retried
    await services.aclose()


async def test_knowledge_write_is_refused_for_non_admins_and_allowed_for_admins(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url, admins=["telegram:1"])
    fake_llm.tool_call("knowledge_write", {"page": "ops/runbook", "content": "# Runbook\nrestart it"})
    fake_llm.reply("done")
    await services.agent.handle(dm("write the runbook", user="42"))
    assert fake_llm.requests[1]["messages"][-1]["content"].startswith("error: knowledge_write is only available to admins")
    assert "knowledge_write" not in [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
    fake_llm.tool_call("knowledge_write", {"page": "ops/runbook", "content": "# Runbook\nrestart it"})
    fake_llm.reply("done")
    await services.agent.handle(dm("write the runbook", user="1"))
    assert fake_llm.requests[3]["messages"][-1]["content"] == "saved knowledge/ops/runbook.md"
    fake_llm.tool_call("knowledge_search", {"query": "restart"})
    fake_llm.reply("found")
    await services.agent.handle(dm("how do I restart?", user="42"))
    found = json.loads(fake_llm.requests[5]["messages"][-1]["content"])
    assert [r["path"] for r in found["results"]] == ["knowledge/ops/runbook.md"]
    await services.aclose()
