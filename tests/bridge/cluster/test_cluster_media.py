"""A photo or a document whose turn a killed worker left unfinished is answered once by the shard's
next holder, from what the first delivery stored (the model's description of it is not asked again,
and the document's note is saved once)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from fakes import HANG_GUARD_S
from support.cluster import Role, cluster_config, wait_all

from bridge.cluster.keys import Keys, shard_of
from bridge.media.notes import SUMMARIZE
from bridge.media.photos import DESCRIBE
from bridge.scopes import scope_for
from channels import IncomingMessage

pytestmark = pytest.mark.slow
SHARDS = 2
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content if p["type"] == "text")


def last_user(body: dict[str, Any]) -> str:
    return user_text([m for m in body["messages"] if m["role"] == "user"][-1])


def system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def responder() -> Any:
    """Each description differs from the one before, and each document summary (as a model's do).
    Each kind counts on its own: the photo's first description is look 1 whichever chat's media
    reaches the model first, so a "look 2" can only be the photo described again."""
    looks, takes = itertools.count(1), itertools.count(1)

    def respond(body: dict[str, Any]) -> str:
        if system(body) == DESCRIBE:
            return f"a red bicycle, look {next(looks)}"
        if system(body) == SUMMARIZE:
            return f"a gardening plan, take {next(takes)}"
        return "re: " + last_user(body)
    return respond


def asked_in_order(fake_llm: Any, first: str, then: str) -> asyncio.Task[None]:
    """The model's first request with system prompt ``then`` is held until one with ``first`` has
    arrived: the two chats' media reach the model in that order (they are prepared in parallel)."""
    arrived = asyncio.Event()
    fake_llm.hold_first(lambda body: system(body) == then, release=arrived)

    async def release() -> None:
        await fake_llm.wait_for_chat(lambda body: system(body) == first)
        arrived.set()
    return asyncio.create_task(release())


def chats_in_one_shard() -> tuple[int, int]:
    by_shard: dict[int, list[int]] = {}
    for chat in range(9000, 9100):
        message = IncomingMessage(channel="telegram", chat_id=str(chat), chat_type="direct", user_id=str(chat),
                                  user_name="u", text="", message_id="1")
        by_shard.setdefault(shard_of(scope_for(message), SHARDS), []).append(chat)
        if len(by_shard[shard_of(scope_for(message), SHARDS)]) == 2:
            first, second = by_shard[shard_of(scope_for(message), SHARDS)]
            return first, second
    raise AssertionError("no two chats in one shard")


def notes(root: Path, chat: int) -> list[str]:
    return [line for path in sorted(root.glob(f"shards/*/scopes/telegram-{chat}/memory/*.md"))
            for line in path.read_text(encoding="utf-8").splitlines() if "File: plan.md" in line]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("first, then", [(DESCRIBE, SUMMARIZE), (SUMMARIZE, DESCRIBE)],
                         ids=["photo-described-first", "document-summarised-first"])
async def test_a_photo_and_a_document_redelivered_after_a_kill_are_answered_once(
        tmp_path, redis_server, redis, fake_llm, fake_telegram, first, then) -> None:
    fake_llm.responder = responder()
    ordering = asked_in_order(fake_llm, first, then)
    photo_chat, file_chat = chats_in_one_shard()
    photo_held = fake_llm.hold_first(lambda body: system(body) not in (DESCRIBE, SUMMARIZE)
                                     and "[photo:" in last_user(body))
    file_held = fake_llm.hold_first(lambda body: system(body) not in (DESCRIBE, SUMMARIZE)
                                    and "[file plan.md" in last_user(body))
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=2.0,
                            llm={"vision": True})
    workers = [await Role.start(config, "worker", f"worker{i}") for i in range(2)]
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [*workers, receiver]
    sent = lambda chat: [m["visible"] for m in fake_telegram.sent if int(m["chat_id"]) == chat]  # noqa: E731
    try:
        await wait_all(roles, lambda: all(len(w.shards) == 1 for w in workers), "one shard each", timeout=120)
        await receiver.wait_line("holds the poller lease")
        fake_telegram.push_message(photo_chat, photo_chat, {
            "photo": [{**fake_telegram.host_file(PNG), "width": 320, "height": 320}], "caption": "what is this?"})
        fake_telegram.push_message(file_chat, file_chat, {
            "document": {**fake_telegram.host_file(b"# Plan\nSow beans in May.\n"), "file_name": "plan.md",
                         "mime_type": "text/markdown"}, "caption": "keep this please"})
        await asyncio.wait_for(asyncio.gather(photo_held.wait(), file_held.wait()), HANG_GUARD_S)
        shard = shard_of(f"telegram-{photo_chat}", SHARDS)
        holder = await redis.get(Keys("membridge").lease(shard))
        victim = next(worker for worker in workers if worker.worker_id == holder)
        victim.kill()
        survivor = next(worker for worker in workers if worker is not victim)
        await wait_all(roles, lambda: sent(photo_chat) and sent(file_chat), "both answers after the kill")
        fake_telegram.push_text(photo_chat, photo_chat, "thanks")
        fake_telegram.push_text(file_chat, file_chat, "thanks")
        await wait_all(roles, lambda: len(sent(photo_chat)) == 2 and len(sent(file_chat)) == 2, "the next answers")
        assert survivor.shards == {0, 1}
    finally:
        ordering.cancel()
        for role in roles:
            await role.stop()
    assert [system(body) for body in fake_llm.requests].count(DESCRIBE) == 1
    assert [system(body) for body in fake_llm.requests].count(SUMMARIZE) == 1
    assert sent(photo_chat) == ["re: [photo: a red bicycle, look 1]\nwhat is this?", "re: thanks"]
    [file_answer, _thanks] = sent(file_chat)
    assert file_answer.startswith("re: [file plan.md, saved to memory: a gardening plan, take 1")
    assert file_answer.endswith("keep this please")
    assert len(notes(tmp_path / "cluster", file_chat)) == 1


