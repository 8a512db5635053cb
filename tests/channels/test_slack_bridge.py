"""Slack through the whole bot: signed events in, real agent and memory, answers posted back."""

from __future__ import annotations

import io
import json
import urllib.parse
import zipfile
from datetime import datetime
from typing import Any

import aiohttp
import pytest
from fakes.openai_server import FakeOpenAI
from fakes.slack_server import BOT_TOKEN, TEAM_ID, FakeSlack, event_callback, sign, slash_command
from support.bot import make_services
from support.documents import tiny_pdf

from bridge.media.notes import SUMMARIZE
from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge
from channels.slack import SlackChannel

SECRET = "bridge-secret"


@pytest.fixture
async def world(tmp_path):
    async with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.ims["D0ALICE"] = "U0ALICE"  # the bot's own DM with Alice
        services = make_services(tmp_path / "ws", llm.base_url)
        channel = SlackChannel(bot_token=BOT_TOKEN, signing_secret=SECRET, api_url=slack.api_url, port=0)
        bridge = Bridge(services, [channel], build_plugins(services))
        await bridge.start(timer=False)
        yield slack, llm, channel, services
        await bridge.shutdown()


async def post_event(channel: SlackChannel, event: dict[str, Any]) -> int:
    body = json.dumps(event_callback(event)).encode()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{channel.http_port}/slack/events", data=body,
                                headers=sign(body, SECRET)) as response:
            return response.status


def dm_event(text: str, ts: str, user: str = "U0ALICE") -> dict[str, Any]:
    return {"type": "message", "channel": "D0ALICE", "channel_type": "im", "user": user, "text": text, "ts": ts,
            "team": TEAM_ID}


async def test_dm_uses_the_senders_memory_and_answers_in_the_im(world) -> None:
    slack, llm, channel, services = world
    scope = f"slack-{TEAM_ID}-U0ALICE"
    memory = services.workspace.memory_file(scope)
    memory.parent.mkdir(parents=True)
    memory.write_text("- Alice's favourite editor is Helix\n")
    llm.reply("You use **Helix**.")
    assert await post_event(channel, dm_event("which editor do I use?", "1700000100.000001")) == 200
    [posted] = await slack.wait_posted(1)
    assert posted["channel"] == "D0ALICE" and posted["text"] == "You use *Helix*."
    assert "Helix" in llm.requests[0]["messages"][0]["content"]


async def post_command(channel: SlackChannel, fields: dict[str, str]) -> int:
    body = urllib.parse.urlencode(fields).encode()
    headers = {**sign(body, SECRET), "Content-Type": "application/x-www-form-urlencoded"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{channel.http_port}/slack/events", data=body,
                                headers=headers) as response:
            return response.status


async def test_memory_dream_as_a_slash_command_in_a_dm(world) -> None:
    slack, llm, channel, services = world
    scope = f"slack-{TEAM_ID}-U0ALICE"
    daily = services.workspace.daily_file(scope, datetime.now().strftime("%Y-%m-%d"))
    daily.parent.mkdir(parents=True)
    daily.write_text("- Alice moved to Kyoto\n")
    llm.reply("[MEMORY]\n- Alice lives in Kyoto\n[DREAM]\nA move.")
    fields = slash_command("/memory", "dream", channel_id="D0ALICE", user_id="U0ALICE",
                           response_url=slack.response_url())
    assert await post_command(channel, fields) == 200
    [response] = await slack.wait_responses(1)
    assert "Alice lives in Kyoto" in response["text"] and len(llm.requests) == 1
    assert services.workspace.memory_file(scope).read_text() == "- Alice lives in Kyoto\n"


async def test_memory_show_as_a_slash_command_in_a_channel_shows_the_channels_memory(world) -> None:
    slack, llm, channel, services = world
    private = services.workspace.memory_file(f"slack-{TEAM_ID}-U0ALICE")
    private.parent.mkdir(parents=True)
    private.write_text("- Alice's bank PIN hint: blue whale\n")
    room = services.workspace.memory_file(f"slack-{TEAM_ID}-chat-C0ROOM")
    room.parent.mkdir(parents=True)
    room.write_text("- the team ships on Thursdays\n")
    fields = slash_command("/memory", "show", channel_id="C0ROOM", user_id="U0ALICE",
                           response_url=slack.response_url())
    assert await post_command(channel, fields) == 200
    [response] = await slack.wait_responses(1)
    assert "ships on Thursdays" in response["text"] and "blue whale" not in response["text"]
    assert response["response_type"] == "ephemeral" and llm.requests == []


async def test_memory_show_in_a_dm_between_two_people_never_shows_the_callers_memory(world) -> None:
    """Alice types /memory show in her DM with Bob: Bob must not see her MEMORY.md, nor may it be used."""
    slack, _llm, channel, services = world
    write_memory(services, f"slack-{TEAM_ID}-U0ALICE", "- Alice's bank PIN hint: blue whale\n")
    response = await memory_command(slack, channel, "show", "D0ALICEBOB")
    assert "blue whale" not in response["text"] and response["response_type"] == "ephemeral"
    assert slack.posted == []


