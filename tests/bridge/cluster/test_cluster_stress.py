"""A randomized run of a whole cluster, for minutes, checked against two invariants:

- after a forget (or an erase) is answered, no byte of the forgotten text exists in any file under
  the cluster root (the shard workspaces, kept media, export zips waiting in an outbox, read member
  by member) or Redis's data directory, and none appears later;
- every message is answered exactly once, in order per chat.

Each round, chats send messages carrying new secret words: plain text, ``remember …`` (the model
saves it with ``memory_write``), a photo whose bytes hold the word (the model "reads" it in its
description) or a document holding it, all kept (``media.keep``); now and then a chat asks for a
Deep Dream among the turns, worker B is cut off from Redis and healed, or redis-server is stopped
and started again on its data directory. Then one of: a forget, an erase, a dream, an export
imported into another workspace (it must come back byte for byte, and an erase there must leave
nothing), an erase undone by importing the chat's last export back into its shard, or a forget from
a second process (``membridge memory forget``) racing a turn's ``memory_write`` or a Deep Dream
that holds the text in its prompt.

Skipped unless ``MEMBRIDGE_STRESS_MINUTES`` is set: ``scripts/stress [minutes]`` runs it (figures
of a run in bench/README.md "Cluster stress"). ``MEMBRIDGE_STRESS_SEED`` replays a run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import FakeTelegram
from support.cli import membridge
from support.cluster import Role, cluster_config, wait_all
from support.redis_server import RedisServer
from support.stress import SECRET_RE, Ledger, same_export, secrets_in, zip_members
from support.tcp_proxy import TcpProxy

from bridge.cluster.keys import shard_of
from bridge.media.notes import SUMMARIZE
from bridge.media.photos import DESCRIBE
from bridge.wiring.worker import SUMMARY_PROMPT
from memory.consolidation.dream import DREAM_PROMPT

MINUTES = float(os.environ.get("MEMBRIDGE_STRESS_MINUTES", "0"))
pytestmark = [pytest.mark.stress, pytest.mark.skipif(not MINUTES, reason="set MEMBRIDGE_STRESS_MINUTES (scripts/stress)")]
SHARDS, CHATS, TTL = 4, 10, 2.0
DREAM_HEAD = DREAM_PROMPT.split("\n", 1)[0]
FORGOTTEN_MEANWHILE = "That message was forgotten while I was answering it"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"


def user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content if p["type"] == "text")


def last_user(body: dict[str, Any]) -> str:
    return next(user_text(m) for m in reversed(body["messages"]) if m["role"] == "user")


def photo_word(body: dict[str, Any]) -> str:
    """The secret word written in the photo the request carries (what a model would read off it)."""
    url = next(part["image_url"]["url"] for part in body["messages"][-1]["content"] if part["type"] == "image_url")
    found = SECRET_RE.search(base64.b64decode(url.split(",", 1)[1]))
    return found.group().decode() if found else "nothing legible"


def respond(body: dict[str, Any]) -> str | dict[str, Any]:
    """Turns answer ``re: <text>``; ``remember X`` first calls memory_write with X; a photo is "a sign
    reading <the word in it>"; a summary keeps every user line; a dream keeps every bullet it was shown."""
    messages = body["messages"]
    system = messages[0]["content"]
    if system == SUMMARY_PROMPT:
        said = [line.removeprefix("user: ") for line in messages[-1]["content"].splitlines() if line.startswith("user: ")]
        return "\n".join(f"- noted {text}" for text in said) or "NONE"
    if system.startswith(DREAM_HEAD):
        bullets = dict.fromkeys(line for line in messages[-1]["content"].splitlines() if line.startswith("- "))
        return "[MEMORY]\n" + "\n".join(list(bullets)[-40:]) + "\n[DREAM]\nA quiet night."
    if system == DESCRIBE:
        return f"a sign reading {photo_word(body)}"
    if system == SUMMARIZE:
        return "a summary"
    text = last_user(body)
    if text.startswith("remember ") and messages[-1]["role"] == "user":
        return {"tool_calls": [("memory_write", {"text": text.removeprefix("remember ")})]}
    return "re: " + text


