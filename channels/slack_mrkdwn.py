"""Markdown as Slack ``mrkdwn``: what the model writes, in the form Slack formats.

The model answers in CommonMark; Slack's ``mrkdwn`` has other marks (``*b*``, ``_i_``, ``~s~``,
``<url|label>``), no headings or lists, and reads ``&<>`` as markup. Each line is rewritten on its
own, with code spans and URLs set aside first so their characters are never taken for marks; fenced
code is only escaped. Telegram's counterpart is :mod:`channels.telegram_markdown`.
"""

from __future__ import annotations

import re

__all__ = ["escape_mrkdwn", "markdown_to_mrkdwn"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^\s{0,3}>(?:\s*>)*\s?")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(\s*<?([^\s)>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s>]+)>")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)(.+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_EMPHASIS_MARKS = re.compile(r"\*\*|__")
_STASHED = re.compile("\ue000(\\d+)\ue001")
_BOLD_MARK = "\ue002"  # stands in for "*" until italics are converted, so they stay bold
_RULE_TEXT = "──────────"


def markdown_to_mrkdwn(text: str) -> str:
    """Rewrite the Markdown an LLM writes into Slack's ``mrkdwn``.

    ``**b**`` → ``*b*``, ``*i*`` → ``_i_``, ``~~s~~`` → ``~s~``, ``[t](u)`` → ``<u|t>``,
    headings → bold lines, bullets → "•". ``&<>`` are escaped everywhere (Slack reads them as
    markup), which also keeps a model from writing live ``<!here>`` or ``<@U…>`` mentions.
    """
    lines: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            lines.append("```")  # Slack shows a language tag as code text, so it goes
        else:
            lines.append(escape_mrkdwn(line) if in_fence else _convert_line(line))
    return "\n".join(lines)


def _convert_line(line: str) -> str:
    quote = _QUOTE.match(line)
    prefix, body = ("> ", line[quote.end() :]) if quote else ("", line)
    if _RULE.match(body):
        return prefix + _RULE_TEXT
    heading = _HEADING.match(body)
    if heading:
        return f"{prefix}*{_inline(_EMPHASIS_MARKS.sub('', heading.group(1)))}*"
    bullet = _BULLET.match(body)
    if bullet:
        return f"{prefix}{bullet.group(1)}• {_inline(body[bullet.end() :])}"
    return prefix + _inline(body)


def _inline(text: str) -> str:
    """Convert emphasis and links in one line; code spans and URLs are kept out of the way."""
    stash: list[str] = []

    def keep(converted: str) -> str:
        stash.append(converted)
        return f"\ue000{len(stash) - 1}\ue001"

    text = _INLINE_CODE.sub(lambda m: keep(escape_mrkdwn(m.group(0))), text)
    text = _LINK.sub(lambda m: keep(_link(m.group(2), m.group(1))), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{escape_mrkdwn(m.group(1))}>"), text)
    text = escape_mrkdwn(text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group(1)}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1) or m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return _STASHED.sub(lambda m: stash[int(m.group(1))], text)


def _link(url: str, label: str) -> str:
    label = escape_mrkdwn(_EMPHASIS_MARKS.sub("", label)).replace("|", "/")
    return f"<{escape_mrkdwn(url)}|{label}>" if label.strip() else f"<{escape_mrkdwn(url)}>"


def escape_mrkdwn(text: str) -> str:
    """Plain text as mrkdwn: Slack reads ``&<>`` as markup (links, mentions), so they are escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
