"""The terminal channel on a real terminal: a paste the terminal cut is not answered as if whole."""

from __future__ import annotations

import asyncio
import io

from channels.base import IncomingMessage
from channels.terminal import CUT_LINE_NOTICE, TerminalChannel


class Keyboard(io.StringIO):
    """Typed lines, as a terminal in canonical mode hands them over."""

    def isatty(self) -> bool:
        return True


async def chat(lines: str) -> tuple[list[str], str]:
    """Run the channel over ``lines`` until end of input: (messages received, the screen)."""
    screen, received, closed = io.StringIO(), [], asyncio.Event()

    async def on_message(message: IncomingMessage) -> None:
        received.append(message.text)

    channel = TerminalChannel("alice", stdin=Keyboard(lines), stdout=screen, on_close=closed.set)
    await channel.start(on_message)
    await asyncio.wait_for(closed.wait(), 10)
    await channel.stop()
    return received, screen.getvalue()


async def test_a_line_at_the_terminal_limit_is_refused_with_a_notice() -> None:
    cut = "x" * 4095  # what Linux delivers of a longer pasted line
    received, screen = await chat(f"hello\n{cut}\n{'é' * 2047}\nbye\n")
    assert received == ["hello", "é" * 2047, "bye"]  # 4,094 bytes: under the limit
    assert screen.count(CUT_LINE_NOTICE) == 1 and screen.startswith("you> ")


def test_describe_names_the_user() -> None:
    assert TerminalChannel("alice", stdin=io.StringIO()).describe() == "terminal: chatting as alice"