class Deployment:
    """The running cluster and what a round does to it: messages, cuts, restarts, commands run from
    a second process against a shard's workspace."""

    def __init__(self, tmp_path: Path, redis_server: RedisServer, proxy: TcpProxy, llm: FakeOpenAI,
                 telegram: FakeTelegram, direct: Path, roles: list[Role], rng: random.Random) -> None:
        self.tmp_path, self.redis_server, self.proxy, self.llm, self.rng = tmp_path, redis_server, proxy, llm, rng
        self.config = yaml.safe_load(direct.read_text())
        self.ledger = Ledger(telegram, roles, range(6000, 6000 + CHATS))
        self.written: set[str] = set()  # secrets a memory_write put in daily memory
        self.photos: set[str] = set()  # secrets written in a photo
        self._serial = 0

    @property
    def telegram(self) -> FakeTelegram:
        return self.ledger.telegram

    @property
    def folders(self) -> list[Path]:
        """Where no forgotten text may be: the cluster root and Redis's data directory."""
        return [self.tmp_path / "cluster", self.redis_server.folder]

    def secret(self) -> str:
        self._serial += 1
        return f"sekrit{self._serial:05d}x{self.rng.randrange(16**6):06x}"

    # ------------------------------------------------------------ messages
    def turn(self, chat: int) -> None:
        """One message with a new secret: text, a tool write, a photo or a document (both kept)."""
        secret, kind = self.secret(), self.rng.choices(["text", "remember", "photo", "document"], [5, 3, 1, 1])[0]
        self.ledger.live[chat].append(secret)
        self.ledger.tally[kind] += 1
        if kind == "photo":
            photo = self.telegram.host_file(JPEG + f" {secret} ".encode())
            self.photos.add(secret)
            self.ledger.push(chat, {"photo": [{**photo, "width": 320, "height": 320}], "caption": "look at this"},
                             lambda reply: reply == f"re: [photo: a sign reading {secret}]\nlook at this")
        elif kind == "document":
            self.document(chat, secret)
        else:
            text = f"remember {chat} likes {secret}" if kind == "remember" else f"my word of the day is {secret}"
            self.written.update([secret] if kind == "remember" else [])
            self.ledger.push(chat, text, lambda reply: reply == f"re: {text}")

    def document(self, chat: int, secret: str) -> None:
        name = f"note-{self._serial}.md"
        data = self.telegram.host_file(f"# Note\n{chat} keeps {secret} in a drawer.\n".encode())
        fields: dict[str, object] = {"document": {**data, "file_name": name, "mime_type": "text/markdown"}}
        if self.rng.random() < 0.5:
            self.ledger.push(chat, {**fields, "caption": "file this"},
                             lambda reply: reply == f"re: [file {name}, saved to memory: a summary]\nfile this")
        else:
            self.ledger.push(chat, fields, lambda reply: reply.startswith(f"Saved {name} to your memory"))
        self.written.add(secret)

    def forgotten(self, secret: str) -> None:
        """A photo's bytes, as a data URL stored anywhere, must be gone too."""
        forms = [base64.b64encode(JPEG + f" {secret} ".encode())] if secret in self.photos else []
        self.ledger.forgotten(secret, *forms)

    # ------------------------------------------------------------ a second process
    def shard_config(self, chat: int) -> Path:
        """The cluster's config with the workspace of ``chat``'s shard, as an operator runs a command there."""
        shard = shard_of(f"telegram-{chat}", SHARDS)
        path = self.tmp_path / f"shard-{shard}.yaml"
        if not path.exists():
            path.write_text(yaml.safe_dump({**self.config, "workspace": str(self.tmp_path / "cluster" / "shards" / str(shard))}))
        return path

    def elsewhere_config(self, name: str) -> Path:
        """A single-process workspace of its own (no cluster), as in a move from the cluster to one process."""
        path = self.tmp_path / f"{name}.yaml"
        single = {key: value for key, value in self.config.items() if key != "cluster"}
        path.write_text(yaml.safe_dump({**single, "workspace": str(self.tmp_path / name)}))
        return path

    async def command(self, config: Path, *args: str) -> str:
        """``membridge <args>`` with ``config``; it must succeed."""
        code, out, err = await membridge(config, *args)
        assert code == 0 and "Traceback" not in err, f"membridge {' '.join(args)}: exit {code}\n{out}\n{err}"
        self.ledger.tally["commands"] += 1
        return out

    async def hold(self, predicate: Any, what: str) -> tuple[asyncio.Event, dict[str, Any]]:
        """The first LLM request for which ``predicate`` holds, kept unanswered until the event is set."""
        release = asyncio.Event()
        arrived = self.llm.hold_first(predicate, release)
        await wait_all(self.ledger.roles, arrived.is_set, what)
        return release, next(body for body in reversed(self.llm.requests) if predicate(body))

    async def race(self, chat: int, secret: str, release: asyncio.Event) -> None:
        """``membridge memory forget`` from another process, the held LLM request let go at a random
        moment of it: before it starts, while it removes, or after."""
        forget = asyncio.create_task(self.command(self.shard_config(chat), "memory", "forget", secret,
                                                  "--scope", f"telegram-{chat}"))
        await asyncio.sleep(self.rng.uniform(0, 3))  # where in the forget the release lands: the schedule's choice
        release.set()
        await forget
        self.forgotten(secret)