async def memory_command(slack: FakeSlack, channel: SlackChannel, text: str, channel_id: str) -> dict[str, Any]:
    """Alice types ``/memory TEXT`` in ``channel_id``; the answer posted to the command's response_url."""
    fields = slash_command("/memory", text, channel_id=channel_id, user_id="U0ALICE", response_url=slack.response_url())
    assert await post_command(channel, fields) == 200
    [response] = await slack.wait_responses(1)
    return response


def write_memory(services: Any, scope: str, text: str) -> None:
    memory = services.workspace.memory_file(scope)
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text(text)


async def test_a_mention_is_answered_in_its_thread_with_the_channels_scope(world) -> None:
    slack, llm, channel, services = world
    private = services.workspace.memory_file(f"slack-{TEAM_ID}-U0ALICE")
    private.parent.mkdir(parents=True)
    private.write_text("- Alice's salary is 123k\n")
    llm.reply("Hello channel")
    mention = {"type": "app_mention", "channel": "C0ROOM", "user": "U0ALICE", "text": "<@UBOT> hi all",
               "ts": "1700000300.000001", "team": TEAM_ID}
    assert await post_event(channel, mention) == 200
    [posted] = await slack.wait_posted(1)
    assert posted["thread_ts"] == "1700000300.000001" and posted["text"] == "Hello channel"
    prompt = llm.requests[0]["messages"][0]["content"]
    assert "123k" not in prompt and llm.requests[0]["messages"][-1]["content"] == "hi all"
    assert [s.scope for s in services.conversations.sessions_active_since(0)] == [f"slack-{TEAM_ID}-chat-C0ROOM"]


async def test_memory_export_in_the_bots_dm_uploads_the_zip_with_the_v2_flow(world) -> None:
    slack, llm, channel, services = world
    scope = f"slack-{TEAM_ID}-U0ALICE"
    write_memory(services, scope, "- Alice's favourite editor is Helix\n")
    services.memory.append_daily(scope, "- Alice booked the Kyoto trip")
    fields = slash_command("/memory", "export", channel_id="D0ALICE", user_id="U0ALICE",
                           response_url=slack.response_url())
    assert await post_command(channel, fields) == 200
    [shared] = await slack.wait_files(1)
    [response] = await slack.wait_responses(1)
    assert "everything I remember about you" in response["text"] and response["response_type"] == "in_channel"
    assert shared["channel"] == "D0ALICE" and shared["filename"] == shared["title"]
    assert shared["filename"].startswith(f"membridge-{scope}-") and shared["filename"].endswith(".zip")
    methods = [call["method"] for call in slack.calls]
    assert methods.index("files.getUploadURLExternal") < methods.index("files.completeUploadExternal")
    with zipfile.ZipFile(io.BytesIO(shared["data"])) as archive:
        assert archive.read("MEMORY.md") == b"- Alice's favourite editor is Helix\n"
        assert json.loads(archive.read("manifest.json"))["scope"] == scope
    assert llm.requests == []


async def test_memory_export_in_a_channel_is_refused_and_uploads_nothing(world) -> None:
    slack, _llm, channel, services = world
    write_memory(services, f"slack-{TEAM_ID}-U0ALICE", "- Alice's bank PIN hint: blue whale\n")
    response = await memory_command(slack, channel, "export", "C0ROOM")
    assert "only send an export in a direct message" in response["text"]
    assert slack.files == [] and not any(call["method"].startswith("files.") for call in slack.calls)


async def test_a_retried_event_is_answered_once(world) -> None:
    """Slack retries an event it thinks was not acknowledged in time; the bridge drops it by its key."""
    slack, llm, channel, _ = world
    llm.reply("hello Alice")
    event = dm_event("hi", "1700000300.000001")
    assert await post_event(channel, event) == 200
    assert await post_event(channel, event) == 200
    llm.reply("second answer")
    assert await post_event(channel, dm_event("and again", "1700000300.000002")) == 200
    posted = await slack.wait_posted(2)
    assert [p["text"] for p in posted] == ["hello Alice", "second answer"] and len(llm.requests) == 2


async def slash_memory(slack: FakeSlack, channel: SlackChannel, text: str, channel_id: str = "D0ALICE") -> str:
    """Alice types ``/memory TEXT``; the text of the answer posted to that command's response_url."""
    done = len(slack.responses)
    fields = slash_command("/memory", text, channel_id=channel_id, user_id="U0ALICE", response_url=slack.response_url())
    assert await post_command(channel, fields) == 200
    return str((await slack.wait_responses(done + 1))[done]["text"])


