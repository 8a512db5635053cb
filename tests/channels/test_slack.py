"""SlackChannel driven through real slack-bolt / slack_sdk against FakeSlack.

HTTP Events API requests are signed and posted like Slack posts them; Socket Mode events are
pushed over the fake's WebSocket. Every wait is bounded, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from fakes import HANG_GUARD_S
from fakes.slack_server import APP_TOKEN, BOT_TOKEN, TEAM_ID, FakeSlack, event_callback, sign, slash_command
from slack_sdk.errors import SlackApiError

from channels.base import ChatType, IncomingMessage, Reply
from channels.slack import SlackChannel

SECRET = "test-signing-secret"
DM = "D0DIRECT"
ROOM = "C0ROOM"
USER = "U0ALICE"
QUIET_S = 0.3  # how long to watch for something that must not happen


class Recorder:
    """The bridge's stand-in: records each message handed on and answers it through the channel."""

    def __init__(self) -> None:
        self.channel: SlackChannel | None = None
        self.messages: list[IncomingMessage] = []

    async def __call__(self, message: IncomingMessage) -> None:
        self.messages.append(message)
        assert self.channel is not None
        await self.channel.send(Reply(f"echo: {message.text}"), message)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.ims[DM] = USER  # the bot's own DM with Alice
        yield fake


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


async def _running(channel: SlackChannel, recorder: Recorder) -> SlackChannel:
    recorder.channel = channel
    await asyncio.wait_for(channel.start(recorder), HANG_GUARD_S)
    return channel


@pytest.fixture
async def http_channel(slack: FakeSlack, recorder: Recorder) -> AsyncIterator[SlackChannel]:
    channel = SlackChannel(bot_token=BOT_TOKEN, signing_secret=SECRET, api_url=slack.api_url, port=0)
    await _running(channel, recorder)
    yield channel
    await channel.stop()