# ---------------------------------------------------------------- what a round does
async def disturb(run: Deployment) -> None:
    """While the round's turns run, now and then: worker B cut off from Redis for a while and healed,
    or redis-server stopped and started again on its data directory."""
    if run.rng.random() < 0.25:
        run.ledger.tally["cuts"] += 1
        run.proxy.cut()
        await asyncio.sleep(run.rng.uniform(TTL, 3 * TTL))  # how long the partition lasts: the schedule's choice
        run.proxy.heal()
    if run.rng.random() < 0.12:
        run.ledger.tally["redis_restarts"] += 1
        await run.redis_server.restart()


def dream(run: Deployment, chat: int) -> None:
    run.ledger.tally["dreams"] += 1
    run.ledger.push(chat, "/memory dream", lambda reply: reply.startswith(("MEMORY.md", "no daily memory")))


async def forget(run: Deployment, chat: int) -> None:
    if run.ledger.live[chat]:
        secret = run.rng.choice(run.ledger.live[chat])
        run.ledger.tally["forgets"] += 1
        run.ledger.push(chat, f"/memory forget! {secret}", lambda reply: reply.startswith(("Forgotten for good", "Nothing I")))
        run.forgotten(secret)


async def erase(run: Deployment, chat: int) -> None:
    run.ledger.tally["erases"] += 1
    run.ledger.push(chat, "/memory forget-me!", lambda reply: reply.startswith(("Done: everything", "I keep nothing")))
    for secret in list(run.ledger.live[chat]):
        run.forgotten(secret)


async def dream_now(run: Deployment, chat: int) -> None:
    dream(run, chat)


async def export(run: Deployment, chat: int) -> bytes | None:
    """``/memory export`` in the chat: the zip sent (None: nothing stored), holding no forgotten text."""
    documents = len(run.telegram.documents)
    run.ledger.push(chat, "/memory export", lambda reply: reply.startswith(("Here is everything", "I have nothing")))
    await run.ledger.settle()
    if not run.ledger.sent(chat)[-1].startswith("Here is everything"):
        return None
    [*_, sent] = await run.telegram.wait_documents(documents + 1)
    run.ledger.check_export(zip_members(sent["data"]))
    run.ledger.tally["exports"] += 1
    return bytes(sent["data"])


