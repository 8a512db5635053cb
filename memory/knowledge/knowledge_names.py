"""What the knowledge base accepts: page names, page content and the actors its log names.

A page is named ``<category>/<slug>`` (optionally ``knowledge/`` before and ``.md`` after). Each
part is letters of any script (with their combining marks), digits, ``-``, ``_`` and ``.``, and
starts with neither ``.`` nor a mark, so a name never leaves ``knowledge/``, never hides as a
dot-file and never takes the place of the base's own ``index.md`` and ``log.md``. Every refusal is
a :class:`KnowledgeError` whose message says what is allowed.
"""

from __future__ import annotations

import unicodedata

from ..files.scopes import KNOWLEDGE_DIR

#: The knowledge base's own files, at the top of ``knowledge/``: no page may take their names.
INDEX_FILE = "index.md"
LOG_FILE = "log.md"
MAX_PAGE_BYTES = 1024 * 1024
MAX_NAME_BYTES = 200  # per part; leaves room for ".md" and the temp-file affixes under NAME_MAX
PAGE_SUFFIX = ".md"
RESERVED_CATEGORIES = frozenset({KNOWLEDGE_DIR, INDEX_FILE, LOG_FILE})

_NAME_PUNCTUATION = frozenset("-_.")
_NAME_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Nd"})
_PROTECTED = frozenset({INDEX_FILE, LOG_FILE, INDEX_FILE[: -len(PAGE_SUFFIX)], LOG_FILE[: -len(PAGE_SUFFIX)]})
_ACTOR_MAX = 64


class KnowledgeError(ValueError):
    """A page name, content or request the knowledge base refuses; the message says what is allowed."""


def parse_page(page: object) -> tuple[str, str]:
    """``(category, slug)`` of a page name, or a :class:`KnowledgeError` saying what is wrong."""
    if not isinstance(page, str):
        raise KnowledgeError(f"a page name must be a string like 'tech/deploy', got {type(page).__name__}")
    if "\x00" in page:
        raise KnowledgeError(f"page name {page!r} contains a NUL byte")
    if "\\" in page:
        raise KnowledgeError(f"page name {page!r} contains a backslash; write it as '<category>/<slug>'")
    if page.startswith("/"):
        raise KnowledgeError(f"page name {page!r} is absolute; write it as '<category>/<slug>', e.g. 'tech/deploy'")
    parts = page.split("/")
    if ".." in parts:
        raise KnowledgeError(f"page name {page!r} contains '..'; pages cannot leave knowledge/")
    if len(parts) > 1 and parts[0] == KNOWLEDGE_DIR:
        parts = parts[1:]
    if len(parts) == 1 and parts[0] in _PROTECTED:
        raise KnowledgeError(
            f"{page!r} is kept by the knowledge service itself and cannot be written, moved or deleted"
        )
    if len(parts) != 2:
        raise KnowledgeError(
            f"page name {page!r} must be '<category>/<slug>' (optionally ending in .md), e.g. 'tech/deploy'"
        )
    category, slug = parts
    slug = slug[: -len(PAGE_SUFFIX)] if slug.endswith(PAGE_SUFFIX) else slug
    check_part(category, "category", page)
    check_part(slug, "slug", page)
    if category in RESERVED_CATEGORIES:
        raise KnowledgeError(f"page name {page!r}: {category!r} is reserved and cannot be a category")
    return category, slug


def part_problem(part: str, what: str) -> str | None:
    """Why ``part`` cannot be a category or slug, or None when it can."""
    if not part:
        return f"the {what} is empty"
    if part.startswith("."):
        return f"the {what} {part!r} starts with '.'"
    if unicodedata.category(part[0]).startswith("M"):
        return f"the {what} {part!r} starts with a combining mark"
    if len(part.encode("utf-8", errors="replace")) > MAX_NAME_BYTES:
        return f"the {what} is longer than {MAX_NAME_BYTES} bytes in UTF-8"
    bad = next((char for char in part if not _name_char(char)), None)
    if bad is not None:
        return f"the {what} {part!r} contains {bad!r}"
    return None


def _name_char(char: str) -> bool:
    """Letters of any script (with their combining marks), decimal digits, '-', '_' and '.'."""
    return char in _NAME_PUNCTUATION or unicodedata.category(char) in _NAME_CATEGORIES


def check_part(part: str, what: str, page: str) -> None:
    problem = part_problem(part, what)
    if problem is not None:
        raise KnowledgeError(
            f"page name {page!r}: {problem}; a {what} may use letters (any script), digits, '-', '_' "
            "and '.', not first"
        )


def page_path(category: str, slug: str) -> str:
    return f"{KNOWLEDGE_DIR}/{category}/{slug}{PAGE_SUFFIX}"


def check_actor(actor: object) -> str:
    """Actors go into space-separated log lines, so they must be one printable word."""
    if (
        not isinstance(actor, str)
        or not 0 < len(actor) <= _ACTOR_MAX
        or any(char.isspace() or not char.isprintable() for char in actor)
    ):
        raise KnowledgeError(
            f"actor {actor!r} must be 1-{_ACTOR_MAX} printable characters without spaces, e.g. 'telegram:1234'"
        )
    return actor


def encode_content(content: object) -> bytes:
    if not isinstance(content, str):
        raise KnowledgeError(f"page content must be a string, got {type(content).__name__}")
    if "\x00" in content:
        raise KnowledgeError("page content contains a NUL byte; pages are markdown text")
    too_big = f"page content is larger than {MAX_PAGE_BYTES} bytes in UTF-8; split it into several pages"
    if len(content) > MAX_PAGE_BYTES:
        raise KnowledgeError(too_big)
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KnowledgeError(f"page content is not valid Unicode (a lone surrogate at index {exc.start})") from exc
    if len(data) > MAX_PAGE_BYTES:
        raise KnowledgeError(too_big)
    return data
