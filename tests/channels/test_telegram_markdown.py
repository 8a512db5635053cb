"""Markdown rendered as MarkdownV2 always parses the way Telegram parses it (the fake's parser)."""

from __future__ import annotations

from fakes.telegram_server import parse_markdown_v2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.telegram_markdown import to_markdown_v2

_MARKDOWNISH = st.lists(
    st.sampled_from(
        [*"ab _*[]()~`>#+-=|{}.!\\\n<&é😀", "http://x.y", "```", "- ", "1. ", "> ", "# ", "\n\n"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_MARKDOWNISH)
def test_rendered_markdown_always_parses(source: str) -> None:
    parse_markdown_v2(to_markdown_v2(source))  # raises what Telegram would refuse
