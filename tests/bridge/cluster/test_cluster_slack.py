"""Slack's Events API through a receiver process to a worker process, answers posted by the worker."""

from __future__ import annotations

import json

import aiohttp
import pytest
from fakes.openai_server import FakeOpenAI
from fakes.slack_server import BOT_TOKEN, TEAM_ID, FakeSlack, event_callback, sign
from support.cluster import Role, cluster_config, wait_all
from support.ports import free_port

pytestmark = pytest.mark.slow
SECRET = "cluster-secret"


def dm_event(text: str, ts: str) -> dict[str, object]:
    return {"type": "message", "channel": "D0ALICE", "channel_type": "im", "user": "U0ALICE", "text": text,
            "ts": ts, "team": TEAM_ID}


async def post_event(port: int, event: dict[str, object]) -> int:
    body = json.dumps(event_callback(event)).encode()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{port}/slack/events", data=body,
                                headers=sign(body, SECRET)) as response:
            return response.status


@pytest.mark.timeout(300)
async def test_slack_events_are_answered_in_order_by_a_worker_and_a_retry_is_dropped(
        tmp_path, redis_server) -> None:
    port = free_port()
    async with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.ims["D0ALICE"] = "U0ALICE"
        llm.responder = lambda body: "re: " + body["messages"][-1]["content"]
        config = cluster_config(
            tmp_path, redis_url=redis_server.url, llm_url=llm.base_url, telegram_url="http://127.0.0.1:9/bot",
            shards=2, channels={"telegram": {"enabled": False},
                                "slack": {"enabled": True, "bot_token": BOT_TOKEN, "signing_secret": SECRET,
                                          "api_url": slack.api_url, "port": port}})
        worker = await Role.start(config, "worker", "worker")
        receiver = await Role.start(config, "receiver", "receiver")
        roles = [worker, receiver]
        try:
            await worker.wait_for(lambda: len(worker.shards) == 2, "both shards", timeout=120)
            await receiver.wait_line("Events API at")
            for n in range(5):
                assert await post_event(port, dm_event(f"note {n}", f"1700000100.00000{n}")) == 200
            assert await post_event(port, dm_event("note 0", "1700000100.000000")) == 200  # Slack's retry
            await wait_all(roles, lambda: len(slack.posted) >= 5, "five answers", timeout=120)
        finally:
            for role in roles:
                assert await role.stop() == 0, role.log()
    assert [(post["channel"], post["text"]) for post in slack.posted] == [
        ("D0ALICE", f"re: note {n}") for n in range(5)]
