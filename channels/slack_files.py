"""Slack attachments: files shared with a message, fetched only when read.

A ``file_share`` message (or a mention with files) lists file objects. :class:`SlackAttachment`
keeps what the event says; ``read`` asks ``files.info`` for the current private download URL and
size (the ``files:read`` scope), then GETs it with the bot token as a bearer header, streamed and
bounded (see :mod:`channels.download`). The token goes only to a Slack host (``*.slack.com``) or
the host of the configured API URL, never to wherever a URL in a file object points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from .base import Attachment, AttachmentError, AttachmentKind, AttachmentTooLarge
from .download import download, time_limited

__all__ = ["SlackAttachment", "attachment_from_wire", "attachments_of", "kind_of"]

#: How long one attachment's read (files.info and the download) may take.
DEFAULT_DOWNLOAD_TIMEOUT_S = 120.0
_SCOPE_HINT = "the Slack app needs the files:read scope (README, Slack setup)"
#: The fields of a file object an attachment keeps (and sends along to a cluster worker).
_KEPT = ("id", "name", "title", "mimetype", "size", "duration_ms")


class SlackAttachment(Attachment):
    """A file shared in Slack; ``read`` downloads it from its private URL with the bot token."""

    def __init__(self, file: Mapping[str, Any], *, client: AsyncWebClient, bot_token: str,
                 timeout_s: float) -> None:
        mime = str(file.get("mimetype") or "application/octet-stream")
        name = str(file.get("name") or file.get("title") or file.get("id") or "file")
        size = file.get("size")
        super().__init__(kind_of(mime), name, mime, size if isinstance(size, int) else None,
                         _duration(file))
        self.file_id = str(file.get("id") or "")
        self._file = {key: file[key] for key in _KEPT if key in file}
        self._client = client
        self._bot_token = bot_token
        self._timeout_s = timeout_s

    async def read(self, max_bytes: int) -> bytes:
        if self.size is not None and self.size > max_bytes:
            raise AttachmentTooLarge(self.name, self.size, max_bytes)
        async with time_limited(self.name, self._timeout_s):
            url = await self._private_url(max_bytes)
            return await download(url, name=self.name, max_bytes=max_bytes, platform="Slack",
                                  headers={"Authorization": f"Bearer {self._bot_token}"})

    def wire_source(self) -> dict[str, Any]:
        return {"file": self._file}

    async def _private_url(self, max_bytes: int) -> str:
        """``files.info``: the file's size now and where the bot may download it."""
        try:
            response = await self._client.files_info(file=self.file_id)
        except SlackApiError as exc:
            raise AttachmentError(_refusal(self.name, exc)) from exc
        except ClientError as exc:
            raise AttachmentError(f"Slack did not answer about {self.name} ({type(exc).__name__}). "
                                  "Try sending it again.") from exc
        info = response.get("file") or {}
        size = info.get("size")
        if isinstance(size, int) and size > max_bytes:
            raise AttachmentTooLarge(self.name, size, max_bytes)
        url = str(info.get("url_private_download") or info.get("url_private") or "")
        if not self._trusted(url):
            raise AttachmentError(f"Slack gave no download address on a Slack host for {self.name}, "
                                  "so it was not read.")
        return url

    def _trusted(self, url: str) -> bool:
        """Whether the bot token may be sent to ``url``: HTTPS to Slack, or the API's own host."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
            return True
        api = urlsplit(self._client.base_url)
        return bool(host) and (parts.scheme, parts.netloc) == (api.scheme, api.netloc)


def attachments_of(event: Mapping[str, Any], *, client: AsyncWebClient, bot_token: str,
                   timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S) -> tuple[SlackAttachment, ...]:
    """The files of a message event, in the order Slack lists them (none for a plain message)."""
    files: Sequence[Any] = event.get("files") or ()
    return tuple(SlackAttachment(file, client=client, bot_token=bot_token, timeout_s=timeout_s)
                 for file in files if isinstance(file, Mapping) and file.get("id"))


def attachment_from_wire(data: Mapping[str, Any], *, client: AsyncWebClient, bot_token: str,
                         timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S) -> SlackAttachment:
    """The attachment :meth:`SlackAttachment.to_wire` described, read through ``client``."""
    source = data.get("source")
    file = source.get("file") if isinstance(source, Mapping) else None
    if not isinstance(file, Mapping) or not file.get("id"):
        raise ValueError(f"not a Slack attachment: {data!r}")
    return SlackAttachment(file, client=client, bot_token=bot_token, timeout_s=timeout_s)


def kind_of(mime_type: str) -> AttachmentKind:
    """Audio files are transcribed, images looked at, anything else read as a document."""
    if mime_type.startswith("audio/"):
        return "audio"
    if mime_type.startswith("image/"):
        return "photo"
    return "document"


def _duration(file: Mapping[str, Any]) -> float | None:
    """Slack gives an audio clip's length in milliseconds (``duration_ms``), when it gives it."""
    millis = file.get("duration_ms")
    return millis / 1000 if isinstance(millis, int | float) else None


def _refusal(name: str, exc: SlackApiError) -> str:
    code = exc.response.get("error") if exc.response is not None else None
    if code in {"missing_scope", "not_allowed_token_type", "no_permission"}:
        return f"Slack did not let the bot read {name}: {_SCOPE_HINT}."
    if code == "file_not_found" or code == "file_deleted":
        return f"{name} is no longer on Slack, so it was not read."
    return f"Slack did not hand over {name} ({code or 'no answer'}). Try sending it again."
