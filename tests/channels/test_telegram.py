"""TelegramChannel driven through the real python-telegram-bot against FakeTelegram.

Negative checks ("this is ignored") mostly push a later message from the same chat and wait for
it: updates are sorted in arrival order, so once the later one is through, the earlier one was
dropped, not late. Where that can't work (other chats, a webhook) a short quiet spell is watched.
Every wait is bounded, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fakes.telegram_server import BOT_USERNAME, TOKEN, FakeTelegram
from support.ports import free_port
from telegram import Update
from telegram.error import InvalidToken

from channels.base import IncomingMessage, Reply
from channels.telegram import NON_TEXT_NOTE, TelegramChannel

DM = 4242
ALICE = 4242
BOB = 5151
GROUP = -1001234
QUIET_S = 0.3  # how long to watch for something that must not happen
STOP_TIMEOUT_S = 10.0

Turn = Callable[[IncomingMessage], Awaitable[None]]


class Recorder:
    """The bridge's stand-in: records each turn, then runs ``on_turn`` (by default an echo)."""

    def __init__(self, channel: TelegramChannel) -> None:
        self.channel = channel
        self.messages: list[IncomingMessage] = []
        self.on_turn: Turn | None = None

    async def __call__(self, message: IncomingMessage) -> None:
        self.messages.append(message)
        if self.on_turn is not None:
            await self.on_turn(message)
        else:
            await self.channel.send(Reply(text=f"echo: {message.text}"), message)

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m.text for m in self.messages if chat_id is None or m.chat_id == str(chat_id)]


Starter = Callable[..., Awaitable[tuple[TelegramChannel, Recorder]]]


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def start(fake: FakeTelegram) -> AsyncIterator[Starter]:
    """Starts channels against the fake (fast polling, fast typing); stops them afterwards."""
    started: list[TelegramChannel] = []

    async def _start(**options: Any) -> tuple[TelegramChannel, Recorder]:
        config: dict[str, Any] = {
            "token": TOKEN,
            "base_url": fake.base_url,
            "poll_timeout": 1,
            "typing_interval": 0.1,
            **options,
        }
        channel = TelegramChannel(**config)
        recorder = Recorder(channel)
        await asyncio.wait_for(channel.start(recorder), STOP_TIMEOUT_S)
        started.append(channel)
        return channel, recorder

    yield _start
    for channel in started:
        await asyncio.wait_for(channel.stop(), STOP_TIMEOUT_S)


async def test_dm_round_trip(fake: FakeTelegram, start: Starter) -> None:
    channel, recorder = await start()
    assert channel.bot_username == BOT_USERNAME

    update = fake.push_text(DM, ALICE, "hello there", username="alice")
    sent = await fake.wait_sent(1)

    [message] = recorder.messages
    assert (
        message.channel,
        message.chat_id,
        message.chat_type,
        message.user_id,
        message.user_name,
        message.text,
        message.message_id,
        message.thread_id,
    ) == ("telegram", str(DM), "direct", str(ALICE), "alice", "hello there",
          str(update["message"]["message_id"]), None)
    assert isinstance(message.raw, Update) and message.raw.update_id == update["update_id"]
    assert sent[0]["chat_id"] == DM
    assert sent[0]["visible"] == "echo: hello there"
    assert sent[0]["parse_mode"] == "MarkdownV2"
    assert sent[0]["reply_to"] is None


