"""Voice notes and audio files: transcribed through the real openai client against the fake's
/audio/transcriptions, answered as the turn's text, remembered like typed text; refusals cost no
download and store nothing."""

from __future__ import annotations

import io
import re
import wave

import pytest
from support.attachments import MemoryAttachment
from support.media import echo_summary, stored, with_files

from bridge.media.intake import NO_WORDS

OGG = b"OggS\x00\x02" + bytes(range(256)) * 40


def wav(seconds: float, rate: int = 8000) -> bytes:
    """A real WAV file of ``seconds`` of silence (mono, 16-bit): its header states its length."""
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(b"\x00\x00" * int(seconds * rate))
    return out.getvalue()


def speech_on(fake_llm, **limits) -> dict:
    return {"speech": {"model": "whisper-1", "base_url": fake_llm.base_url, **limits}}


async def test_a_voice_note_is_answered_from_its_transcript_and_found_later_by_memory_search(
        running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    fake_llm.audio.transcript("Remember that the plumber comes on Thursday at nine")
    fake_llm.responder = echo_summary
    fake_llm.reply("Noted: the plumber comes Thursday at 9.")
    await channel.push(with_files("", MemoryAttachment("voice", "voice.ogg", OGG, "audio/ogg", duration_s=4)))
    await channel.wait_sent(1)
    assert channel.texts() == ["Noted: the plumber comes Thursday at 9."]
    [heard] = fake_llm.audio.requests
    assert (heard.model, heard.file_name, heard.content_type, heard.data) == ("whisper-1", "voice.ogg", "audio/ogg", OGG)
    said = "[voice note] Remember that the plumber comes on Thursday at nine"
    assert fake_llm.requests[0]["messages"][-1] == {"role": "user", "content": said}
    assert stored(bridge)[0] == {"role": "user", "content": said}
    await channel.push(with_files("/clear"))
    await channel.wait_sent(2)
    await bridge.services.flush_worker.drain()
    await channel.push(with_files("/memory search plumber Thursday"))
    await channel.wait_sent(3)
    assert "[voice note] Remember that the plumber comes on Thursday at nine" in channel.texts()[2]


async def test_an_audio_file_with_a_caption_is_marked_with_its_name(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    fake_llm.audio.transcript("  the quarterly numbers\nlook fine  ")
    await channel.push(with_files("summarise please", MemoryAttachment("audio", "../../call.mp3", OGG, "audio/mpeg")))
    await channel.wait_sent(1)
    assert stored(bridge)[0]["content"] == "[audio call.mp3] the quarterly numbers look fine\nsummarise please"
    assert fake_llm.audio.requests[0].file_name == "call.mp3"


@pytest.mark.parametrize(("attachment", "words"), [
    (MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg", duration_s=601),
     "That voice note is 10.0 minutes long, over the limit of 10.0 minutes (speech.max_seconds)"),
    (MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg", size=26_000_000), "26 MB, over the limit of 25 MB"),
])
async def test_past_max_seconds_or_max_bytes_is_refused_before_any_download(
        running, fake_llm, attachment, words) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    await channel.push(with_files("", attachment))
    await channel.wait_sent(1)
    assert words in channel.texts()[0]
    assert attachment.reads == 0 and fake_llm.audio.requests == [] and fake_llm.requests == []
    assert stored(bridge) == []


async def test_a_recording_whose_channel_gave_no_length_is_measured_and_refused_past_max_seconds(
        running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm, max_seconds=90))
    attachment = MemoryAttachment("audio", "standup.wav", wav(95), "audio/wav")
    await channel.push(with_files("summarise please", attachment))
    await channel.wait_sent(1)
    assert channel.texts() == ["standup.wav is 95 seconds long, over the limit of 90 seconds "
                               "(speech.max_seconds), so it was not transcribed."]
    assert fake_llm.audio.requests == [] and fake_llm.requests == [] and stored(bridge) == []


async def test_a_measured_recording_within_max_seconds_is_transcribed(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm, max_seconds=90))
    fake_llm.audio.transcript("ship it on Friday")
    await channel.push(with_files("", MemoryAttachment("audio", "standup.wav", wav(85), "audio/wav")))
    await channel.wait_sent(1)
    assert fake_llm.audio.requests[0].file_name == "standup.wav"
    assert stored(bridge)[0]["content"] == "[audio standup.wav] ship it on Friday"


async def test_the_channels_length_is_trusted_over_the_files_headers(running, fake_llm) -> None:
    """Telegram and Slack say how long a clip is before it is downloaded; that is the length used."""
    bridge, channel = await running(**speech_on(fake_llm, max_seconds=90))
    fake_llm.audio.transcript("short")
    await channel.push(with_files("", MemoryAttachment("voice", "v.wav", wav(95), "audio/wav", duration_s=30)))
    await channel.wait_sent(1)
    assert len(fake_llm.audio.requests) == 1
    assert stored(bridge)[0]["content"] == "[voice note] short"


async def test_a_stream_past_max_bytes_is_refused_when_its_size_was_unknown(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm, max_bytes=5000))
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg", size=None)))
    await channel.wait_sent(1)
    [said] = channel.texts()
    assert re.fullmatch(r"v\.ogg is \d+(\.\d)? KB, over the limit of 5 KB, so it was not read\.", said), said
    assert fake_llm.audio.requests == [] and stored(bridge) == []


async def test_a_transcription_500_is_retried_like_the_llm_then_answered_clearly_with_nothing_stored(
        running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    fake_llm.audio.fail(500, times=3, retry_after=0)  # llm.max_retries is 2: three tries in all
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg")))
    await channel.wait_sent(1)
    assert channel.texts() == ["The speech server failed (HTTP 500), so I could not hear that. "
                               "Nothing was saved; please try again."]
    assert len(fake_llm.audio.requests) == 3 and fake_llm.requests == [] and stored(bridge) == []


async def test_a_429_then_success_is_answered(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    fake_llm.audio.fail(429, retry_after=0)
    fake_llm.audio.transcript("ping")
    fake_llm.reply("pong")
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg")))
    await channel.wait_sent(1)
    assert channel.texts() == ["pong"] and len(fake_llm.audio.requests) == 2
    assert stored(bridge)[0]["content"] == "[voice note] ping"


async def test_silence_is_said_and_not_stored(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    fake_llm.audio.transcript("   ")
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg")))
    await channel.wait_sent(1)
    assert channel.texts() == [NO_WORDS] and stored(bridge) == []


async def test_a_download_failure_is_said_as_the_channel_worded_it(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm))
    broken = MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg", fail="Telegram did not send the file in time.")
    await channel.push(with_files("", broken))
    await channel.wait_sent(1)
    assert channel.texts() == ["Telegram did not send the file in time."] and stored(bridge) == []


async def test_with_media_keep_a_recording_that_failed_is_not_kept(running, fake_llm) -> None:
    bridge, channel = await running(**speech_on(fake_llm), media={"keep": True})
    fake_llm.audio.fail(500, times=3, retry_after=0)
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg")))
    fake_llm.audio.transcript("second try")
    await channel.push(with_files("", MemoryAttachment("voice", "v.ogg", OGG, "audio/ogg")))
    await channel.wait_sent(2)
    [kept] = bridge.services.workspace.media_dir("telegram-42").iterdir()
    assert kept.read_bytes() == OGG and kept.suffix == ".ogg"
