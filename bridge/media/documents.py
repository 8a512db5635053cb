"""Text out of a document: txt, md, csv, json, pdf (pypdf) and docx (python-docx), within limits.

Nothing here executes, renders or follows anything in a file: text files are decoded, a PDF's text
layer is read page by page, a docx's paragraphs and tables are read after its zip directory shows
that unpacking it stays small (a zip bomb is refused before any part is inflated). The file's name
only picks a parser and titles the note; it is never a path on this machine.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from bridge.config import MediaSettings
from channels import sizes_over

log = logging.getLogger(__name__)

DocumentType = Literal["text", "pdf", "docx"]
ACCEPTED = "txt, md, csv, json, pdf and docx"
_BY_SUFFIX: dict[str, DocumentType] = {
    ".txt": "text", ".text": "text", ".md": "text", ".markdown": "text", ".csv": "text", ".json": "text",
    ".pdf": "pdf", ".docx": "docx",
}
_BY_MIME: dict[str, DocumentType] = {
    "text/plain": "text", "text/markdown": "text", "text/csv": "text", "application/json": "text",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
#: A docx may unpack to at most this many times ``media.max_bytes`` (text compresses ~10x; a bomb ~1000x).
UNZIPPED_FACTOR = 4
MAX_ZIP_ENTRIES = 10_000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class DocumentError(ValueError):
    """The document cannot be used; ``str(exc)`` is said to the person as it is."""


@dataclass(frozen=True)
class Extracted:
    text: str
    pages: int | None  # a PDF's page count; None for other types


def safe_title(name: str) -> str:
    """The file's name fit to show in a note: its last component, no control characters, at most
    100 characters (``../../x`` is shown as ``x``)."""
    last = name.replace("\\", "/").rsplit("/", 1)[-1]
    title = " ".join(_CONTROL.sub("", last).split())[:100].strip(" .")
    return title or "file"


def document_type(name: str, mime_type: str) -> DocumentType | None:
    """Which parser reads the file (by its name's suffix, else its MIME type); None: not accepted."""
    suffix = PurePosixPath(safe_title(name)).suffix.lower()
    return _BY_SUFFIX.get(suffix) or _BY_MIME.get(mime_type.split(";", 1)[0].strip().lower())


def unsupported(name: str) -> str:
    return f"I can't read {safe_title(name)}: I read {ACCEPTED} files only."


def extract(kind: DocumentType, name: str, data: bytes, limits: MediaSettings) -> Extracted:
    """The document's text (blocking: run it in a thread), or a :class:`DocumentError`."""
    title = safe_title(name)
    try:
        if kind == "pdf":
            text, pages = _pdf_text(title, data, limits)
        elif kind == "docx":
            text, pages = _docx_text(title, data, limits), None
        else:
            text, pages = _plain_text(title, data), None
    except DocumentError:
        raise
    except Exception as exc:  # a parser's own error on a malformed file
        log.info("could not parse %s as %s: %s", title, kind, exc)
        raise DocumentError(f"I couldn't read {title}: it is not a valid {kind.upper()} file.") from None
    text = _CONTROL.sub("", text).strip()
    if not text:
        raise DocumentError(f"{title} has no text I can read (a scanned PDF holds only pictures of pages).")
    if len(text) > limits.max_text_chars:
        raise DocumentError(f"{title} holds {len(text):,} characters of text, over the limit of "
                            f"{limits.max_text_chars:,} (media.max_text_chars), so it was not saved.")
    return Extracted(text, pages)


def _plain_text(title: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise DocumentError(f"{title} is not a text file (it holds binary data).")
    return data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")


def _pdf_text(title: str, data: bytes, limits: MediaSettings) -> tuple[str, int]:
    """pypdf (>= 7) bounds what one file may unpack and the work per stream (75 MB by default): a
    PDF bomb is refused by those limits, as a docx bomb is by :func:`check_unzipped_size`."""
    from pypdf.errors import LimitReachedError

    try:
        return _pdf_pages_text(title, data, limits)
    except LimitReachedError as exc:
        log.info("%s hit a pypdf limit: %s", title, exc)
        raise DocumentError(f"{title} would unpack to more data than I read from one PDF (a compressed part "
                            "of it is too large), so it was not read.") from None


def _pdf_pages_text(title: str, data: bytes, limits: MediaSettings) -> tuple[str, int]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise DocumentError(f"{title} is password-protected, so I can't read it.")
    pages = len(reader.pages)
    if pages > limits.max_pages:
        raise DocumentError(f"{title} has {pages} pages, over the limit of {limits.max_pages} "
                            "(media.max_pages), so it was not read.")
    texts: list[str] = []
    total = 0
    for page in reader.pages:
        texts.append(page.extract_text() or "")
        total += len(texts[-1])
        if total > limits.max_text_chars:
            break  # over the text limit already: extract() refuses it without reading the rest
    return "\n\n".join(texts), pages


def _docx_text(title: str, data: bytes, limits: MediaSettings) -> str:
    check_unzipped_size(title, data, UNZIPPED_FACTOR * limits.max_bytes)
    import docx  # after the check: a bomb is refused without even loading the parser

    document = docx.Document(io.BytesIO(data))
    lines = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        lines.extend(" | ".join(cell.text for cell in row.cells) for row in table.rows)
    return "\n".join(lines)


def check_unzipped_size(title: str, data: bytes, limit: int) -> None:
    """Refuse a zip whose members would unpack past ``limit`` bytes, before inflating any of them.

    The sizes are the zip directory's; :mod:`zipfile` never inflates a member past its stated
    size (and fails its CRC check if the data says otherwise), so they bound the real work.
    """
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except zipfile.BadZipFile:
        raise DocumentError(f"I couldn't read {title}: it is not a valid DOCX file.") from None
    unpacked = sum(member.file_size for member in members)
    if len(members) > MAX_ZIP_ENTRIES or unpacked > limit:
        shown, allowed = sizes_over(unpacked, limit)
        raise DocumentError(f"{title} would unpack to {shown} in {len(members)} parts, over the limit of {allowed} "
                            "for a document, so it was not read.")
