"""Hostile and odd input: every message is answered or refused cleanly, nothing crashes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.bot import dm

from bridge.config import ConfigError, parse_config
from channels import split_message


async def test_a_1_mb_message_is_refused_with_an_explanation(running, fake_llm) -> None:
    _, channel = await running()
    await channel.push(dm("x" * 1_000_000))
    [(reply, _)] = await channel.wait_sent(1)
    assert "too long for me (1,000,000 characters; the limit is 20,000)" in reply.text
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    "text",
    ["😀😀😀🎉", "مرحبا، كيف حالك؟ שלום", "null\x00byte\x00here", "\ufffd\ufffe binary-ish \x01\x02\x7f", "  \n\t ",
     "/memory search \x00", '{"json": [1, 2]} <script>alert(1)</script>', "A" * 19_999],
)
async def test_odd_messages_are_answered(running, fake_llm, text: str) -> None:
    _, channel = await running()
    fake_llm.responder = lambda r: "got it"
    await channel.push(dm(text))
    if not text.strip():
        assert channel.sent == [] or channel.texts() == []
        return
    [(reply, _)] = await channel.wait_sent(1)
    assert reply.text
    for request in fake_llm.requests:
        assert "\x00" not in request["messages"][-1]["content"]


async def test_garbage_from_the_llm_gives_a_clear_reply(running, fake_llm) -> None:
    _, channel = await running()
    fake_llm.garbage()
    await channel.push(dm("hello"))
    [(reply, _)] = await channel.wait_sent(1)
    assert "language model" in reply.text and "saved" in reply.text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=6000), st.integers(min_value=20, max_value=5000))
def test_split_message_keeps_everything_within_the_limit(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(len(part) <= limit for part in parts)
    # nothing is lost but whitespace at the cuts, of any kind: str.strip() also takes U+00A0 etc.
    assert _visible("".join(parts)) == _visible(text)


def _visible(text: str) -> str:
    return "".join(char for char in text if not char.isspace())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
                    max_leaves=20))
def test_the_config_loader_accepts_or_names_the_problem(data: object) -> None:
    try:
        parse_config(data)
    except ConfigError as exc:
        assert str(exc)
