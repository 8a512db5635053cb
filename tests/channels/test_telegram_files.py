"""Telegram attachments read through the real python-telegram-bot against FakeTelegram.

Each test builds the message as Telegram sends it, lets PTB parse it, and reads the attachment
over the wire: getFile, then the file endpoint. Refusals are checked by what the fake saw: a
file refused for its size costs no getFile and no download.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.telegram_server import TOKEN, FakeTelegram
from telegram import Bot, Message, Update

from channels.base import AttachmentError, AttachmentTooLarge
from channels.telegram_files import BOT_API_DOWNLOAD_LIMIT, TelegramAttachment, attachments_of

DM = 4242
ALICE = 4242
STALL_TIMEOUT_S = 1.0  # the attachment's own deadline in the stall test; the fake holds until released


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    bot = Bot(TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url)
    await bot.initialize()
    yield bot
    await bot.shutdown()


def message(fake: FakeTelegram, bot: Bot, fields: dict[str, Any]) -> Message:
    """``fields`` as a private message, parsed by PTB as it parses getUpdates."""
    update = Update.de_json(fake.message_update(DM, ALICE, fields), bot)
    assert update is not None and update.message is not None
    return update.message


def only(fake: FakeTelegram, bot: Bot, fields: dict[str, Any], **options: Any) -> TelegramAttachment:
    [attachment] = attachments_of(message(fake, bot, fields), bot, **options)
    return attachment


def getfile_calls(fake: FakeTelegram) -> int:
    return sum(1 for method, _ in fake.calls if method.lower() == "getfile")


async def test_each_kind_becomes_an_attachment_with_its_name_type_size_and_length(
        fake: FakeTelegram, bot: Bot) -> None:
    voice = {**fake.host_file(b"OggS-voice"), "duration": 7, "mime_type": "audio/ogg"}
    audio = {**fake.host_file(b"ID3-song"), "duration": 185, "mime_type": "audio/mpeg",
             "file_name": "song.mp3", "title": "Song"}
    document = {**fake.host_file(b"%PDF-1.4 rules"), "file_name": "on-call rules.pdf",
                "mime_type": "application/pdf"}
    small, large = fake.host_file(b"s" * 10), fake.host_file(b"L" * 40)
    photo = [{**small, "width": 90, "height": 90}, {**large, "width": 800, "height": 600}]

    found = [only(fake, bot, fields) for fields in
             ({"voice": voice}, {"audio": audio}, {"document": document}, {"photo": photo, "caption": "what?"})]

    assert [(a.kind, a.name, a.mime_type, a.size, a.duration_s) for a in found] == [
        ("voice", f"voice-{voice['file_unique_id']}.ogg", "audio/ogg", 10, 7.0),
        ("audio", "song.mp3", "audio/mpeg", 8, 185.0),
        ("document", "on-call rules.pdf", "application/pdf", 14, None),
        ("photo", f"photo-{large['file_unique_id']}.jpg", "image/jpeg", 40, None),
    ]
    assert getfile_calls(fake) == 0  # nothing is fetched until read
    assert fake.files.downloads == []


async def test_read_returns_the_exact_bytes(fake: FakeTelegram, bot: Bot) -> None:
    data = bytes(range(256)) * 1000  # several chunks
    attachment = only(fake, bot, {"document": {**fake.host_file(data), "file_name": "blob.bin"}})

    assert await attachment.read(1_000_000) == data
    [download] = fake.files.downloads
    assert download.status == 200


async def test_a_photo_is_read_in_the_largest_size_that_fits(fake: FakeTelegram, bot: Bot) -> None:
    sizes = [fake.host_file(b"a" * 100), fake.host_file(b"b" * 5000),
             fake.host_file(b"c" * 10, size=30_000_000)]  # a size the Bot API would not hand over
    photo = [{**size, "width": side, "height": side} for size, side in zip(sizes, (90, 320, 4000), strict=True)]
    attachment = only(fake, bot, {"photo": photo})

    assert attachment.size == 5000
    assert await attachment.read(1_000_000) == b"b" * 5000
    assert await attachment.read(1000) == b"a" * 100  # the caller's limit picks a smaller size
    with pytest.raises(AttachmentTooLarge):
        await attachment.read(50)
    assert [d.key for d in fake.files.downloads] == ["documents/file_2", "documents/file_1"]


async def test_a_25_mb_file_is_refused_before_any_transfer(fake: FakeTelegram, bot: Bot) -> None:
    document = {**fake.host_file(b"never sent", size=25_000_000), "file_name": "video.mov",
                "mime_type": "video/quicktime"}
    attachment = only(fake, bot, {"document": document})

    with pytest.raises(AttachmentTooLarge) as refused:
        await attachment.read(100_000_000)  # the bridge would take it; Telegram would not

    assert str(refused.value) == "video.mov is 25 MB, over the limit of 20 MB, so it was not read."
    assert refused.value.limit == BOT_API_DOWNLOAD_LIMIT
    assert getfile_calls(fake) == 0
    assert fake.files.downloads == []


async def test_a_file_over_the_callers_limit_is_refused_before_any_transfer(fake: FakeTelegram, bot: Bot) -> None:
    attachment = only(fake, bot, {"voice": {**fake.host_file(b"x" * 3_000_000), "duration": 200}})

    with pytest.raises(AttachmentTooLarge) as refused:
        await attachment.read(2_000_000)

    assert (refused.value.size, refused.value.limit) == (3_000_000, 2_000_000)
    assert getfile_calls(fake) == 0 and fake.files.downloads == []


async def test_a_body_longer_than_announced_is_cut_off_at_the_limit(fake: FakeTelegram, bot: Bot) -> None:
    document = {**fake.host_file(b"z" * 500_000, size=1000), "file_name": "liar.txt"}
    fake.files.files["documents/file_1"].chunked = True  # no Content-Length to refuse it by
    attachment = only(fake, bot, {"document": document})

    with pytest.raises(AttachmentTooLarge) as refused:
        await attachment.read(100_000)

    assert refused.value.limit == 100_000
    assert 100_000 < refused.value.size < 500_000  # it stopped reading soon after the limit


async def test_a_stalled_download_times_out(fake: FakeTelegram, bot: Bot) -> None:
    document = {**fake.host_file(b"half and half"), "file_name": "slow.txt"}
    fake.files.files["documents/file_1"].stall = True
    attachment = only(fake, bot, {"document": document}, timeout_s=STALL_TIMEOUT_S)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert fake.files.stalled.is_set()  # it timed out in the transfer, not before it
    assert str(failed.value) == "Fetching slow.txt took longer than 1 s, so it was not read. Try again later."


async def test_a_download_500_is_a_clear_error(fake: FakeTelegram, bot: Bot) -> None:
    attachment = only(fake, bot, {"document": {**fake.host_file(b"data"), "file_name": "notes.md"}})
    fake.files.files["documents/file_1"].failures.append(500)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == "Telegram did not hand over notes.md (HTTP 500). Try sending it again."
    assert await attachment.read(1000) == b"data"  # a later try is a new download


async def test_a_getfile_error_is_a_clear_error(fake: FakeTelegram, bot: Bot) -> None:
    attachment = only(fake, bot, {"document": {**fake.host_file(b"data"), "file_name": "notes.md"}})
    fake.fail_next("getFile", 400, "Bad Request: wrong file_id or the file is temporarily unavailable")

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == ("Telegram did not hand over notes.md (Wrong file_id or the file is "
                                 "temporarily unavailable). Try sending it again.")
    assert fake.files.downloads == []


async def test_a_local_path_from_getfile_is_never_opened(fake: FakeTelegram, bot: Bot, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the bot")
    document = {**fake.host_file(b"x", file_path=str(secret)), "file_name": "secret.txt"}
    attachment = only(fake, bot, {"document": document})

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == "Telegram gave no download address for secret.txt, so it was not read."


async def test_a_hostile_file_name_is_only_a_name(
        fake: FakeTelegram, bot: Bot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "a" / "b"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    document = {**fake.host_file(b"payload"), "file_name": "../../x", "mime_type": "text/plain"}
    attachment = only(fake, bot, {"document": document})

    assert attachment.name == "../../x"
    assert await attachment.read(1000) == b"payload"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/b"]


async def test_other_messages_have_no_attachments(fake: FakeTelegram, bot: Bot) -> None:
    sticker = {"file_id": "s1", "file_unique_id": "us1", "width": 512, "height": 512,
               "is_animated": False, "is_video": False, "type": "regular"}
    for fields in ({"text": "hello"}, {"sticker": sticker}, {"location": {"latitude": 1.5, "longitude": 2.5}}):
        assert attachments_of(message(fake, bot, fields), bot) == ()
