"""Photos for a model that sees: an image content part for the turn, a line of text for memory.

The turn's request carries the photo as a ``data:`` URL; what is stored and remembered is text
only. That text is the model's one-line description, asked for in a small completion of its own
before the turn (so the stored user message is complete before the answer, as every turn's is),
followed by the caption. A later request re-sends the description, never the image.
"""

from __future__ import annotations

import base64
from typing import Any

from bridge.llm import LLMClient, Message

DESCRIBE = ("Describe this photo in one line of at most 25 words, naming what it shows (objects, text, "
            "place, kind of plant or animal) so it can be found later by a search for those words. "
            "Answer with the line only.")
MAX_DESCRIPTION_CHARS = 300
_IMAGE_MIMES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})


def data_url(data: bytes, mime_type: str) -> str:
    """The photo as a ``data:`` URL (JPEG unless the channel said another image type)."""
    mime = mime_type.split(";", 1)[0].strip().lower()
    return f"data:{mime if mime in _IMAGE_MIMES else 'image/jpeg'};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def with_images(message: Message, images: tuple[str, ...]) -> Message:
    """A copy of the user ``message`` whose content is its text followed by the images as parts."""
    text = message.get("content") or ""
    parts: list[dict[str, Any]] = [{"type": "text", "text": str(text)}, *(image_part(url) for url in images)]
    return {**message, "content": parts}


async def describe(llm: LLMClient, url: str, caption: str) -> str:
    """The model's one-line description of the photo (raises the LLM's error when it fails)."""
    user: Message = {"role": "user", "content": f"Caption: {caption}" if caption else "(no caption)"}
    messages: list[Message] = [{"role": "system", "content": DESCRIBE}, with_images(user, (url,))]
    answer = (await llm.complete(messages)).content
    line = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    return line.removeprefix("Photo:").strip()[:MAX_DESCRIPTION_CHARS] or "a photo"
