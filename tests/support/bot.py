"""A real membridge stack (Services) on a temp workspace, talking to the fake OpenAI server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bridge.config import parse_config
from bridge.wiring.app import Services
from channels import IncomingMessage


def make_config(workspace: Path, llm_url: str, **overrides: Any) -> Any:
    data: dict[str, Any] = {
        "workspace": str(workspace),
        "llm": {"base_url": llm_url, "api_key": "test-key", "model": "fake-model", "max_retries": 2, "timeout_s": 10},
        "embedding": {"provider": "none"},
    }
    for key, value in overrides.items():
        section, _, leaf = key.partition("__")
        if leaf:
            data.setdefault(section, {})[leaf] = value
        else:
            data[section] = value
    return parse_config(data)


def make_services(workspace: Path, llm_url: str, **overrides: Any) -> Services:
    return Services(make_config(workspace, llm_url, **overrides))


_counter = iter(range(1, 10**9))


def dm(text: str, user: str = "42", channel: str = "telegram", name: str = "Ann") -> IncomingMessage:
    return IncomingMessage(channel=channel, chat_id=user, chat_type="direct", user_id=user, user_name=name,
                           text=text, message_id=str(next(_counter)))


def group(text: str, chat: str = "-100", user: str = "42", channel: str = "telegram") -> IncomingMessage:
    return IncomingMessage(channel=channel, chat_id=chat, chat_type="group", user_id=user, user_name="Ann",
                           text=text, message_id=str(next(_counter)))


def system_prompt(request: dict[str, Any]) -> str:
    return request["messages"][0]["content"]


def is_summary_request(request: dict[str, Any]) -> bool:
    return "You keep a person's daily memory" in request["messages"][0]["content"]


FLUSH_SUMMARY = "- started learning the cello"
DREAM_ANSWER = "[MEMORY]\n- learning the cello\n[DREAM]\nmusic"


async def trim_a_turn(telegram: Any, llm: Any) -> None:
    """With ``context.max_turns: 1``, telegram user 501's two turns: the second trims the first, whose
    flush job the fake model will summarise as :data:`FLUSH_SUMMARY`."""
    llm.reply("Noted.")
    telegram.push_text(501, 501, "I started learning the cello today")
    await telegram.wait_sent(1)
    llm.reply("Nice.")
    llm.reply(FLUSH_SUMMARY)
    telegram.push_text(501, 501, "and I like green tea")
    await telegram.wait_sent(2)
