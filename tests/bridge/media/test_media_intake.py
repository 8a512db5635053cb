"""Messages with attachments through the real bridge: each kind is answered clearly, nothing is
downloaded or stored for a refused one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.attachments import MemoryAttachment
from support.bot import dm
from support.media import stored, with_files

from bridge.media.intake import AUDIO_OFF, PHOTO_OFF, VOICE_OFF


@pytest.mark.parametrize(("kind", "name", "notice"), [
    ("voice", "voice.ogg", VOICE_OFF),
    ("audio", "song.mp3", AUDIO_OFF),
    ("photo", "photo.jpg", PHOTO_OFF),
])
async def test_an_attachment_whose_feature_is_off_is_answered_with_how_to_turn_it_on(
        running, fake_llm, kind, name, notice) -> None:
    bridge, channel = await running()
    attachment = MemoryAttachment(kind, name, b"\x00" * 100)
    await channel.push(replace(dm("what is this?", user="7"), attachments=(attachment,)))
    await channel.wait_sent(1)
    assert channel.texts() == [notice]
    assert 'README "Voice, photos and files"' in notice
    assert attachment.reads == 0 and fake_llm.requests == []
    assert stored(bridge, user="7") == []


async def test_a_message_with_two_refused_attachments_says_each_reason_once(running) -> None:
    _, channel = await running()
    files = (MemoryAttachment("voice", "a.ogg", b"1"), MemoryAttachment("voice", "b.ogg", b"2"),
             MemoryAttachment("photo", "c.jpg", b"3"))
    await channel.push(replace(dm(""), attachments=files))
    await channel.wait_sent(1)
    assert channel.texts() == [f"{VOICE_OFF}\n{PHOTO_OFF}"]


async def test_a_text_message_after_a_refused_attachment_is_answered_as_usual(running, fake_llm) -> None:
    _, channel = await running()
    await channel.push(replace(dm("look"), attachments=(MemoryAttachment("photo", "p.jpg", b"x"),)))
    fake_llm.reply("hello")
    await channel.push(dm("hi"))
    await channel.wait_sent(2)
    assert channel.texts() == [PHOTO_OFF, "hello"]


async def test_a_feature_that_is_off_is_said_before_a_size_over_its_limit(running) -> None:
    _, channel = await running()
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", b"", size=90_000_000)))
    await channel.wait_sent(1)
    assert channel.texts() == [VOICE_OFF]
