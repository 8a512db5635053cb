"""What a knowledge page's markdown says: its title and the pages it links to.

Both read prose only: a ``# comment`` in a fenced shell snippet is not a title, and code that
looks like a link is not one. Links resolve as the knowledge graph and the console show them:
a markdown href against the page's folder, a ``[[reference]]`` by name (:func:`wiki_target`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from urllib.parse import unquote

from ..files.scopes import KNOWLEDGE_DIR
from .knowledge_names import PAGE_SUFFIX, KnowledgeError, page_path, parse_page

_HEADING_RE = re.compile(r"^ {0,3}# +(.*?)(?:\s+#+)?\s*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN_RE = re.compile(r"`[^`]*`")
_MD_LINK_RE = re.compile(r"(?<!!)\[[^\[\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)")
_WIKI_LINK_RE = re.compile(r"\[\[([^\[\]|#]+)(?:#[^\[\]|]*)?(?:\|[^\[\]]*)?\]\]")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _prose_lines(text: str) -> Iterator[str]:
    """Lines outside fenced code blocks: a ``# comment`` in a shell snippet is not a title."""
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE_RE.match(line)
        if match and fence is None:
            fence = match.group(1)
        elif match and fence is not None and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None
        elif fence is None:
            yield line


def page_title(text: str, slug: str) -> str:
    """The first ``# `` heading, else the slug."""
    for line in _prose_lines(text):
        match = _HEADING_RE.match(line)
        if match and match.group(1):
            return match.group(1)
    return slug


def link_targets(category: str, text: str, slugs: dict[str, list[str]]) -> Iterator[str]:
    """Page paths that a page in ``category`` links to (markdown and wiki links; may not exist).

    Inline code is cut out first: code that looks like a link is not one.
    """
    for prose in _prose_lines(text):
        line = _CODE_SPAN_RE.sub("", prose)
        for href in _MD_LINK_RE.findall(line):
            target = markdown_target(category, href)
            if target is not None:
                yield target
        for reference in _WIKI_LINK_RE.findall(line):
            target = wiki_target(category, reference.strip(), slugs)
            if target is not None:
                yield target


def markdown_target(category: str, href: str) -> str | None:
    """``href`` resolved against the page's folder, anchors dropped; None for URLs and non-pages."""
    if _SCHEME_RE.match(href) or href.startswith(("/", "#")):
        return None
    href = unquote(href.split("#", 1)[0].split("?", 1)[0])
    if not href.endswith(PAGE_SUFFIX):
        return None
    return posixpath.normpath(posixpath.join(KNOWLEDGE_DIR, category, href))


def wiki_target(category: str, reference: str, slugs: dict[str, list[str]]) -> str | None:
    """``[[cat/slug]]`` as named; ``[[slug]]`` in the same category first, else the first category having it."""
    if "/" in reference:
        try:
            return page_path(*parse_page(reference))
        except KnowledgeError:
            return None
    slug = reference[: -len(PAGE_SUFFIX)] if reference.endswith(PAGE_SUFFIX) else reference
    categories = slugs.get(slug, [])
    if category in categories:
        return page_path(category, slug)
    return page_path(categories[0], slug) if categories else None