async def _post(
    channel: SlackChannel,
    payload: dict[str, Any],
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    body = json.dumps(payload).encode()
    all_headers = {**sign(body, secret, timestamp), **(headers or {})}
    url = f"http://127.0.0.1:{channel.http_port}/slack/events"
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(url, data=body, headers=all_headers) as response:
            return response.status, await response.text()


def _dm(text: str, ts: str = "1700000001.000100", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": DM,
        "channel_type": "im",
        "user": USER,
        "text": text,
        "ts": ts,
        "team": TEAM_ID,
        **extra,
    }


def _mention(text: str, ts: str = "1700000002.000200", **extra: Any) -> dict[str, Any]:
    return {"type": "app_mention", "channel": ROOM, "user": USER, "text": text, "ts": ts, "team": TEAM_ID, **extra}


async def test_signed_dm_round_trip(slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel) -> None:
    event = _dm("hi <@UBOT> &lt;b&gt; &amp; more")
    status, _ = await _post(http_channel, event_callback(event))
    assert status == 200
    posted = await slack.wait_posted(1)

    (message,) = recorder.messages
    expected = IncomingMessage(
        channel="slack",
        chat_id=DM,
        chat_type="direct",
        user_id=USER,
        user_name=USER,
        text="hi <b> & more",
        message_id=event["ts"],
        thread_id=None,
        team=TEAM_ID,
        received_at=0,
    )
    assert replace(message, received_at=0) == expected
    assert message.raw == event
    assert message.chat_key == f"slack:{TEAM_ID}:{DM}:"
    assert [(p["channel"], p["text"], p["thread_ts"]) for p in posted] == [
        (DM, "echo: hi &lt;b&gt; &amp; more", None)
    ]
    assert [c["method"] for c in slack.calls].count("auth.test") == 1


async def test_url_verification_answers_the_challenge(http_channel: SlackChannel, recorder: Recorder) -> None:
    payload = {"token": "verification-token", "challenge": "c-123", "type": "url_verification"}
    status, text = await _post(http_channel, payload)
    assert status == 200
    assert json.loads(text) == {"challenge": "c-123"}
    assert recorder.messages == []


@pytest.mark.parametrize(
    ("secret", "age_s"),
    [("wrong-secret", 0), (SECRET, 600)],
    ids=["bad-signature", "stale-timestamp"],
)
async def test_unverified_request_is_401_and_ignored(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel, secret: str, age_s: int
) -> None:
    status, _ = await _post(
        http_channel, event_callback(_dm("sneaky")), secret=secret, timestamp=int(time.time()) - age_s
    )
    assert status == 401
    await asyncio.sleep(QUIET_S)
    assert recorder.messages == []
    assert slack.posted == []


async def test_retried_event_is_acknowledged_and_handed_on_with_the_same_key(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    """The channel does not dedupe: the receiving side drops the retry by its key (see test_slack_bridge)."""
    payload = event_callback(_dm("once please"), event_id="Ev0RETRY")
    assert (await _post(http_channel, payload))[0] == 200
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert (await _post(http_channel, payload, headers=retry))[0] == 200
    await slack.wait_posted(2)
    assert [m.text for m in recorder.messages] == ["once please", "once please"]
    assert recorder.messages[0].dedupe_key == recorder.messages[1].dedupe_key


async def test_mention_is_answered_once_in_its_thread(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    mention = _mention("<@UBOT> what's up?")
    same_message = {**mention, "type": "message", "channel_type": "channel"}
    assert (await _post(http_channel, event_callback(same_message)))[0] == 200
    assert (await _post(http_channel, event_callback(mention)))[0] == 200
    posted = await slack.wait_posted(1)
    await asyncio.sleep(QUIET_S)

    (message,) = recorder.messages
    assert (message.chat_type, message.chat_id, message.text) == ("group", ROOM, "what's up?")
    assert message.thread_id is None  # without thread_scope the channel is one chat
    assert message.chat_key == f"slack:{TEAM_ID}:{ROOM}:"
    assert [(p["channel"], p["thread_ts"]) for p in posted] == [(ROOM, mention["ts"])]


async def test_thread_scope_gives_each_thread_its_own_chat(slack: FakeSlack, recorder: Recorder) -> None:
    channel = SlackChannel(
        bot_token=BOT_TOKEN, signing_secret=SECRET, api_url=slack.api_url, port=0, thread_scope=True
    )
    await _running(channel, recorder)
    try:
        in_thread = _mention("<@UBOT> and this?", ts="1700000003.000300", thread_ts="1700000000.000001")
        await _post(channel, event_callback(_mention("<@UBOT> top")))
        await _post(channel, event_callback(in_thread))
        posted = await slack.wait_posted(2)
    finally:
        await channel.stop()
    top, threaded = sorted(recorder.messages, key=lambda m: m.message_id)
    assert (top.thread_id, threaded.thread_id) == ("1700000002.000200", "1700000000.000001")
    assert top.chat_key != threaded.chat_key
    assert sorted(p["thread_ts"] for p in posted) == ["1700000000.000001", "1700000002.000200"]


async def test_bots_and_edits_are_ignored(slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel) -> None:
    noise = [
        _dm("my own words", ts="1700000010.000001", user="UBOT", bot_id="BBOT"),
        _dm("another bot", ts="1700000010.000002", user="U0OTHER", bot_id="B0OTHER"),
        _dm("", ts="1700000010.000003", subtype="message_changed", message=_dm("edited")),
        _dm("joined", ts="1700000010.000004", subtype="channel_join"),
    ]
    for event in noise:
        assert (await _post(http_channel, event_callback(event)))[0] == 200
    await _post(http_channel, event_callback(_dm("real", ts="1700000010.000005")))
    await slack.wait_posted(1)
    await asyncio.sleep(QUIET_S)
    assert [m.text for m in recorder.messages] == ["real"]
    assert len(slack.posted) == 1


async def test_shared_files_are_turns_with_attachments(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    pdf = slack.host_file(b"%PDF-1.7 rules", name="rules.pdf", mimetype="application/pdf", filetype="pdf")
    clip = slack.host_file(b"webm", name="audio_message.webm", mimetype="audio/webm", duration_ms=2000)
    mine = slack.host_file(b"export", name="export.zip", mimetype="application/zip", user="UBOT")
    events = [
        _dm("", ts="1700000015.000001", user="UBOT", bot_id="BBOT", subtype="file_share", files=[mine]),
        _dm("the on-call rules", ts="1700000015.000002", subtype="file_share", files=[pdf, clip]),
        _mention(f"<@{slack.bot_user_id}> what does it say?", ts="1700000015.000003", files=[pdf]),
    ]
    for event in events:
        assert (await _post(http_channel, event_callback(event)))[0] == 200
    await slack.wait_posted(2)
    assert [(m.chat_type, m.text, [(a.kind, a.name, a.size) for a in m.attachments]) for m in recorder.messages] == [
        ("direct", "the on-call rules", [("document", "rules.pdf", 14), ("audio", "audio_message.webm", 4)]),
        ("group", "what does it say?", [("document", "rules.pdf", 14)]),
    ]
    assert await recorder.messages[0].attachments[0].read(1000) == b"%PDF-1.7 rules"


async def test_one_chat_is_handed_on_in_arrival_order(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    texts = [f"message {i}" for i in range(5)]
    for i, text in enumerate(texts):
        await _post(http_channel, event_callback(_dm(text, ts=f"1700000020.00000{i}")))
    await slack.wait_posted(len(texts))
    assert [m.text for m in recorder.messages] == texts


async def test_socket_mode_round_trip_keeps_arrival_order(slack: FakeSlack, recorder: Recorder) -> None:
    channel = SlackChannel(bot_token=BOT_TOKEN, app_token=APP_TOKEN, api_url=slack.api_url)
    await _running(channel, recorder)
    texts = [f"socket {i}" for i in range(5)]
    try:
        envelope_ids = [
            await slack.push_socket_event(event_callback(_dm(text, ts=f"1700000030.00000{i}")))
            for i, text in enumerate(texts)
        ]
        acks = await slack.wait_acks(len(texts))
        posted = await slack.wait_posted(len(texts))
    finally:
        await channel.stop()
        await channel.stop()  # safe twice
    assert sorted(ack["envelope_id"] for ack in acks) == sorted(envelope_ids)
    assert [m.text for m in recorder.messages] == texts
    assert [(p["channel"], p["text"]) for p in posted] == [(DM, f"echo: {text}") for text in texts]


async def test_socket_mode_bad_app_token_fails_start(slack: FakeSlack, recorder: Recorder) -> None:
    channel = SlackChannel(bot_token=BOT_TOKEN, app_token="xapp-wrong", api_url=slack.api_url)
    with pytest.raises(SlackApiError, match="invalid_auth"):
        await asyncio.wait_for(channel.start(recorder), HANG_GUARD_S)
    await channel.stop()


def test_http_mode_needs_a_signing_secret() -> None:
    with pytest.raises(ValueError, match=r"channels\.slack\.signing_secret"):
        SlackChannel(bot_token=BOT_TOKEN)


def _idle_channel(slack: FakeSlack, **options: Any) -> SlackChannel:
    """A channel that only sends: no start needed."""
    return SlackChannel(bot_token=BOT_TOKEN, signing_secret=SECRET, api_url=slack.api_url, **options)


def _incoming(event: dict[str, Any], chat_type: ChatType = "direct") -> IncomingMessage:
    return IncomingMessage(
        channel="slack",
        chat_id=event["channel"],
        chat_type=chat_type,
        user_id=USER,
        user_name=USER,
        text=event["text"],
        message_id=event["ts"],
        team=TEAM_ID,
        raw=event,
    )


async def test_rate_limit_is_waited_out(slack: FakeSlack) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    started = time.monotonic()
    await asyncio.wait_for(_idle_channel(slack).send(Reply("hello"), _incoming(_dm("hi"))), HANG_GUARD_S)
    assert time.monotonic() - started >= 1
    assert [c["method"] for c in slack.calls].count("chat.postMessage") == 2
    assert [p["text"] for p in slack.posted] == ["hello"]


async def test_long_reply_is_split_in_order(slack: FakeSlack) -> None:
    text = "\n".join(f"line {i:04d} " + "x" * 80 for i in range(100))[:9000]
    await asyncio.wait_for(_idle_channel(slack).send(Reply(text), _incoming(_dm("long?"))), HANG_GUARD_S)
    parts = [p["text"] for p in slack.posted]
    assert len(parts) == 3
    assert all(len(part) <= 3900 for part in parts)
    assert "\n".join(parts) == text
    assert {(p["channel"], p["thread_ts"]) for p in slack.posted} == {(DM, None)}


async def test_progress_placeholder_becomes_the_answer(slack: FakeSlack) -> None:
    channel = _idle_channel(slack, progress=True)
    message = _incoming(_mention("<@UBOT> think"), chat_type="group")
    async with channel.working(message):
        (placeholder,) = await slack.wait_posted(1)
    await asyncio.wait_for(channel.send(Reply("**done**"), message), HANG_GUARD_S)
    assert (placeholder["channel"], placeholder["text"], placeholder["thread_ts"]) == (ROOM, "…", message.message_id)
    assert slack.updated == [{"channel": ROOM, "ts": placeholder["ts"], "text": "*done*"}]
    assert len(slack.posted) == 1


async def test_without_progress_working_posts_nothing(slack: FakeSlack) -> None:
    async with _idle_channel(slack).working(_incoming(_dm("hi"))):
        pass
    assert slack.calls == []


# -- slash commands ---------------------------------------------------------------------------------


async def _post_command(channel: SlackChannel, fields: dict[str, str], *, secret: str = SECRET) -> tuple[int, str]:
    """A slash command as Slack delivers it over HTTP: a signed form body."""
    body = urllib.parse.urlencode(fields).encode()
    headers = {**sign(body, secret), "Content-Type": "application/x-www-form-urlencoded"}
    url = f"http://127.0.0.1:{channel.http_port}/slack/events"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        async with session.post(url, data=body, headers=headers) as response:
            return response.status, await response.text()


async def test_a_slash_command_in_a_dm_is_a_turn_answered_through_its_response_url(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    fields = slash_command("/memory", "dream 2", channel_id=DM, user_id=USER, response_url=slack.response_url())
    status, body = await _post_command(http_channel, fields)
    assert (status, body) == (200, "")  # acknowledged at once, with nothing shown yet
    [response] = await slack.wait_responses(1)
    [message] = recorder.messages
    assert (message.chat_id, message.chat_type, message.user_id, message.team, message.text) == (
        DM, "direct", USER, TEAM_ID, "/memory dream 2")
    assert message.message_id == fields["trigger_id"]
    assert (response["text"], response["response_type"]) == ("echo: /memory dream 2", "in_channel")
    assert slack.posted == []


async def test_a_slash_command_in_a_channel_answers_only_the_person_who_typed_it(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    fields = slash_command("/memory", "show", channel_id=ROOM, user_id=USER, response_url=slack.response_url())
    assert (await _post_command(http_channel, fields))[0] == 200
    [response] = await slack.wait_responses(1)
    assert recorder.messages[0].chat_type == "group" and recorder.messages[0].chat_id == ROOM
    assert response["response_type"] == "ephemeral"


async def test_an_expired_response_url_falls_back_to_posting_in_the_channel(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    slack.expired_responses = 1
    fields = slash_command("/help", "", channel_id=DM, user_id=USER, response_url=slack.response_url())
    assert (await _post_command(http_channel, fields))[0] == 200
    [posted] = await slack.wait_posted(1)
    assert (posted["channel"], posted["text"]) == (DM, "echo: /help")
    assert slack.responses == []


@pytest.mark.parametrize(
    ("channel_id", "channel_name", "user", "info_fails"),
    [
        ("D0ALICEBOB", "directmessage", USER, False),  # Alice's DM with Bob: the bot is no member
        (DM, "directmessage", "U0BOB", False),  # Bob in the bot's DM with Alice
        ("G0MPIM", "mpdm-alice--bob--carol-1", USER, False),  # a group DM
        (DM, "directmessage", USER, True),  # the bot's DM, but conversations.info fails (no im:read)
    ],
    ids=["dm-between-two-people", "someone-elses-dm-with-the-bot", "group-dm", "dm-unverifiable"],
)
async def test_a_slash_command_outside_the_callers_dm_with_the_bot_is_answered_only_to_the_caller(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel,
    channel_id: str, channel_name: str, user: str, info_fails: bool,
) -> None:
    """Slash commands work in every DM, also Alice's with Bob: only the caller's own DM with the
    bot may use their private memory and answer for everyone there to see."""
    if info_fails:
        slack.fail_next("conversations.info", status=200, retry_after=None, error="missing_scope")
    fields = {**slash_command("/memory", "show", channel_id=channel_id, user_id=user, response_url=slack.response_url()),
              "channel_name": channel_name}
    assert (await _post_command(http_channel, fields))[0] == 200
    [response] = await slack.wait_responses(1)
    [message] = recorder.messages
    assert (message.chat_id, message.chat_type) == (channel_id, "group")
    assert response["response_type"] == "ephemeral"


async def test_a_badly_signed_slash_command_is_refused(
    slack: FakeSlack, recorder: Recorder, http_channel: SlackChannel
) -> None:
    fields = slash_command("/memory", "revert", channel_id=DM, user_id=USER, response_url=slack.response_url())
    status, _ = await _post_command(http_channel, fields, secret="not-the-secret")
    await asyncio.sleep(QUIET_S)
    assert status == 401 and recorder.messages == [] and slack.responses == []


async def test_a_slash_command_over_socket_mode(slack: FakeSlack, recorder: Recorder) -> None:
    channel = SlackChannel(bot_token=BOT_TOKEN, app_token=APP_TOKEN, api_url=slack.api_url)
    await _running(channel, recorder)
    try:
        fields = slash_command("/knowledge", "list", channel_id=DM, user_id=USER, response_url=slack.response_url())
        envelope_id = await slack.push_socket_event(fields, kind="slash_commands")
        [ack] = await slack.wait_acks(1)
        [response] = await slack.wait_responses(1)
    finally:
        await channel.stop()
    assert ack["envelope_id"] == envelope_id
    assert recorder.messages[0].text == "/knowledge list"
    assert response["text"] == "echo: /knowledge list"


async def test_slack_bot_token_in_the_environment_brings_no_bolt_warning(
    slack: FakeSlack, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """bolt reads SLACK_BOT_TOKEN itself and warns that it goes unused; the channel keeps it from bolt."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    caplog.set_level("WARNING")
    channel = SlackChannel(bot_token=BOT_TOKEN, app_token=APP_TOKEN, api_url=slack.api_url)
    assert caplog.records == []
    assert os.environ["SLACK_BOT_TOKEN"] == BOT_TOKEN  # restored for everyone else
    await _running(channel, recorder)
    try:
        assert channel.describe() == "slack: team Fake Team as @membridge (Socket Mode)"
    finally:
        await channel.stop()