async def import_elsewhere(run: Deployment, chat: int) -> None:
    """The chat's export imported into a workspace of its own: an export from there is the same,
    member by member; an erase there leaves none of its texts in any file."""
    data = await export(run, chat)
    if data is None:
        return
    run.ledger.tally["imports elsewhere"] += 1
    name, scope = f"elsewhere-{run.ledger.tally['imports elsewhere']}", f"telegram-{chat}"
    config, zipped, again = run.elsewhere_config(name), run.tmp_path / f"{name}.zip", run.tmp_path / f"{name}-again.zip"
    zipped.write_bytes(data)
    await run.command(config, "memory", "import", str(zipped), "--scope", scope)
    await run.command(config, "memory", "export", "--scope", scope, "--out", str(again))
    differ = same_export(zip_members(data), zip_members(again.read_bytes()))
    assert not differ, f"chat {chat}: imported elsewhere and exported again, these differ: {differ}"
    await found_at_once(run, config, scope, zip_members(data))
    await run.command(config, "memory", "erase", "--scope", scope, "--yes")
    left = run.ledger.scan.holders([run.tmp_path / name], [s.encode() for s in secrets_in(zip_members(data))])
    assert not left, f"an erase after an import left {left[:10]}"
    shutil.rmtree(run.tmp_path / name)
    for path in (config, zipped, again):
        path.unlink()


async def found_at_once(run: Deployment, config: Path, scope: str, members: dict[str, bytes]) -> None:
    """A secret of an imported daily file is found by ``memory search`` right after the import."""
    daily = sorted(secrets_in({name: data for name, data in members.items() if name.startswith("memory/")}))
    if daily:
        secret = run.rng.choice(daily)
        hits = json.loads(await run.command(config, "memory", "search", secret, "--scope", scope, "--json"))
        assert any(secret in hit["text"] for hit in hits), f"{secret} imported into {scope} and not found: {hits}"
        run.ledger.tally["searches after an import"] += 1


async def erase_and_restore(run: Deployment, chat: int) -> None:
    """An erase an operator undoes: the chat's last export imported back into its shard while the
    workers run. The next export is the same as the one before the erase."""
    data = await export(run, chat)
    await erase(run, chat)
    await run.ledger.settle()
    run.ledger.check_gone(run.folders)
    if data is None:
        return
    run.ledger.tally["restores"] += 1
    zipped = run.tmp_path / "restore.zip"
    zipped.write_bytes(data)
    await run.command(run.shard_config(chat), "memory", "import", str(zipped), "--scope", f"telegram-{chat}")
    zipped.unlink()
    members = zip_members(data)
    restored = sorted(secrets_in(members))
    run.ledger.restored(restored)
    run.ledger.live[chat] = restored
    again = await export(run, chat)
    assert again is not None, f"chat {chat}: nothing to export after the import"
    differ = same_export(members, zip_members(again))
    assert not differ, f"chat {chat}: exported, erased, imported back and exported again, these differ: {differ}"


async def forget_racing_a_tool_write(run: Deployment, chat: int) -> None:
    """``remember X`` held at the model, then a forget of X from another process races its memory_write."""
    secret = run.secret()
    text = f"remember {chat} likes {secret}"
    run.ledger.live[chat].append(secret)
    run.written.add(secret)
    run.ledger.push(chat, text, lambda reply: reply == f"re: {text}" or reply.startswith(FORGOTTEN_MEANWHILE))
    release, _body = await run.hold(
        lambda body: body["messages"][-1]["role"] == "user" and user_text(body["messages"][-1]) == text,
        "the turn's request to the model")
    run.ledger.tally["forgets racing a tool write"] += 1
    await run.race(chat, secret, release)


async def forget_racing_a_dream(run: Deployment, chat: int) -> None:
    """A Deep Dream held at the model with a secret in its prompt; a forget of it from another process races it."""
    saved = [secret for secret in run.ledger.live[chat] if secret in run.written]
    if not saved:
        return await dream_now(run, chat)
    run.ledger.tally["forgets racing a dream"] += 1
    dream(run, chat)
    release, body = await run.hold(
        lambda body: body["messages"][0]["content"].startswith(DREAM_HEAD)
        and any(secret in body["messages"][-1]["content"] for secret in saved), "the Deep Dream's request")
    await run.race(chat, run.rng.choice([s for s in saved if s in body["messages"][-1]["content"]]), release)


async def nothing(run: Deployment, chat: int) -> None:
    pass


ACTIONS = {forget: 25, erase: 7, dream_now: 8, import_elsewhere: 12, erase_and_restore: 8,
           forget_racing_a_tool_write: 15, forget_racing_a_dream: 12, nothing: 13}