async def test_user_name_falls_back_to_first_name(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    fake.push_text(DM, ALICE, "hi", first_name="Alice")
    await fake.wait_sent(1)
    assert recorder.messages[0].user_name == "Alice"


async def test_group_answers_only_what_is_for_the_bot(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    group = {"chat_type": "supergroup", "username": "bob"}
    fake.push_text(GROUP, BOB, "just chatting among humans", **group)
    fake.push_text(GROUP, BOB, f"@{BOT_USERNAME} what's up?", **group)
    fake.push_text(GROUP, BOB, "and you?", reply_to_bot=True, **group)
    fake.push_text(GROUP, BOB, f"/help@{BOT_USERNAME}", **group)
    fake.push_text(GROUP, BOB, "/help@some_other_bot", **group)
    fake.push_text(GROUP, BOB, "hey @someone_else", **group)
    fake.push_text(GROUP, BOB, f"hey @{BOT_USERNAME.upper()}, summarise please", **group)
    fake.push_text(GROUP, BOB, "/start now", **group)

    await eventually(lambda: len(recorder.messages) == 5, "the five addressed messages")
    assert recorder.texts() == [
        "what's up?", "and you?", "/help", "hey summarise please", "/start now"
    ]
    assert {m.chat_type for m in recorder.messages} == {"group"}
    assert {m.chat_id for m in recorder.messages} == {str(GROUP)}
    await fake.wait_sent(5)


async def test_long_reply_arrives_in_order_in_parts(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    words = [f"word{i:04d}" for i in range(1001)]  # 9,009 characters with the spaces
    long_text = " ".join(words)
    assert len(long_text) >= 9000

    async def answer(message: IncomingMessage) -> None:
        await recorder.channel.send(Reply(text=long_text), message)

    recorder.on_turn = answer
    fake.push_text(DM, ALICE, "tell me everything")
    sent = await fake.wait_sent(3)
    await asyncio.sleep(QUIET_S)

    assert len(fake.sent) == 3
    assert all(len(part["visible"]) <= 4096 for part in sent)
    assert " ".join(part["visible"] for part in sent).split() == words


async def test_flood_control_is_waited_out(fake: FakeTelegram, start: Starter) -> None:
    await start()
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    began = time.monotonic()
    fake.push_text(DM, ALICE, "busy?")

    await fake.wait_sent(1)
    assert time.monotonic() - began >= 1.0
    await asyncio.sleep(QUIET_S)
    assert [s["visible"] for s in fake.sent] == ["echo: busy?"]
    assert [name for name, _ in fake.calls].count("sendMessage") == 2


async def test_refused_formatting_is_resent_plain(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    source = "Done. **Really** done!"

    async def answer(message: IncomingMessage) -> None:
        await recorder.channel.send(Reply(text=source), message)

    recorder.on_turn = answer
    fake.fail_next(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: Character '.' is reserved and must be escaped "
        "with the preceding '\\'",
    )
    fake.push_text(DM, ALICE, "status?")

    [sent] = await fake.wait_sent(1)
    assert sent["parse_mode"] is None
    assert sent["text"] == source


async def test_markdown_reaches_telegram_formatted(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    source = (
        "# Plan\n\nCost: **$1.50** (approx.) for `x = y - 1` and "
        "[docs](https://example.org/a_(b)).\n\n- one\n- two"
    )

    async def answer(message: IncomingMessage) -> None:
        await recorder.channel.send(Reply(text=source), message)

    recorder.on_turn = answer
    fake.push_text(DM, ALICE, "plan?")

    [sent] = await fake.wait_sent(1)
    assert sent["parse_mode"] == "MarkdownV2"
    assert sent["visible"] == (
        "Plan\n\nCost: $1.50 (approx.) for x = y - 1 and docs.\n\n• one\n• two"
    )
    kinds = {entity["type"] for entity in sent["entities"]}
    assert {"bold", "code", "text_link"} <= kinds
    assert [name for name, _ in fake.calls].count("sendMessage") == 1


async def test_webhook_checks_the_secret(fake: FakeTelegram, start: Starter) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/tg/hook"
    _, recorder = await start(
        mode="webhook", webhook_url=url, webhook_port=port, secret_token="s3cret-token"
    )
    assert fake.webhook is not None
    assert fake.webhook["url"] == url
    assert fake.webhook["secret_token"] == "s3cret-token"

    forged = fake.text_update(DM, ALICE, "forged")
    assert await fake.post_webhook(url, forged, secret="wrong") == 403
    assert await fake.post_webhook(url, forged) == 403
    genuine = fake.text_update(DM, ALICE, "genuine")
    assert await fake.post_webhook(url, genuine, secret="s3cret-token") == 200

    await fake.wait_sent(1)
    await asyncio.sleep(QUIET_S)
    assert recorder.texts() == ["genuine"]
    assert len(fake.sent) == 1


async def test_allowed_users_blocks_everyone_else(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start(allowed_users=["@Alice", 7777])
    fake.push_text(1111, 1111, "let me in", username="mallory")
    fake.push_photo(1111, 1111, username="mallory")
    fake.push_text(GROUP, 1111, f"@{BOT_USERNAME} me too", chat_type="group", username="mallory")
    fake.push_text(2222, 2222, "by name", username="alice")
    fake.push_text(7777, 7777, "by id")

    await fake.wait_sent(2)
    await asyncio.sleep(QUIET_S)
    assert sorted(recorder.texts()) == ["by id", "by name"]
    assert sorted(s["chat_id"] for s in fake.sent) == [2222, 7777]


async def test_a_redelivered_update_is_handed_on_with_the_same_key(fake: FakeTelegram, start: Starter) -> None:
    """The channel does not dedupe: the bridge drops the second by its key (test_telegram_bridge)."""
    _, recorder = await start()
    update = fake.push_text(DM, ALICE, "once")
    fake.push_update(update)  # the same update_id again, in the same batch
    fake.push_text(DM, ALICE, "later")

    await fake.wait_sent(3)
    assert recorder.texts() == ["once", "once", "later"]
    assert recorder.messages[0].dedupe_key == recorder.messages[1].dedupe_key


async def test_edited_message_is_not_answered_again(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    fake.push_text(DM, ALICE, "original")
    await fake.wait_sent(1)
    fake.push_text(DM, ALICE, "original, edited", edited=True)
    fake.push_text(DM, ALICE, "next")

    await fake.wait_sent(2)
    assert recorder.texts() == ["original", "next"]


async def test_other_media_get_a_note_in_private_only(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    sticker = {"file_id": "s1", "file_unique_id": "us1", "width": 512, "height": 512,
               "is_animated": False, "is_video": False, "type": "regular"}
    fake.push_message(DM, ALICE, {"sticker": sticker})
    fake.push_message(GROUP, BOB, {"sticker": sticker}, chat_type="group", reply_to_bot=True)
    joined = {"new_chat_members": [{"id": 99, "is_bot": False, "first_name": "New"}]}
    fake.push_message(GROUP, BOB, joined, chat_type="group")
    fake.push_photo(GROUP, BOB, chat_type="group")  # a photo not addressed to the bot
    fake.push_text(GROUP, BOB, f"@{BOT_USERNAME} ping", chat_type="group")

    sent = await fake.wait_sent(2)
    by_chat = {s["chat_id"]: s for s in sent}
    assert by_chat[DM]["text"] == NON_TEXT_NOTE
    assert by_chat[DM]["parse_mode"] is None
    assert by_chat[GROUP]["visible"] == "echo: ping"
    assert recorder.texts() == ["ping"]


async def test_files_are_turns_with_attachments_and_the_caption_as_text(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    voice = {**fake.host_file(b"OggS-voice"), "duration": 3, "mime_type": "audio/ogg"}
    document = {**fake.host_file(b"%PDF-1.4"), "file_name": "rules.pdf", "mime_type": "application/pdf"}
    fake.push_message(DM, ALICE, {"voice": voice})
    fake.push_message(GROUP, BOB, {"document": document}, chat_type="group")  # not for the bot
    fake.push_message(GROUP, BOB, {"voice": voice}, chat_type="group", reply_to_bot=True)
    fake.push_message(GROUP, BOB, {"document": document, "caption": f"@{BOT_USERNAME} keep this",
                                   "caption_entities": []}, chat_type="group")

    await fake.wait_sent(3)
    assert [(m.chat_id, m.text, [(a.kind, a.name) for a in m.attachments]) for m in recorder.messages] == [
        (str(DM), "", [("voice", f"voice-{voice['file_unique_id']}.ogg")]),
        (str(GROUP), "", [("voice", f"voice-{voice['file_unique_id']}.ogg")]),
        (str(GROUP), "keep this", [("document", "rules.pdf")]),
    ]
    assert await recorder.messages[2].attachments[0].read(1000) == b"%PDF-1.4"


async def test_caption_counts_as_text(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()
    fake.push_photo(DM, ALICE, caption="what is this?")
    fake.push_photo(GROUP, BOB, caption="nice view", chat_type="group")
    fake.push_photo(GROUP, BOB, caption=f"@{BOT_USERNAME} where is this?", chat_type="group")

    await fake.wait_sent(2)
    assert sorted(recorder.texts()) == ["what is this?", "where is this?"]
    assert [[a.kind for a in m.attachments] for m in recorder.messages] == [["photo"], ["photo"]]


def album_names(message: IncomingMessage) -> list[str]:
    return [attachment.name for attachment in message.attachments]


async def test_an_album_is_one_turn_with_every_photo_and_its_caption(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start(album_wait_s=0.05)
    first = fake.push_photo(DM, ALICE, media_group_id="a1", photo="a", caption="which one should I frame?")
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="b")
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="c")

    [sent] = await fake.wait_sent(1)
    [message] = recorder.messages
    assert message.text == "which one should I frame?"
    assert album_names(message) == ["photo-ua320.jpg", "photo-ub320.jpg", "photo-uc320.jpg"]
    assert message.message_id == str(first["message"]["message_id"])
    assert sent["visible"] == "echo: which one should I frame?"
    fake.push_text(DM, ALICE, "after")
    await fake.wait_sent(2)
    assert recorder.texts() == ["which one should I frame?", "after"]  # the album was answered once


async def test_the_next_message_hands_an_album_on_first(fake: FakeTelegram, start: Starter) -> None:
    """No waiting out the quiet spell: the chat's next message (or album) closes the album, and
    the turns keep the order the messages came in."""
    _, recorder = await start(album_wait_s=30)
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="a")
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="b", caption="these two")
    fake.push_photo(DM, ALICE, media_group_id="a2", photo="c", caption="and this one")
    fake.push_text(DM, ALICE, "thanks")

    await fake.wait_sent(3)
    assert recorder.texts() == ["these two", "and this one", "thanks"]
    assert [album_names(m) for m in recorder.messages] == [
        ["photo-ua320.jpg", "photo-ub320.jpg"], ["photo-uc320.jpg"], []]


async def test_an_album_of_ten_is_handed_on_at_once(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start(album_wait_s=30)
    for n in range(10):
        fake.push_photo(DM, ALICE, media_group_id="big", photo=str(n), caption="ten" if n == 0 else None)

    await fake.wait_sent(1)
    assert len(recorder.messages[0].attachments) == 10


async def test_a_group_album_is_addressed_by_any_of_its_parts(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start(album_wait_s=30)
    fake.push_photo(GROUP, BOB, media_group_id="g1", photo="a", chat_type="group")
    fake.push_photo(GROUP, BOB, media_group_id="g1", photo="b", chat_type="group",
                    caption=f"@{BOT_USERNAME} which is better?")
    fake.push_photo(GROUP, BOB, media_group_id="g2", photo="c", chat_type="group", caption="not for the bot")
    fake.push_photo(GROUP, BOB, media_group_id="g2", photo="d", chat_type="group")
    fake.push_text(GROUP, BOB, f"@{BOT_USERNAME} well?", chat_type="group")

    await fake.wait_sent(2)
    assert recorder.texts() == ["which is better?", "well?"]
    assert album_names(recorder.messages[0]) == ["photo-ua320.jpg", "photo-ub320.jpg"]


async def test_stopping_hands_on_an_album_still_gathering(fake: FakeTelegram, start: Starter) -> None:
    """Nothing fetched is dropped: an album whose quiet spell has not passed is handed on at stop."""
    channel, recorder = await start(album_wait_s=30)
    recorder.on_turn = _record_only
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="a", caption="last words")
    fake.push_photo(DM, ALICE, media_group_id="a1", photo="b")
    await fake.wait_fetched()

    await asyncio.wait_for(channel.stop(), STOP_TIMEOUT_S)
    assert [(m.text, album_names(m)) for m in recorder.messages] == [
        ("last words", ["photo-ua320.jpg", "photo-ub320.jpg"])]


async def _record_only(_message: IncomingMessage) -> None:
    """A turn that sends nothing (the channel may be stopping)."""


async def test_an_update_is_confirmed_only_once_its_message_is_accepted(fake: FakeTelegram, start: Starter) -> None:
    """The offset passes an update only after the handler said its message is safe; fetched again
    meanwhile (Telegram answers with it until then), it is handed on once."""
    channel, recorder = await start()
    recorder.on_turn = _record_only
    update = fake.push_text(DM, ALICE, "keep me")
    await eventually(lambda: bool(recorder.messages), "the message handed on")
    polls = len(fake.offsets)
    await fake.wait_until(lambda: len(fake.offsets) >= polls + 2, what="two more polls")
    assert max(offset or 0 for offset in fake.offsets) == update["update_id"]

    channel.accepted(recorder.messages[0])
    await fake.wait_confirmed()
    assert recorder.texts() == ["keep me"]


async def test_an_update_whose_handing_on_failed_is_handed_on_again(fake: FakeTelegram, start: Starter) -> None:
    channel, recorder = await start()
    failures = [RuntimeError("the handler failed")]

    async def flaky(message: IncomingMessage) -> None:
        if failures:
            raise failures.pop()
        channel.accepted(message)

    recorder.on_turn = flaky
    fake.push_text(DM, ALICE, "again")
    await fake.wait_confirmed()
    assert recorder.texts() == ["again", "again"]


async def test_stopping_confirms_what_was_accepted_and_leaves_the_rest(fake: FakeTelegram, start: Starter) -> None:
    """At stop, the updates accepted are confirmed; one still in hand comes again at the next start."""
    channel, recorder = await start()
    recorder.on_turn = _record_only
    first = fake.push_text(DM, ALICE, "accepted")
    second = fake.push_text(BOB, BOB, "in hand")
    await eventually(lambda: len(recorder.messages) == 2, "both handed on")
    channel.accepted(recorder.messages[0])
    await asyncio.wait_for(channel.stop(), STOP_TIMEOUT_S)
    assert fake.offsets[-1] == second["update_id"] > first["update_id"]

    _again, recorder = await start()
    recorder.on_turn = _record_only
    await eventually(lambda: bool(recorder.messages), "the update in hand delivered again")
    assert recorder.texts() == ["in hand"]


async def test_messages_are_handed_on_in_arrival_order(fake: FakeTelegram, start: Starter) -> None:
    """Turns are ordered per chat by the bridge (test_telegram_bridge); the channel's part is to
    hand messages on in the order they came."""
    _, recorder = await start()
    for i in range(10):
        fake.push_text(DM, ALICE, str(i))
        fake.push_text(BOB, BOB, f"bob {i}")
    await fake.wait_sent(20)
    assert recorder.texts() == [text for i in range(10) for text in (str(i), f"bob {i}")]


async def test_typing_is_shown_while_working(fake: FakeTelegram, start: Starter) -> None:
    channel, recorder = await start()
    recorder.on_turn = lambda message: asyncio.sleep(0)
    fake.push_text(GROUP, BOB, f"@{BOT_USERNAME} think", chat_type="supergroup", thread_id=7)
    await eventually(lambda: bool(recorder.messages), "the turn")
    [message] = recorder.messages
    assert message.thread_id == "7"

    async with channel.working(message):
        actions = await fake.wait_actions(3)
    count = len(fake.actions)
    await asyncio.sleep(QUIET_S)

    assert len(fake.actions) == count  # stopped with the block
    assert all(a == {"chat_id": GROUP, "action": "typing", "message_thread_id": 7} for a in actions)


async def test_reply_goes_to_the_topic_and_quotes(fake: FakeTelegram, start: Starter) -> None:
    _, recorder = await start()

    async def answer(message: IncomingMessage) -> None:
        await recorder.channel.send(Reply(text="x " * 3000, reply_to=message.message_id), message)

    recorder.on_turn = answer
    update = fake.push_text(GROUP, BOB, f"@{BOT_USERNAME} go", chat_type="supergroup", thread_id=7)

    sent = await fake.wait_sent(2)
    assert [s["message_thread_id"] for s in sent] == [7, 7]
    assert [s["reply_to"] for s in sent] == [update["message"]["message_id"], None]


async def test_edit_that_changes_nothing_is_a_no_op(fake: FakeTelegram, start: Starter) -> None:
    channel, recorder = await start()
    fake.push_text(DM, ALICE, "hi")
    [sent] = await fake.wait_sent(1)
    message = recorder.messages[0]

    await channel.edit(message, str(sent["message_id"]), "echo: hi")
    assert fake.edits == []
    await channel.edit(message, str(sent["message_id"]), "echo: *hi* again")
    assert [e["visible"] for e in fake.edits] == ["echo: hi again"]


async def test_wrong_token_fails_start_and_stop_is_idempotent(fake: FakeTelegram) -> None:
    channel = TelegramChannel(token="999:wrong", base_url=fake.base_url, poll_timeout=1)
    with pytest.raises(InvalidToken):
        await asyncio.wait_for(channel.start(Recorder(channel)), STOP_TIMEOUT_S)
    await channel.stop()
    await channel.stop()
    assert channel.bot_username is None


async def test_stop_is_safe_twice(start: Starter) -> None:
    channel, _ = await start()
    await channel.stop()
    await channel.stop()
    with pytest.raises(RuntimeError):
        await channel.send(Reply(text="late"), _message())


def test_webhook_mode_needs_a_url() -> None:
    with pytest.raises(ValueError):
        TelegramChannel(token=TOKEN, mode="webhook")


def _message() -> IncomingMessage:
    return IncomingMessage(
        channel="telegram", chat_id=str(DM), chat_type="direct", user_id=str(ALICE),
        user_name="alice", text="x", message_id="1",
    )


async def test_the_command_menu_is_published_with_set_my_commands(fake: FakeTelegram, start: Starter) -> None:
    channel, _ = await start()
    await channel.publish_commands([("memory", "what I remember"), ("Bad-Name", "refused by Telegram"),
                                    ("help", "x" * 300)])
    assert fake.commands == [{"command": "memory", "description": "what I remember"},
                             {"command": "help", "description": "x" * 256}]
