"""No cross-scope leak: what Alice says in her DM never reaches a request made for Bob."""

from __future__ import annotations

import json

from support.bot import dm, group, is_summary_request

SECRET = "the vault code is 4417-ZEBRA"


async def test_a_secret_told_in_a_dm_never_reaches_another_users_requests(running, fake_llm) -> None:
    bridge, channel = await running(context={"max_turns": 2})

    def respond(request):
        last = request["messages"][-1]
        if is_summary_request(request):
            return "- Alice: " + SECRET
        if last["role"] == "user" and last["content"].startswith("please remember"):
            return {"tool_calls": [("memory_write", {"text": SECRET})]}
        if last["role"] == "user" and "vault" in last["content"]:
            return {"tool_calls": [("memory_search", {"query": "vault code"}),
                                   ("memory_get", {"path": "memory/../../telegram-1/MEMORY.md"}),
                                   ("memory_get", {"path": "../telegram-1/MEMORY.md"})]}
        return "ok"

    fake_llm.responder = respond
    await channel.push(dm("please remember: " + SECRET, user="1"))
    for i in range(3):
        await channel.push(dm(f"chatter {i}", user="1"))
    await channel.wait_sent(4)
    await bridge.services.flush_worker.drain()
    memory_file = bridge.services.dreamer.memory_file
    memory_file.write("telegram-1", f"- {SECRET}\n".encode(), "test")
    alice_requests = len(fake_llm.requests)

    await channel.push(dm("what is the vault code?", user="2"))
    await channel.push(group("what is the vault code?", chat="-500", user="1"))
    await channel.wait_sent(6)
    bob_and_group = fake_llm.requests[alice_requests:]
    assert bob_and_group, "Bob's turn never reached the LLM"
    for request in bob_and_group:
        assert "4417" not in json.dumps(request, ensure_ascii=False)
    assert any("4417" in json.dumps(r) for r in fake_llm.requests[:alice_requests])


def test_secrets_are_redacted_from_every_log_record(capsys) -> None:
    import logging

    from bridge.logs import setup_logging

    token = "123456:ABC-very-secret-bot-token"
    setup_logging(True, [token, "sk-live-key-abcdef"])
    try:
        logging.getLogger("httpx").info("HTTP Request: POST https://api.telegram.org/bot%s/getUpdates", token)
        try:
            raise RuntimeError(f"auth failed for sk-live-key-abcdef at /bot{token}/")
        except RuntimeError:
            logging.getLogger("bridge").exception("request failed")
    finally:
        setup_logging(False)
    err = capsys.readouterr().err
    assert "getUpdates" in err and "request failed" in err
    assert token not in err and "sk-live-key-abcdef" not in err and err.count("***") >= 3
