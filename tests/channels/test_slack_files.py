"""Slack attachments read through the real slack_sdk client against FakeSlack.

The file objects are the fake's own (as a file_share event carries them); ``read`` goes over the
wire: files.info, then the private URL with the bot token. What the fake saw tells whether a
refused file cost a transfer and where the token went.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes.slack_server import BOT_TOKEN, FakeSlack
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import AttachmentError, AttachmentTooLarge
from channels.slack_files import SlackAttachment, attachments_of

STALL_TIMEOUT_S = 1.0  # the attachment's own deadline in the stall test; the fake holds until released


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)


def attached(client: AsyncWebClient, *files: dict[str, Any], timeout_s: float = 30.0) -> tuple[SlackAttachment, ...]:
    event = {"type": "message", "subtype": "file_share", "channel": "D0DIRECT", "user": "U0ALICE",
             "text": "", "ts": "1700000001.000100", "files": list(files)}
    return attachments_of(event, client=client, bot_token=BOT_TOKEN, timeout_s=timeout_s)


def info_calls(slack: FakeSlack) -> int:
    return sum(1 for call in slack.calls if call["method"] == "files.info")


async def test_each_file_becomes_an_attachment_of_its_kind(slack: FakeSlack, client: AsyncWebClient) -> None:
    clip = slack.host_file(b"webm-audio", name="audio_message.webm", mimetype="audio/webm", filetype="webm",
                           duration_ms=4500, subtype="slack_audio")
    image = slack.host_file(b"\x89PNG....", name="receipt.png", mimetype="image/png", filetype="png")
    pdf = slack.host_file(b"%PDF-1.7", name="rules.pdf", mimetype="application/pdf", filetype="pdf")
    unknown = slack.host_file(b"\x00\x01", name="blob", mimetype="", filetype="binary")

    found = attached(client, clip, image, pdf, unknown)

    assert [(a.kind, a.name, a.mime_type, a.size, a.duration_s) for a in found] == [
        ("audio", "audio_message.webm", "audio/webm", 10, 4.5),
        ("photo", "receipt.png", "image/png", 8, None),
        ("document", "rules.pdf", "application/pdf", 8, None),
        ("document", "blob", "application/octet-stream", 2, None),
    ]
    assert info_calls(slack) == 0 and slack.file_host.downloads == []  # nothing fetched until read


async def test_read_returns_the_exact_bytes_fetched_with_the_bot_token(
        slack: FakeSlack, client: AsyncWebClient) -> None:
    data = bytes(range(256)) * 1000
    [attachment] = attached(client, slack.host_file(data, name="blob.bin", mimetype="application/octet-stream"))

    assert await attachment.read(1_000_000) == data
    [download] = slack.file_host.downloads
    assert (download.authorization, download.status) == (f"Bearer {BOT_TOKEN}", 200)
    assert info_calls(slack) == 1


async def test_the_private_url_refuses_a_request_without_the_token(slack: FakeSlack) -> None:
    file = slack.host_file(b"secret", name="a.txt", mimetype="text/plain")
    async with aiohttp.ClientSession() as session:
        async with session.get(file["url_private_download"]) as anonymous:
            assert anonymous.status == 401
        async with session.get(file["url_private_download"], headers={"Authorization": "Bearer xoxb-other"}) as wrong:
            assert wrong.status == 401
        async with session.get(file["url_private"], headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as right:
            assert await right.read() == b"secret"


async def test_a_25_mb_file_is_refused_before_any_call(slack: FakeSlack, client: AsyncWebClient) -> None:
    [attachment] = attached(client, slack.host_file(b"never sent", name="talk.mp4", mimetype="video/mp4",
                                                    size=25_000_000))

    with pytest.raises(AttachmentTooLarge) as refused:
        await attachment.read(20_000_000)

    assert str(refused.value) == "talk.mp4 is 25 MB, over the limit of 20 MB, so it was not read."
    assert info_calls(slack) == 0 and slack.file_host.downloads == []


async def test_a_file_files_info_says_is_too_big_is_not_downloaded(slack: FakeSlack, client: AsyncWebClient) -> None:
    file = slack.host_file(b"grown", name="log.txt", mimetype="text/plain", size=25_000_000)
    [attachment] = attached(client, {**file, "size": 1000})  # the event said less than files.info does

    with pytest.raises(AttachmentTooLarge):
        await attachment.read(20_000_000)

    assert info_calls(slack) == 1 and slack.file_host.downloads == []


async def test_a_stalled_download_times_out(slack: FakeSlack, client: AsyncWebClient) -> None:
    file = slack.host_file(b"half and half", name="slow.txt", mimetype="text/plain")
    slack.file_host.files[f"{slack.team_id}-{file['id']}"].stall = True
    [attachment] = attached(client, file, timeout_s=STALL_TIMEOUT_S)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert slack.file_host.stalled.is_set()
    assert str(failed.value) == "Fetching slow.txt took longer than 1 s, so it was not read. Try again later."


async def test_a_download_500_is_a_clear_error(slack: FakeSlack, client: AsyncWebClient) -> None:
    file = slack.host_file(b"data", name="notes.md", mimetype="text/markdown")
    slack.file_host.files[f"{slack.team_id}-{file['id']}"].failures.append(500)
    [attachment] = attached(client, file)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == "Slack did not hand over notes.md (HTTP 500). Try sending it again."


@pytest.mark.parametrize(("error", "said"), [
    ("missing_scope", "Slack did not let the bot read notes.md: the Slack app needs the files:read scope "
                      "(README, Slack setup)."),
    ("file_not_found", "notes.md is no longer on Slack, so it was not read."),
    ("internal_error", "Slack did not hand over notes.md (internal_error). Try sending it again."),
])
async def test_a_files_info_error_is_a_clear_error(
        slack: FakeSlack, client: AsyncWebClient, error: str, said: str) -> None:
    [attachment] = attached(client, slack.host_file(b"data", name="notes.md", mimetype="text/markdown"))
    slack.fail_next("files.info", status=200, retry_after=None, error=error)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == said
    assert slack.file_host.downloads == []


async def test_the_token_is_not_sent_along_a_redirect_to_another_host(slack: FakeSlack, client: AsyncWebClient) -> None:
    elsewhere = slack.host_file(b"moved", name="moved.txt", mimetype="text/plain")
    file = slack.host_file(b"", name="a.txt", mimetype="text/plain")
    other_host = elsewhere["url_private_download"].replace("127.0.0.1", "localhost")
    slack.file_host.files[f"{slack.team_id}-{file['id']}"].redirect_to = other_host
    [attachment] = attached(client, file)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert [(d.authorization, d.status) for d in slack.file_host.downloads] == [
        (f"Bearer {BOT_TOKEN}", 302), (None, 401)]
    assert str(failed.value) == "Slack did not hand over a.txt (HTTP 401). Try sending it again."


async def test_a_redirect_on_the_same_host_keeps_the_token(slack: FakeSlack, client: AsyncWebClient) -> None:
    moved = slack.host_file(b"moved", name="moved.txt", mimetype="text/plain")
    file = slack.host_file(b"", name="a.txt", mimetype="text/plain")
    slack.file_host.files[f"{slack.team_id}-{file['id']}"].redirect_to = moved["url_private_download"]
    [attachment] = attached(client, file)

    assert await attachment.read(1000) == b"moved"
    assert [d.authorization for d in slack.file_host.downloads] == [f"Bearer {BOT_TOKEN}"] * 2


async def test_a_download_url_off_slack_is_not_given_the_token(slack: FakeSlack, client: AsyncWebClient) -> None:
    off_slack = slack.host_file(b"x", name="a.txt", mimetype="text/plain")
    off_slack["url_private_download"] = off_slack["url_private_download"].replace("127.0.0.1", "localhost")
    [attachment] = attached(client, off_slack)

    with pytest.raises(AttachmentError) as failed:
        await attachment.read(1000)

    assert str(failed.value) == "Slack gave no download address on a Slack host for a.txt, so it was not read."
    assert slack.file_host.downloads == []


async def test_a_hostile_file_name_is_only_a_name(
        slack: FakeSlack, client: AsyncWebClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "a" / "b"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    [attachment] = attached(client, slack.host_file(b"payload", name="../../x", mimetype="text/plain"))

    assert attachment.name == "../../x"
    assert await attachment.read(1000) == b"payload"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/b"]
