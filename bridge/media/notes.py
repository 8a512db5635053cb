"""A document's text as memory: a note in the scope's daily memory, or (by an admin) a knowledge page.

The note is a block of the day's daily file: a heading with the file's (sanitised) name and the
message's marker (so a redelivery saves no second note), a short summary, then the text. The
ordinary index sync chunks and indexes it like any daily memory, so a search in that scope finds it
and no other scope does. The summary is the LLM's; without one (no model, or it failed) it is the
text's first lines.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime

from bridge import offload
from bridge.llm import LLMClient, LLMError, Message
from memory import KnowledgeError, KnowledgeService, MemoryManager

log = logging.getLogger(__name__)

SUMMARIZE = ("Summarise this document in at most three sentences: what it is and what it says that "
             "someone may want to find again. Answer with the summary only.")
SUMMARY_INPUT_CHARS = 12_000  # the summary reads the document's start; the whole text is indexed
MAX_SUMMARY_CHARS = 600
KNOWLEDGE_ADD = "/knowledge add"
_HEADING = re.compile(r"^(\s*)#", re.MULTILINE)


def as_note_text(text: str) -> str:
    """The document's text made inert inside a daily file: its headings cannot start sections of
    the file, and its ``<!--`` cannot pose as the markers the flush writes (``<!-- flush:N -->``)."""
    return _HEADING.sub(r"\1\\#", text).replace("<!--", "&lt;!--")


def first_lines(text: str, limit: int = 300) -> str:
    """The text's start, on one line, cut at a word near ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " …"


async def summarize(llm: LLMClient, title: str, text: str) -> str:
    """A short summary by the LLM, or the first lines when it cannot give one."""
    messages: list[Message] = [{"role": "system", "content": SUMMARIZE},
                               {"role": "user", "content": f"Document: {title}\n\n{text[:SUMMARY_INPUT_CHARS]}"}]
    try:
        answer = (await llm.complete(messages)).content
    except LLMError as exc:
        log.info("no summary of %s from the LLM (%s); using its first lines", title, exc)
        answer = ""
    summary = " ".join(answer.split())[:MAX_SUMMARY_CHARS]
    return summary or first_lines(text)


async def save_note(memory: MemoryManager, scope: str, title: str, summary: str, text: str,
                    when: datetime | None = None, *, message_key: str) -> None:
    """Append the document's note to the scope's daily memory (indexed at the next sync), once per
    message: its heading carries a marker made from ``message_key`` (the message's dedupe key), so
    the same message delivered again after a crash (before its delivery was recorded done) finds
    its note there and writes none. The marker is a hash: the chat's ids stay out of the note."""
    when = when or datetime.now()
    marker = f"<!-- note:{hashlib.sha256(message_key.encode()).hexdigest()[:16]} -->"
    block = (f"## {when:%H:%M} File: {as_note_text(title)} {marker}\nSummary: {as_note_text(summary)}\n\n"
             f"{as_note_text(text)}\n")
    await offload.run(memory.append_daily, scope, block, when=when, once=marker)


def knowledge_page(caption: str) -> str | None:
    """The page named by a ``/knowledge add <category>/<page>`` caption, '' when it names none,
    None when the caption is not that command."""
    words = caption.split()
    if " ".join(words[:2]) != KNOWLEDGE_ADD:
        return None
    return words[2] if len(words) == 3 else ""


async def save_page(knowledge: KnowledgeService, page: str, title: str, text: str, actor: str) -> str:
    """Write the document as knowledge page ``page``; returns what to say."""
    try:
        written = await offload.run(knowledge.write, page, f"# {title}\n\n{text}\n", actor=actor)
    except KnowledgeError as exc:
        return f"That page name doesn't work: {exc}"
    return f"Saved {title} as the knowledge page {written.path}."
