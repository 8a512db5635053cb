"""One message's attachments in, the turn's text (and images) out, or the answer that says why not.

Every attachment is checked before any is downloaded (a feature that is off, a size or length over
a limit, a type no parser reads), and every one must be usable for the turn to run: a photo the
bot cannot see or a voice note it cannot hear would leave the caption answered out of context, so
a refusal answers the whole message and nothing of it is stored. A document is the exception that
is stored on its own: it becomes a note of daily memory (or a knowledge page) as it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from bridge import offload
from bridge.config import AppConfig
from bridge.llm import LLMClient, LLMError
from bridge.ops import metrics
from bridge.scopes import TurnIdentity
from channels import Attachment, AttachmentError, AttachmentTooLarge, IncomingMessage, Reply
from memory import KnowledgeService, MemoryManager

from . import documents, notes, photos
from .audio_length import measured_seconds
from .keep import keep_bytes
from .speech import SpeechError, Transcriber

README_SECTION = 'README "Voice, photos and files"'
VOICE_OFF = f"Voice notes are off: set speech.model (and speech.base_url) in config.yaml ({README_SECTION})."
AUDIO_OFF = f"Audio files are off: set speech.model (and speech.base_url) in config.yaml ({README_SECTION})."
PHOTO_OFF = f"Photos are off: set llm.vision: true in config.yaml for a model that sees images ({README_SECTION})."
FILES_IN_DM = "I read files in a direct message only: send it to me there and it becomes part of your memory."
NO_WORDS = "I couldn't hear any words in that recording."
ADMINS_ONLY = "Only an admin can add knowledge pages."
PAGE_USAGE = "Write the caption as /knowledge add <category>/<page>, e.g. /knowledge add tech/on-call."


#: The bounded ``reason`` label of ``membridge_media_total`` for each refusal known before a download.
_REFUSAL_REASONS = {VOICE_OFF: "speech_off", AUDIO_OFF: "speech_off", PHOTO_OFF: "vision_off",
                    FILES_IN_DM: "not_direct", ADMINS_ONLY: "admins_only", PAGE_USAGE: "no_page_name"}


class Refused(Exception):
    """An attachment cannot be used; ``str(exc)`` is said to the person."""


@dataclass(frozen=True)
class Prepared:
    """A message ready for the turn: its text says what its attachments held; ``images`` go to the
    model with this turn only (as ``data:`` URLs)."""

    message: IncomingMessage
    images: tuple[str, ...] = ()


@dataclass
class _Read:
    lines: list[str]
    images: list[str]
    said: list[str]  # what a document's storing says when no turn follows
    kept: list[tuple[bytes, str]]  # (bytes, MIME type) of each attachment read, for media.keep


class MediaIntake:
    """Turns a message's attachments into the turn's text, or into the answer that refuses them."""

    def __init__(self, config: AppConfig, *, llm: LLMClient, memory: MemoryManager,
                 knowledge: KnowledgeService) -> None:
        self.config = config
        self.llm = llm
        self.memory = memory
        self.knowledge = knowledge

    @cached_property
    def transcriber(self) -> Transcriber:
        return Transcriber(self.config.speech, self.config.llm)

    async def close(self) -> None:
        if "transcriber" in self.__dict__:
            await self.transcriber.close()

    async def prepare(self, message: IncomingMessage, who: TurnIdentity) -> Prepared | Reply:
        """``message`` with its attachments read into its text, or the reply that refuses them."""
        refusals = [self._refusal(attachment, message, who) for attachment in message.attachments]
        said = [text for text in refusals if text]
        if said:
            for attachment, text in zip(message.attachments, refusals, strict=True):
                if text:
                    metrics.MEDIA.labels(attachment.kind, "refused", _REFUSAL_REASONS.get(text, "limit_or_type")).inc()
            return self._reply("\n".join(dict.fromkeys(said)), message)
        done = _Read([], [], [], [])
        for attachment in message.attachments:
            try:
                await self._read(attachment, message, who, done)
            except (Refused, AttachmentError, SpeechError) as exc:
                metrics.MEDIA.labels(attachment.kind, "refused", _failure_reason(exc)).inc()
                return self._reply(" ".join([*done.said, str(exc)]), message)
            metrics.MEDIA.labels(attachment.kind, "ok", "").inc()
        await self._keep(who.scope, done.kept)
        caption = message.text.strip()
        if notes.knowledge_page(caption) is not None:
            caption = ""  # the caption was the files' command, not something to answer
        only_files = all(attachment.kind == "document" for attachment in message.attachments)
        if only_files and not caption:  # nothing to answer but that they were saved
            return self._reply(" ".join(done.said), message)
        text = "\n".join([line for line in done.lines if line] + ([caption] if caption else []))
        return Prepared(replace(message, text=text, attachments=()), tuple(done.images))

    @staticmethod
    def _reply(text: str, message: IncomingMessage) -> Reply:
        return Reply(text, thread_id=message.thread_id, reply_to=message.message_id, markdown=False)

    # ------------------------------------------------------------ checks (nothing downloaded)
    def _refusal(self, attachment: Attachment, message: IncomingMessage, who: TurnIdentity) -> str | None:
        """Why ``attachment`` cannot be used, known before downloading it, or None."""
        reason = self._kind_refusal(attachment, message, who)
        limit = self._limit(attachment)
        if reason is None and attachment.size is not None and attachment.size > limit:
            return str(AttachmentTooLarge(documents.safe_title(attachment.name), attachment.size, limit))
        return reason

    def _kind_refusal(self, attachment: Attachment, message: IncomingMessage, who: TurnIdentity) -> str | None:
        if attachment.kind in ("voice", "audio"):
            return self._speech_refusal(attachment)
        if attachment.kind == "photo":
            return None if self.config.llm.vision else PHOTO_OFF
        if documents.document_type(attachment.name, attachment.mime_type) is None:
            return documents.unsupported(attachment.name)
        return self._document_refusal(message, who)

    def _speech_refusal(self, attachment: Attachment) -> str | None:
        speech = self.config.speech
        if not speech.enabled:
            return VOICE_OFF if attachment.kind == "voice" else AUDIO_OFF
        if attachment.duration_s is not None:
            return self._length_refusal(attachment, attachment.duration_s)
        return None

    def _length_refusal(self, attachment: Attachment, seconds: float) -> str | None:
        """Why a recording of ``seconds`` is not transcribed (``speech.max_seconds``), or None."""
        limit = self.config.speech.max_seconds
        if seconds <= limit:
            return None
        what = "That voice note" if attachment.kind == "voice" else documents.safe_title(attachment.name)
        return (f"{what} is {_duration(seconds)} long, over the limit of {_duration(limit)} "
                "(speech.max_seconds), so it was not transcribed.")

    def _document_refusal(self, message: IncomingMessage, who: TurnIdentity) -> str | None:
        page = notes.knowledge_page(message.text)
        if page is None:
            return FILES_IN_DM if message.chat_type != "direct" else None
        if not who.is_admin:
            return ADMINS_ONLY
        return PAGE_USAGE if not page else None

    # ------------------------------------------------------------ reading
    async def _read(self, attachment: Attachment, message: IncomingMessage, who: TurnIdentity, done: _Read) -> None:
        data = await attachment.read(self._limit(attachment))
        if attachment.kind in ("voice", "audio"):
            done.lines.append(await self._hear(attachment, data))
        elif attachment.kind == "photo":
            line, url = await self._see(attachment, data, message.text.strip())
            done.lines.append(line)
            done.images.append(url)
        else:
            said, line = await self._file(attachment, data, message, who)
            done.said.append(said)
            done.lines.append(line)
        done.kept.append((data, attachment.mime_type))

    def _limit(self, attachment: Attachment) -> int:
        """The most bytes of ``attachment`` read (``speech.max_bytes`` for sound, else ``media.max_bytes``)."""
        return self.config.speech.max_bytes if attachment.kind in ("voice", "audio") else self.config.media.max_bytes

    async def _keep(self, scope: str, files: list[tuple[bytes, str]]) -> None:
        """``media.keep``: the bytes of a message whose attachments were all used."""
        if self.config.media.keep:
            for data, mime_type in files:
                await offload.run(keep_bytes, self.memory.workspace, scope, data, mime_type)

    async def _hear(self, attachment: Attachment, data: bytes) -> str:
        if attachment.duration_s is None:  # the channel did not say: the file's own headers do
            seconds = await offload.run(measured_seconds, data)
            too_long = None if seconds is None else self._length_refusal(attachment, seconds)
            if too_long:
                raise Refused(too_long)
        text = await self.transcriber.transcribe(documents.safe_title(attachment.name), data, attachment.mime_type)
        if not text:
            raise Refused(NO_WORDS)
        marker = "[voice note]" if attachment.kind == "voice" else f"[audio {documents.safe_title(attachment.name)}]"
        return f"{marker} {' '.join(text.split())}"

    async def _see(self, attachment: Attachment, data: bytes, caption: str) -> tuple[str, str]:
        url = photos.data_url(data, attachment.mime_type)
        try:
            description = await photos.describe(self.llm, url, caption)
        except LLMError as exc:
            raise Refused("I couldn't look at that photo: my language model did not answer "
                          f"({exc.kind}). Nothing was saved; please send it again in a moment.") from None
        return f"[photo: {description}]", url

    async def _file(self, attachment: Attachment, data: bytes, message: IncomingMessage,
                    who: TurnIdentity) -> tuple[str, str]:
        """Store the document; returns what to say when no turn follows, and its line for a turn."""
        kind = documents.document_type(attachment.name, attachment.mime_type)
        assert kind is not None  # checked by _refusal
        title = documents.safe_title(attachment.name)
        try:
            extracted = await offload.run(documents.extract, kind, attachment.name, data, self.config.media)
        except documents.DocumentError as exc:
            raise Refused(str(exc)) from None
        page = notes.knowledge_page(message.text)
        if page:
            return await notes.save_page(self.knowledge, page, title, extracted.text, who.user), ""
        summary = await notes.summarize(self.llm, title, extracted.text)
        await notes.save_note(self.memory, who.scope, title, summary, extracted.text, message_key=message.dedupe_key)
        return (f"Saved {title} to your memory ({_size(extracted)}). {summary}",
                f"[file {title}, saved to memory: {summary}]")


def _failure_reason(exc: Exception) -> str:
    """The bounded label of a failure while reading: the download, the speech server, or the content."""
    if isinstance(exc, AttachmentError):
        return "download"
    return "speech_failed" if isinstance(exc, SpeechError) else "unusable_content"


def _duration(seconds: float) -> str:
    """A recording's length as a person says it: seconds up to two minutes, then minutes."""
    return f"{seconds:.0f} seconds" if seconds < 120 else f"{seconds / 60:.1f} minutes"


def _size(extracted: documents.Extracted) -> str:
    chars = f"{len(extracted.text):,} characters"
    if not extracted.pages:
        return chars
    return f"{extracted.pages} page{'s' if extracted.pages != 1 else ''}, {chars}"
