"""The fake OpenAI server's ``/audio/transcriptions``: the multipart form the real client sends.

Each request is recorded (model, file name, content type, bytes, response format); answers come
from a scripted queue of transcripts and HTTP errors, then the default transcript.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

DEFAULT_TRANSCRIPT = "hello from a voice note"


@dataclass(frozen=True)
class Transcription:
    """One recorded request."""

    model: str
    file_name: str
    content_type: str
    data: bytes
    response_format: str


class FakeTranscriptions:
    """Scripted speech-to-text; ``auth`` and ``failure`` are the server's own checks and errors."""

    def __init__(self, auth: Callable[[web.Request], web.Response | None],
                 failure: Callable[[int, float | None], web.Response]) -> None:
        self.requests: list[Transcription] = []
        self._auth = auth
        self._failure = failure
        self._queue: deque[str | tuple[int, float | None]] = deque()

    def transcript(self, text: str) -> None:
        """Queue the text the next transcription answers."""
        self._queue.append(text)

    def fail(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        """Queue ``times`` HTTP errors."""
        self._queue.extend((status, retry_after) for _ in range(times))

    async def handle(self, request: web.Request) -> web.Response:
        rejected = self._auth(request)
        if rejected is not None:
            return rejected
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "file is required", "type": "invalid_request_error",
                                                "param": "file", "code": None}}, status=400)
        self.requests.append(Transcription(str(form.get("model", "")), upload.filename, upload.content_type,
                                           upload.file.read(), str(form.get("response_format", "json"))))
        action = self._queue.popleft() if self._queue else DEFAULT_TRANSCRIPT
        if isinstance(action, tuple):
            return self._failure(*action)
        return self._answer(action, self.requests[-1].response_format)

    @staticmethod
    def _answer(text: str, response_format: str) -> web.Response:
        if response_format == "text":
            return web.Response(text=text, content_type="text/plain")
        body: dict[str, Any] = {"text": text}
        return web.json_response(body)
