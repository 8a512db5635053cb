"""One message's attachments in, the turn's text out, or the answer that says why not.

Every attachment of a message must be usable for the turn to run: a photo the bot cannot see or a
voice note it cannot hear would leave the caption answered out of context, so any refusal answers
the whole message (and stores nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from channels import Attachment, IncomingMessage, Reply

README_SECTION = 'README "Voice, photos and files"'
VOICE_OFF = f"Voice notes are off: set speech.base_url and speech.model in config.yaml ({README_SECTION})."
AUDIO_OFF = f"Audio files are off: set speech.base_url and speech.model in config.yaml ({README_SECTION})."
PHOTO_OFF = f"Photos are off: set llm.vision: true in config.yaml for a model that sees images ({README_SECTION})."
FILES_OFF = f"Files are not read yet ({README_SECTION})."


@dataclass(frozen=True)
class Prepared:
    """A message ready for the turn: its text now says what its attachments held."""

    message: IncomingMessage


class MediaIntake:
    """Turns a message's attachments into the turn's text, or into the answer that refuses them."""

    async def prepare(self, message: IncomingMessage) -> Prepared | Reply:
        """``message`` with its attachments read into its text, or the reply that refuses them."""
        refusals = [self._refusal(attachment) for attachment in message.attachments]
        said = [text for text in refusals if text]
        if said:
            return Reply("\n".join(dict.fromkeys(said)), reply_to=message.message_id, markdown=False)
        return Prepared(replace(message, attachments=()))

    def _refusal(self, attachment: Attachment) -> str | None:
        """Why ``attachment`` cannot be used (nothing of it is downloaded), or None."""
        return {"voice": VOICE_OFF, "audio": AUDIO_OFF, "photo": PHOTO_OFF}.get(attachment.kind, FILES_OFF)