@pytest.mark.timeout(300)
async def test_a_captionless_document_redelivered_after_a_kill_between_its_note_and_its_reply_is_saved_once(
        tmp_path, redis_server, redis, fake_llm, fake_telegram) -> None:
    """No turn follows a document without a caption: its note is saved, then "Saved …" is sent. A
    worker killed in between (its reply held up by flood control) leaves the entry pending; the
    next holder reads the document again and must not save a second note."""
    fake_llm.responder = responder()
    chat, _other = chats_in_one_shard()
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=2.0)
    workers = [await Role.start(config, "worker", f"worker{i}") for i in range(2)]
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [*workers, receiver]
    sent = lambda: [m["visible"] for m in fake_telegram.sent if int(m["chat_id"]) == chat]  # noqa: E731
    try:
        await wait_all(roles, lambda: all(len(w.shards) == 1 for w in workers), "one shard each", timeout=120)
        await receiver.wait_line("holds the poller lease")
        fake_telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 120", retry_after=120)
        fake_telegram.push_message(chat, chat, {
            "document": {**fake_telegram.host_file(b"# Plan\nSow beans in May.\n"), "file_name": "plan.md",
                         "mime_type": "text/markdown"}})
        await fake_telegram.wait_until(lambda: any(method == "sendMessage" for method, _ in fake_telegram.calls),
                                       what="the reply tried (the note is saved before it)")
        assert len(notes(tmp_path / "cluster", chat)) == 1
        holder = await redis.get(Keys("membridge").lease(shard_of(f"telegram-{chat}", SHARDS)))
        victim = next(worker for worker in workers if worker.worker_id == holder)
        victim.kill()
        await wait_all(roles, lambda: bool(sent()), "the reply after the kill")
    finally:
        for role in roles:
            await role.stop()
    [reply] = sent()
    assert reply.startswith("Saved plan.md to your memory")
    assert len(notes(tmp_path / "cluster", chat)) == 1
