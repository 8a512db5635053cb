"""Knowledge pages as HTML for the console: markdown rendered safely, links that navigate.

Pages hold whatever a chat or a model wrote, so the HTML is built to be inert whatever the text:
raw HTML in the markdown is escaped (markdown-it's ``html`` option is off), link schemes other than
http(s) and mailto are refused (``javascript:``, ``data:``… stay text), and images are not loaded
(an image is shown as its link). Links to other pages, ``[[wiki]]`` or relative ``page.md``, resolve
by the knowledge base's own rules (:meth:`memory.knowledge.knowledge.KnowledgeService.link_resolver`) and
carry a ``data-page`` attribute and an address of the console (``#/knowledge/<category>/<slug>``),
and a ``[[link]]`` without a label reads as the page's title; a link to no page is marked dead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

Resolver = Callable[[str, bool], "str | None"]
_EXTERNAL = ("http://", "https://", "mailto:")
_DEAD_TITLE = "no such page in the knowledge base"


def render_page(text: str, resolve: Resolver, titles: Mapping[str, str]) -> str:
    """``text`` (markdown) as safe HTML, its page links resolved with ``resolve(link, wiki)``;
    ``titles`` (page path → title) names the pages a bare ``[[link]]`` leads to."""
    return str(_markdown().render(text, {"resolve": resolve, "titles": titles}))


def page_address(path: str) -> str:
    """The console's address of a page: ``knowledge/tech/deploy.md`` → ``#/knowledge/tech/deploy``."""
    return "#/" + path.removesuffix(".md")


@cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"]).disable("image")
    md.validateLink = _allowed_link  # type: ignore[method-assign]  # markdown-it's documented hook
    md.inline.ruler.before("link", "wikilink", _wikilink)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("link_open", _render_link_open)
    return md


def _allowed_link(url: str) -> bool:
    """Web and mail links, and relative ones (pages); every other scheme stays plain text."""
    lowered = url.strip().lower()
    return lowered.startswith(_EXTERNAL) or ":" not in lowered.split("/", 1)[0]


def _wikilink(state: StateInline, silent: bool) -> bool:
    """``[[reference]]``, ``[[reference|label]]`` or ``[[reference#part]]`` on one line."""
    start = state.pos
    if not state.src.startswith("[[", start):
        return False
    end = state.src.find("]]", start + 2)
    inner = state.src[start + 2 : end] if end > 0 else ""
    if not inner.strip() or any(char in inner for char in "[]\n"):
        return False
    if not silent:
        reference, _bar, label = inner.partition("|")
        token = state.push("wikilink", "", 0)
        token.meta = {"reference": reference.split("#", 1)[0], "label": label.strip() or None}
    state.pos = end + 2
    return True


def _render_wikilink(renderer: RendererHTML, tokens: Sequence[Token], index: int, options: OptionsDict,
                     env: EnvType) -> str:
    meta: dict[str, Any] = tokens[index].meta
    target = env["resolve"](meta["reference"], True)
    label = escapeHtml(meta["label"] or env["titles"].get(target) or meta["reference"].strip())
    if target is None:
        return f'<span class="dead-link" title="{_DEAD_TITLE}">{label}</span>'
    return (f'<a href="{escapeHtml(page_address(target))}" class="page-link" data-page="{escapeHtml(target)}">'
            f'{label}</a>')


def _render_link_open(renderer: RendererHTML, tokens: Sequence[Token], index: int, options: OptionsDict,
                      env: EnvType) -> str:
    """A page link gets ``data-page``; a web link opens apart, with no referrer; any other is dead."""
    token = tokens[index]
    href = str(token.attrGet("href") or "")
    if href.lower().startswith(_EXTERNAL):
        token.attrSet("target", "_blank")
        token.attrSet("rel", "noopener noreferrer")
        return renderer.renderToken(tokens, index, options, env)
    target = env["resolve"](href, False)
    token.attrs = {}
    if target is None:
        token.attrSet("class", "dead-link")
        token.attrSet("title", _DEAD_TITLE)
    else:
        token.attrSet("href", page_address(target))
        token.attrSet("class", "page-link")
        token.attrSet("data-page", target)
    return renderer.renderToken(tokens, index, options, env)
