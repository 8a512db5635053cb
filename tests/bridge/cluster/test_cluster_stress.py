"""A randomized run of a whole cluster, for minutes: chat turns, tool writes, forgets, erases,
exports, dreams, and a worker cut off from Redis and healed, checked against two invariants:

- after a forget (or an erase) is answered, no byte of the forgotten text exists in any file under
  the cluster root (the shard workspaces) or Redis's data directory, and none appears later;
- every message is answered exactly once, in order per chat.

Skipped unless ``MEMBRIDGE_STRESS_MINUTES`` is set: ``scripts/stress [minutes]`` runs it (figures
of a run in bench/README.md "Cluster stress"). ``MEMBRIDGE_STRESS_SEED`` replays a run.
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import HANG_GUARD_S
from fakes.telegram_server import FakeTelegram
from support.cluster import Role, cluster_config, wait_all
from support.tcp_proxy import TcpProxy

from bridge.media.notes import SUMMARIZE
from bridge.wiring.worker import SUMMARY_PROMPT
from memory.consolidation.dream import DREAM_PROMPT

MINUTES = float(os.environ.get("MEMBRIDGE_STRESS_MINUTES", "0"))
pytestmark = [pytest.mark.stress, pytest.mark.skipif(not MINUTES, reason="set MEMBRIDGE_STRESS_MINUTES (scripts/stress)")]
SHARDS, CHATS, TTL = 4, 10, 2.0
DREAM_HEAD = DREAM_PROMPT.split("\n", 1)[0]


def last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def respond(body: dict[str, Any]) -> str | dict[str, Any]:
    """Turns answer ``re: <text>``; ``remember X`` first calls memory_write with X; a summary keeps
    every user line; a dream keeps every bullet it was shown."""
    messages = body["messages"]
    system = messages[0]["content"]
    if system == SUMMARY_PROMPT:
        said = [line.removeprefix("user: ") for line in messages[-1]["content"].splitlines() if line.startswith("user: ")]
        return "\n".join(f"- noted {text}" for text in said) or "NONE"
    if system.startswith(DREAM_HEAD):
        bullets = dict.fromkeys(line for line in messages[-1]["content"].splitlines() if line.startswith("- "))
        return "[MEMORY]\n" + "\n".join(list(bullets)[-40:]) + "\n[DREAM]\nA quiet night."
    if system == SUMMARIZE:
        return "a summary"
    text = last_user(body)
    if text.startswith("remember ") and messages[-1]["role"] == "user":
        return {"tool_calls": [("memory_write", {"text": text.removeprefix("remember ")})]}
    return "re: " + text


class Run:
    """The messages sent, what each chat must get back in order, and the texts that must be gone."""

    def __init__(self, telegram: FakeTelegram, roles: list[Role], folders: list[Path], rng: random.Random) -> None:
        self.telegram, self.roles, self.folders, self.rng = telegram, roles, folders, rng
        self.expected: dict[int, list[Callable[[str], bool]]] = {chat: [] for chat in self.chats}
        self.live: dict[int, list[str]] = {chat: [] for chat in self.chats}  # secrets a chat's scope holds
        self.gone: list[str] = []
        self.tally: Counter[str] = Counter()
        self._serial = 0

    @property
    def chats(self) -> range:
        return range(6000, 6000 + CHATS)

    def secret(self) -> str:
        self._serial += 1
        return f"sekrit{self._serial:05d}x{self.rng.randrange(16**6):06x}"

    def push(self, chat: int, text: str, expect: Callable[[str], bool]) -> None:
        self.expected[chat].append(expect)
        self.telegram.push_text(chat, chat, text)

    def turn(self, chat: int) -> None:
        secret = self.secret()
        self.live[chat].append(secret)
        if self.rng.random() < 0.3:
            text = f"remember {chat} likes {secret}"
            self.tally["tool_writes"] += 1
        else:
            text = f"my word of the day is {secret}"
        self.tally["turns"] += 1
        self.push(chat, text, lambda reply, text=text: reply == f"re: {text}")

    def sent(self, chat: int) -> list[str]:
        return [m["visible"] for m in self.telegram.sent if int(m["chat_id"]) == chat]

    async def settle(self) -> None:
        """Until every chat has as many answers as messages."""
        await wait_all(self.roles, lambda: all(len(self.sent(c)) >= len(self.expected[c]) for c in self.chats),
                       "every answer", timeout=HANG_GUARD_S * 3)

    def check_gone(self) -> None:
        """No file under the cluster root or Redis's data directory holds a forgotten text."""
        self.tally["checks"] += 1
        gone = [secret.encode() for secret in self.gone]
        for folder in self.folders:
            for path in folder.rglob("*"):
                if not path.is_file():
                    continue
                try:
                    data = path.read_bytes().lower()
                except FileNotFoundError:  # a temporary file renamed away meanwhile
                    continue
                self.tally["bytes_scanned"] += len(data)
                found = [secret.decode() for secret in gone if secret in data]
                assert not found, f"{path} holds forgotten text {found}"

    def check_export(self, data: bytes) -> None:
        """An export holds none of the texts forgotten before it (every member read, unpacked)."""
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = b"".join(archive.read(name) for name in archive.namelist()).lower()
        found = [secret for secret in self.gone if secret.encode() in unpacked]
        assert not found, f"an export holds forgotten text {found}"

    def check_answers(self) -> None:
        for chat in self.chats:
            sent = self.sent(chat)
            assert len(sent) == len(self.expected[chat]), f"chat {chat}: {len(sent)} answers to {len(self.expected[chat])}"
            for i, (reply, expect) in enumerate(zip(sent, self.expected[chat], strict=True)):
                assert expect(reply), f"chat {chat}, message {i}: unexpected answer {reply!r}"


