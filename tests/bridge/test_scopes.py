"""Scope names (issue 15 #8): one function derives them, so the agent, the CLI and the banner agree."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import yaml
from support.bot import make_services

from channels import IncomingMessage
from channels.terminal import TerminalChannel

ROOT = Path(__file__).resolve().parents[2]


def group_message(channel: str, chat: str, thread: str, team: str | None = None) -> IncomingMessage:
    return IncomingMessage(channel=channel, chat_id=chat, chat_type="group", user_id="42", user_name="Ann",
                           text="hello", message_id="1", thread_id=thread, team=team)


def test_slack_thread_scope_splits_slack_threads_and_no_telegram_forum_topic(tmp_path) -> None:
    """#8a: ``channels.slack.thread_scope`` was applied to every channel, so each Telegram forum
    topic got a memory of its own."""
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", channels={"slack": {"thread_scope": True}})
    topic = services.agent.identify(group_message("telegram", "-100", thread="7"))
    thread = services.agent.identify(group_message("slack", "C1", thread="1700.1", team="T1"))
    assert (topic.scope, thread.scope) == ("telegram-chat--100", "slack-T1-chat-C1-1700.1")
    services.close()


async def terminal_message(user: str) -> IncomingMessage:
    """What the terminal channel hands the bot when ``user`` types a line."""
    received: asyncio.Queue[IncomingMessage] = asyncio.Queue()
    channel = TerminalChannel(user, stdin=io.StringIO("hi\n"), stdout=io.StringIO())
    await channel.start(received.put)
    message = await received.get()
    await channel.stop()
    return message


async def membridge(config: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), *args, cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode()


async def test_a_terminal_user_with_a_space_gets_one_scope_in_chat_cli_and_banner(tmp_path) -> None:
    """#8b: with ``channels.terminal.user: "alice smith"`` the agent used terminal-alice_smith while
    the CLI and the banner built terminal-alice smith, which is not a valid scope."""
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", channels={"terminal": {"user": "alice smith"}})
    chat_scope = services.agent.identify(await terminal_message("alice smith")).scope
    assert chat_scope == services.terminal_scope() == "terminal-alice_smith"
    services.close()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
        "llm": {"base_url": "http://127.0.0.1:9/v1", "api_key": "test-key", "max_retries": 0, "timeout_s": 5},
        "channels": {"terminal": {"user": "alice smith"}},
    }), encoding="utf-8")
    code, out = await membridge(config, "memory", "add", "my passport expires on 2027-03-01")
    assert code == 0 and "(scope terminal-alice_smith)" in out, out
    code, out = await membridge(config, "chat")
    assert code == 0 and "chatting as alice smith (memory scope terminal-alice_smith)" in out, out