async def one_round(run: Deployment) -> None:
    rng, ledger = run.rng, run.ledger
    chats = rng.sample(list(ledger.chats), rng.randint(3, CHATS))
    dreamer = rng.choice(chats) if rng.random() < 0.3 else None  # a Deep Dream among the turns
    for chat in chats:
        for _ in range(rng.randint(1, 3)):
            run.turn(chat)
        if chat == dreamer:
            dream(run, chat)
    await disturb(run)
    await ledger.settle()
    [action] = rng.choices(list(ACTIONS), list(ACTIONS.values()))
    await action(run, rng.choice(list(ledger.chats)))
    await ledger.settle()
    ledger.check_answers()
    ledger.check_gone(run.folders)


@pytest.mark.timeout(0)
async def test_a_cluster_under_random_load_forgets_for_good_and_answers_once(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    seed = int(os.environ.get("MEMBRIDGE_STRESS_SEED", str(time.time_ns() % 10**6)))
    print(f"seed {seed}, load average {os.getloadavg()}")
    fake_llm.responder = respond
    async with TcpProxy(redis_server.port) as proxy:
        common = {"llm_url": fake_llm.base_url, "telegram_url": fake_telegram.base_url, "shards": SHARDS,
                  "lease_ttl_s": TTL, "context": {"max_turns": 3}, "llm": {"vision": True}, "media": {"keep": True}}
        direct = cluster_config(tmp_path, redis_url=redis_server.url, **common)
        cut_off = cluster_config(tmp_path, redis_url=proxy.url(), name="through-proxy.yaml", **common)
        roles = [await Role.start(direct, "worker", "worker-a"), await Role.start(cut_off, "worker", "worker-b"),
                 await Role.start(direct, "receiver", "receiver")]
        run = Deployment(tmp_path, redis_server, proxy, fake_llm, fake_telegram, direct, roles, random.Random(seed))
        started = time.monotonic()
        rounds = 0
        try:
            await roles[2].wait_line("holds the poller lease", timeout=120)
            while time.monotonic() - started < MINUTES * 60:
                await one_round(run)
                rounds += 1
        except BaseException:
            print(f"stress FAILED in round {rounds + 1}, seed {seed}: rerun with MEMBRIDGE_STRESS_SEED={seed}; "
                  f"the roles' logs are in {tmp_path}/*.log")
            raise
        finally:
            for role in roles:
                await role.stop()
                (tmp_path / f"{role.name}.log").write_text("\n".join(role.lines))
    run.ledger.check_gone(run.folders)
    report(run, rounds, seed, time.monotonic() - started)


def report(run: Deployment, rounds: int, seed: int, elapsed: float) -> None:
    said = [line for role in run.ledger.roles for line in role.lines]
    events = {what: sum(needle in line for line in said) for what, needle in (
        ("shards dropped by the deadline", "lease not renewed for"), ("turns abandoned to the next holder",
         "left to the shard's next holder"), ("pending taken over", "pending message(s)"),
        ("writes refused", "Fenced"), ("messages held while Redis was away", "Redis is back"),
        ("errors", "Traceback"))}
    answers = [m["visible"] for m in run.telegram.sent]
    kept = sum(1 for path in (run.tmp_path / "cluster").glob("shards/*/scopes/*/media/*") if path.is_file())
    print(f"stress: {elapsed / 60:.1f} min, seed {seed}, {rounds} rounds, {len(answers)} answers, "
          f"{len(run.llm.requests)} LLM requests, {dict(run.ledger.tally)}, "
          f"{sum(a.startswith('MEMORY.md updated') for a in answers)} dreams that changed MEMORY.md, "
          f"{sum(a.startswith(FORGOTTEN_MEANWHILE) for a in answers)} answers dropped for a forget, "
          f"{len(run.telegram.documents)} export zip(s), {len(run.ledger.gone)} forgotten texts, {kept} kept media files "
          f"left at the end, "
          f"{run.ledger.scan.bytes_read / 1e6:.0f} MB read back; {events}; load average {os.getloadavg()}")
