"""Two stateless receivers serving Telegram's webhook: a delivery retried to the other is answered once."""

from __future__ import annotations

import pytest
from fakes.telegram_server import TOKEN, FakeTelegram
from support.cluster import Role, cluster_config, wait_all
from support.ports import free_port

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
async def test_two_webhook_receivers_share_the_load_and_drop_a_redelivery(
        tmp_path, redis_server, fake_llm, fake_telegram: FakeTelegram) -> None:
    fake_llm.responder = lambda body: "re: " + body["messages"][-1]["content"]
    ports = [free_port(), free_port()]
    configs = [cluster_config(
        tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url, telegram_url=fake_telegram.base_url,
        shards=2, name=f"receiver{n}.yaml",
        channels={"telegram": {"enabled": True, "token": TOKEN, "base_url": fake_telegram.base_url, "mode": "webhook",
                               "webhook_url": f"http://127.0.0.1:{port}/hook", "webhook_port": port,
                               "secret_token": "s3cret"}}) for n, port in enumerate(ports)]
    worker = await Role.start(configs[0], "worker", "worker")
    receivers = [await Role.start(config, "receiver", f"receiver{n}") for n, config in enumerate(configs)]
    roles = [worker, *receivers]
    try:
        await worker.wait_for(lambda: len(worker.shards) == 2, "both shards", timeout=120)
        for receiver in receivers:
            await receiver.wait_line("telegram: @membridge_bot (webhook)")
        updates = [fake_telegram.text_update(77, 77, f"hook {n}") for n in range(5)]

        async def post(update: dict[str, object], port: int, answers: int) -> None:
            assert await fake_telegram.post_webhook(f"http://127.0.0.1:{port}/hook", update, secret="s3cret") == 200
            await wait_all(roles, lambda: len(fake_telegram.sent) >= answers, f"{answers} answer(s)", timeout=120)

        for n in range(4):  # a load balancer alternating between the two
            await post(updates[n], ports[n % 2], n + 1)
        # Telegram retries the first delivery, and this time the balancer picks the other receiver;
        # the chat's next message is answered right after it, so an answer to the retry would show.
        assert await fake_telegram.post_webhook(f"http://127.0.0.1:{ports[1]}/hook", updates[0],
                                                secret="s3cret") == 200
        await post(updates[4], ports[0], 5)
    finally:
        for role in roles:
            assert await role.stop() == 0, role.log()
    assert [sent["visible"] for sent in fake_telegram.sent] == [f"re: hook {n}" for n in range(5)]
    assert any("duplicate delivery telegram::77:" in line for line in receivers[1].lines)