async def one_round(run: Run, proxy: TcpProxy) -> None:
    rng = run.rng
    for chat in rng.sample(list(run.chats), rng.randint(3, CHATS)):
        for _ in range(rng.randint(1, 3)):
            run.turn(chat)
    if rng.random() < 0.25:  # a worker cut off from Redis while the round's turns run, then healed
        run.tally["cuts"] += 1
        proxy.cut()
        await asyncio.sleep(rng.uniform(TTL, 3 * TTL))  # how long the partition lasts: the test's own choice
        proxy.heal()
    await run.settle()
    chat = rng.choice(list(run.chats))
    action = rng.random()
    if action < 0.35 and run.live[chat]:
        secret = run.live[chat].pop(rng.randrange(len(run.live[chat])))
        run.push(chat, f"/memory forget! {secret}", lambda reply: reply.startswith(("Forgotten for good", "Nothing I")))
        run.gone.append(secret)
        run.tally["forgets"] += 1
    elif action < 0.45:
        run.push(chat, "/memory forget-me!", lambda reply: reply.startswith(("Done: everything", "I keep nothing")))
        run.gone += run.live[chat]
        run.live[chat] = []
        run.tally["erases"] += 1
    elif action < 0.65:
        run.push(chat, "/memory dream", lambda reply: bool(reply))
        run.tally["dreams"] += 1
    elif action < 0.8:
        run.push(chat, "/memory export", lambda reply: reply.startswith(("Here is everything", "I have nothing")))
        run.tally["exports"] += 1
        documents = len(run.telegram.documents)
        await run.settle()
        if run.sent(chat)[-1].startswith("Here is everything"):
            [*_, export] = await run.telegram.wait_documents(documents + 1)
            run.check_export(export["data"])
    await run.settle()
    run.check_gone()


@pytest.mark.timeout(0)
async def test_a_cluster_under_random_load_forgets_for_good_and_answers_once(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    seed = int(os.environ.get("MEMBRIDGE_STRESS_SEED", str(time.time_ns() % 10**6)))
    print(f"seed {seed}")
    fake_llm.responder = respond
    async with TcpProxy(redis_server.port) as proxy:
        common = {"llm_url": fake_llm.base_url, "telegram_url": fake_telegram.base_url, "shards": SHARDS,
                  "lease_ttl_s": TTL, "context": {"max_turns": 3}}
        direct = cluster_config(tmp_path, redis_url=redis_server.url, **common)
        cut_off = cluster_config(tmp_path, redis_url=proxy.url(), name="through-proxy.yaml", **common)
        roles = [await Role.start(direct, "worker", "worker-a"), await Role.start(cut_off, "worker", "worker-b"),
                 await Role.start(direct, "receiver", "receiver")]
        run = Run(fake_telegram, roles, [tmp_path / "cluster", redis_server.folder], random.Random(seed))
        started = time.monotonic()
        rounds = 0
        try:
            await roles[2].wait_line("holds the poller lease", timeout=120)
            while time.monotonic() - started < MINUTES * 60:
                await one_round(run, proxy)
                rounds += 1
            run.check_answers()
        finally:
            for role in roles:
                await role.stop()
    run.check_gone()
    said = [line for role in roles for line in role.lines]
    events = {what: sum(needle in line for line in said) for what, needle in (
        ("shards dropped by the deadline", "lease not renewed for"), ("turns abandoned to the next holder",
         "left to the shard's next holder"), ("pending taken over", "pending message(s)"),
        ("writes refused", "Fenced"), ("errors", "Traceback"))}
    elapsed = time.monotonic() - started
    print(f"stress: {elapsed / 60:.1f} min, seed {seed}, {rounds} rounds, {len(fake_telegram.sent)} answers, "
          f"{len(fake_llm.requests)} LLM requests, {dict(run.tally)}, "
          f"{len(fake_telegram.documents)} export zip(s), {len(run.gone)} forgotten texts; {events}")
