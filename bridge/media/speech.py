"""Speech to text: a voice note or an audio file through ``/audio/transcriptions``.

The official ``openai`` client talks to ``speech.base_url`` (any OpenAI-compatible server: OpenAI's
Whisper, a local faster-whisper server). Its own retries handle 429 and 5xx the way the LLM's do;
what still fails becomes a :class:`SpeechError` whose text is said to the person, without the key.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bridge.config import LLMSettings, SpeechSettings
from bridge.redaction import redact

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)


class SpeechError(RuntimeError):
    """A transcription failed; ``str(exc)`` is said to the person as it is."""


class Transcriber:
    """One audio file in, its text out, through the configured speech server."""

    def __init__(self, settings: SpeechSettings, llm: LLMSettings) -> None:
        import openai

        self.settings = settings
        self._key = settings.api_key or llm.api_key
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url or llm.base_url, api_key=self._key or "not-set",
            timeout=settings.timeout_s, max_retries=llm.max_retries,
        )

    async def close(self) -> None:
        await self._client.close()

    async def transcribe(self, name: str, data: bytes, mime_type: str) -> str:
        """The spoken text of ``data`` (stripped; empty when nothing was said)."""
        import openai

        assert self.settings.model is not None  # a Transcriber is only made when speech is on
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.settings.model, file=(name, data, mime_type), response_format="json")
        except openai.APIError as exc:
            raise self._translate(exc) from None
        return str(getattr(result, "text", result) or "").strip()

    def _translate(self, exc: openai.APIError) -> SpeechError:
        import openai

        log.warning("transcription failed: %s", redact(str(exc), self._key))
        if isinstance(exc, openai.APITimeoutError):
            return SpeechError(f"The speech server did not answer within {self.settings.timeout_s:.0f}s, "
                               "so I could not hear that. Please try again in a moment.")
        if isinstance(exc, openai.APIConnectionError):
            return SpeechError("I can't reach the speech server right now, so I could not hear that. "
                               "Please try again in a moment.")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return SpeechError("The speech server rejected my credentials (the operator needs to fix "
                               "speech.api_key), so I could not hear that.")
        if isinstance(exc, openai.RateLimitError):
            return SpeechError("The speech server is busy (rate-limited), so I could not hear that. "
                               "Please try again in a minute.")
        status = getattr(exc, "status_code", None)
        return SpeechError(f"The speech server failed{f' (HTTP {status})' if status else ''}, so I could not "
                           "hear that. Nothing was saved; please try again.")
