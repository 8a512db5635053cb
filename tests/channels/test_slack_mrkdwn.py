"""Markdown rewritten as Slack mrkdwn: marks, links, headings, bullets, code and escaping."""

from __future__ import annotations

from channels.slack_mrkdwn import markdown_to_mrkdwn


def test_markdown_becomes_mrkdwn() -> None:
    markdown = (
        "# Plan & *scope*\n"
        "**Bold**, *italic*, ***both***, ~~gone~~ and snake_case_name.\n"
        "- see [the docs](https://example.com/a?b=1&c=2) or <https://example.org>\n"
        "* `x < y && z` stays code\n"
        "> quoted **bit**\n"
        "```python\n"
        "if a < b:\n"
        "```\n"
        "<!here> 2 * 3 * 4"
    )
    assert markdown_to_mrkdwn(markdown) == (
        "*Plan &amp; _scope_*\n"
        "*Bold*, _italic_, *_both_*, ~gone~ and snake_case_name.\n"
        "• see <https://example.com/a?b=1&amp;c=2|the docs> or <https://example.org>\n"
        "• `x &lt; y &amp;&amp; z` stays code\n"
        "> quoted *bit*\n"
        "```\n"
        "if a &lt; b:\n"
        "```\n"
        "&lt;!here&gt; 2 * 3 * 4"
    )