async def test_memory_forget_lists_then_forget_bang_removes_the_text_from_every_file(world) -> None:
    slack, llm, channel, services = world
    scope = f"slack-{TEAM_ID}-U0ALICE"
    services.dreamer.memory_file.write(scope, b"- Alice uses Helix\n- Alice's badge is 5150\n", "dream")
    daily = services.memory.append_daily(scope, "- Alice lost badge 5150", when=datetime(2026, 12, 1, 9, 30))
    services.memory.indexer.sync(scope)
    listing = await slash_memory(slack, channel, "forget badge")
    assert listing.splitlines() == [
        "“badge” is in:", "```", "memory files: 2; file versions: 1; index: 2",
        "  memory files  MEMORY.md:2  - Alice's badge is 5150",
        "  memory files  memory/2026-12-01.md:1  - Alice lost badge 5150",
        "  file versions  MEMORY.md v1:2  - Alice's badge is 5150",
        "  index  MEMORY.md:1-2  - Alice uses Helix - Alice's badge is 5150",
        "  index  memory/2026-12-01.md:1-1  - Alice lost badge 5150", "```",
        "Send /memory forget! badge to forget all of it for good (it cannot be undone)."]
    assert services.memory.search("5150", scope)  # a listing changes nothing
    done = await slash_memory(slack, channel, "forget! badge")
    assert done == "Forgotten for good: 2 in memory files, 1 in file versions, 2 in index."
    assert services.workspace.memory_file(scope).read_bytes() == b"- Alice uses Helix\n"
    assert not daily.exists() and services.memory.search("5150", scope) == []
    assert b"5150" not in (services.workspace.root / "index.db").read_bytes() and not llm.requests


async def test_in_a_channel_a_member_may_not_forget_and_nobody_may_forget_me(world) -> None:
    slack, _llm, channel, services = world
    daily = services.memory.append_daily(f"slack-{TEAM_ID}-chat-C0ROOM", "- the lab's door code is 7788")
    assert await slash_memory(slack, channel, "forget! door code", "C0ROOM") == (
        "Sorry, in a group only an admin can make me forget things.")
    assert await slash_memory(slack, channel, "forget-me", "C0ROOM") == (
        "Send /memory forget-me to me in a direct message: it erases your own memory, not this chat's.")
    assert b"7788" in daily.read_bytes()


async def test_forget_me_lists_what_is_kept_then_forget_me_bang_erases_only_alice(world) -> None:
    slack, llm, channel, services = world
    alice, bob = f"slack-{TEAM_ID}-U0ALICE", f"slack-{TEAM_ID}-U0BOB"
    for scope in (alice, bob):
        services.memory.append_daily(scope, f"- {scope} rides a red bike")
        services.memory.indexer.sync(scope)
    before = {path: path.read_bytes() for path in services.workspace.scope_dir(bob).rglob("*") if path.is_file()}
    assert await slash_memory(slack, channel, "forget-me") == (
        "I keep about you: 1 file, 1 chunk. Send /memory forget-me! to erase all of it for good. What you said in "
        "groups stays in those groups' memory (an admin there can /memory forget it).")
    assert await slash_memory(slack, channel, "forget-me!") == (
        "Done: everything I kept about you is erased. I start from nothing.")
    assert not services.workspace.scope_dir(alice).exists() and services.memory.search("red bike", alice) == []
    assert {path: path.read_bytes() for path in services.workspace.scope_dir(bob).rglob("*") if path.is_file()} == before
    assert services.memory.search("red bike", bob) and not llm.requests
    assert await slash_memory(slack, channel, "forget-me") == "I keep nothing about you."


async def test_a_pdf_in_a_dm_is_remembered_and_found_in_that_scope_only(world) -> None:
    slack, llm, channel, _services = world
    slack.ims["D0BOB"] = "U0BOB"
    pdf = slack.host_file(tiny_pdf("On-call rules: the pager rotates every Monday at 10:00", "Escalate after 15 min"),
                          name="on-call.pdf", mimetype="application/pdf", filetype="pdf")
    llm.responder = lambda request: ("The team's on-call rules." if request["messages"][0]["content"] == SUMMARIZE
                                     else None)
    event = {**dm_event("", "1700000300.000001"), "subtype": "file_share", "files": [pdf]}
    assert await post_event(channel, event) == 200
    [saved] = await slack.wait_posted(1)
    assert (saved["channel"], saved["text"]) == (
        "D0ALICE", "Saved on-call.pdf to your memory (2 pages, 77 characters). The team's on-call rules.")
    assert [d.authorization for d in slack.file_host.downloads] == [f"Bearer {BOT_TOKEN}"]
    urls = {"alice": slack.response_url(), "bob": slack.response_url()}
    for dm_channel, user, url in (("D0ALICE", "U0ALICE", urls["alice"]), ("D0BOB", "U0BOB", urls["bob"])):
        fields = slash_command("/memory", "search pager rotates Monday", channel_id=dm_channel, user_id=user,
                               response_url=url)
        assert await post_command(channel, fields) == 200
    alice = await slack.wait_response_to(urls["alice"])
    bob = await slack.wait_response_to(urls["bob"])
    assert "the pager rotates every Monday at 10:00" in alice["text"]
    assert bob["text"] == "Nothing in memory matches “pager rotates Monday”."
