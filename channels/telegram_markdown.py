"""Markdown as Telegram MarkdownV2: what the model writes, in the form Telegram formats.

The model answers in CommonMark. Telegram's MarkdownV2 is stricter (every reserved character
escaped where it is meant literally) and smaller (no headings, lists or tables), so answers are
parsed with markdown-it and written out again: styles, code and links as MarkdownV2 entities, the
rest as text that reads the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

__all__ = ["to_markdown_v2"]

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_TEXT_SPECIALS = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_CODE_SPECIALS = re.compile(r"([`\\])")
_URL_SPECIALS = re.compile(r"([)\\])")
_LINKABLE = re.compile(r"^(https?|tg)://", re.IGNORECASE)
_LANGUAGE = re.compile(r"[\w#+.-]+")
_STYLE_MARKS = {"strong": "*", "em": "_", "s": "~"}
_BULLET = "• "
_INDENT = "   "
_RULE = "──────────"


def to_markdown_v2(text: str) -> str:
    """Render Markdown as Telegram MarkdownV2.

    Every character Telegram reserves is escaped where it is meant literally; what Telegram has no
    entity for (headings, lists, tables, rules) becomes text that reads the same.
    """
    root = SyntaxTreeNode(_MARKDOWN.parse(text))
    return _blocks(root.children, separator="\n\n", quoted=False)


def _blocks(nodes: Sequence[SyntaxTreeNode], *, separator: str, quoted: bool) -> str:
    rendered = (_block(node, quoted=quoted) for node in nodes)
    return separator.join(part for part in rendered if part)


def _block(node: SyntaxTreeNode, *, quoted: bool) -> str:
    """``quoted``: already inside a quote or list, where a '>' line marker is impossible."""
    kind = node.type
    if kind == "paragraph":
        return _inline(node.children[0], frozenset()) if node.children else ""
    if kind == "heading":
        inner = _inline(node.children[0], frozenset({"strong"})) if node.children else ""
        return f"*{inner}*" if inner.strip() else inner
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind == "blockquote":
        inner = _blocks(node.children, separator="\n\n", quoted=True)
        return inner if quoted else "\n".join(">" + line for line in inner.split("\n"))
    if kind in ("fence", "code_block"):
        return _pre(node.content, node.info)
    if kind == "hr":
        return _RULE
    if kind == "table":
        return _table(node)
    return _escape(node.content)


def _list(node: SyntaxTreeNode) -> str:
    start = int(node.attrs.get("start", 1))
    items: list[str] = []
    for index, item in enumerate(node.children):
        marker = _BULLET if node.type == "bullet_list" else f"{start + index}\\. "
        parts = [_item_part(child) for child in item.children]
        body = "\n".join(part for part in parts if part)
        items.append(marker + body.removeprefix(_INDENT))
    return "\n".join(items)


def _item_part(node: SyntaxTreeNode) -> str:
    """A block inside a list item, indented under its marker; code keeps its own indentation."""
    rendered = _block(node, quoted=True)
    if node.type in ("fence", "code_block"):
        return rendered
    return "\n".join(_INDENT + line if line else line for line in rendered.split("\n"))


def _pre(content: str, info: str) -> str:
    if not content.strip():
        return ""
    language = _LANGUAGE.match(info.strip())
    body = _escape_code(content)
    if not body.endswith("\n"):
        body += "\n"
    return f"```{language.group() if language else ''}\n{body}```"


def _table(node: SyntaxTreeNode) -> str:
    """Telegram has no tables: the cells go into a monospaced block, columns padded to line up."""
    rows = [
        [_plain(cell) for cell in row.children]
        for section in node.children
        for row in section.children
    ]
    width = max(len(row) for row in rows)
    sizes = [max((len(row[i]) for row in rows if i < len(row)), default=0) for i in range(width)]
    lines = [
        " | ".join(cell.ljust(size) for cell, size in zip(row, sizes, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "-+-".join("-" * size for size in sizes))
    return _pre("\n".join(lines), "")


def _inline(node: SyntaxTreeNode, active: frozenset[str]) -> str:
    """Inline children of ``node``; ``active`` styles are not opened again inside themselves."""
    out = ""
    for child in node.children:
        piece = _inline_piece(child, active)
        if piece.startswith("_") and _ends_with_mark(out, "_"):
            out += "\r"  # "_a_" + "_b_" would read as "__" (underline); Telegram ignores \r
        out += piece
    return out


def _inline_piece(node: SyntaxTreeNode, active: frozenset[str]) -> str:
    kind = node.type
    if kind == "text":
        return _escape(node.content)
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        return f"`{_escape_code(node.content)}`"
    if kind in _STYLE_MARKS:
        inner = _inline(node, active | {kind})
        mark = _STYLE_MARKS[kind]
        return inner if kind in active or not inner.strip() else f"{mark}{inner}{mark}"
    if kind == "link":
        return _link(_inline(node, active), str(node.attrs.get("href", "")))
    if kind == "image":
        return _link(_escape(_plain(node)) or "image", str(node.attrs.get("src", "")))
    return _escape(node.content)


def _link(label: str, url: str) -> str:
    """Only URLs Telegram accepts become links; others are shown after the label."""
    url = str(url)
    if not _LINKABLE.match(url):
        shown = not url or url.startswith("mailto:")
        return label if shown else f"{label} \\({_escape(url)}\\)"
    return f"[{label or _escape(url)}]({_escape_url(url)})"


def _plain(node: SyntaxTreeNode) -> str:
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain(child) for child in node.children)


def _escape(text: str) -> str:
    return _TEXT_SPECIALS.sub(r"\\\1", text)


def _escape_code(text: str) -> str:
    """Inside code and pre only ` and \\ are special."""
    return _CODE_SPECIALS.sub(r"\\\1", text)


def _escape_url(url: str) -> str:
    """Inside a link's (...) only ) and \\ are special."""
    return _URL_SPECIALS.sub(r"\\\1", url)


def _ends_with_mark(text: str, mark: str) -> bool:
    """Whether ``text`` ends with an unescaped ``mark`` (an even run of backslashes before it)."""
    if not text.endswith(mark):
        return False
    head = text[: -len(mark)]
    return (len(head) - len(head.rstrip("\\"))) % 2 == 0
