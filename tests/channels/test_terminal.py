"""The terminal channel on a real terminal: a paste the terminal cut is not answered as if whole."""

from __future__ import annotations

import asyncio
import io
import threading

from fakes import HANG_GUARD_S

from channels.base import IncomingMessage, OutgoingFile
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
    await asyncio.wait_for(closed.wait(), HANG_GUARD_S)
    await channel.stop()
    return received, screen.getvalue()


async def test_a_line_at_the_terminal_limit_is_refused_with_a_notice() -> None:
    cut = "x" * 4095  # what Linux delivers of a longer pasted line
    received, screen = await chat(f"hello\n{cut}\n{'é' * 2047}\nbye\n")
    assert received == ["hello", "é" * 2047, "bye"]  # 4,094 bytes: under the limit
    assert screen.count(CUT_LINE_NOTICE) == 1 and screen.startswith("you> ")


def test_describe_names_the_user() -> None:
    assert TerminalChannel("alice", stdin=io.StringIO()).describe() == "terminal: chatting as alice"


async def test_a_file_is_saved_beside_earlier_ones_never_over_them_and_the_chat_says_where(tmp_path) -> None:
    screen, folder = io.StringIO(), tmp_path / "downloads"
    folder.mkdir()
    (folder / "export.zip").write_bytes(b"an older export")
    source = tmp_path / "made.zip"
    source.write_bytes(b"PK\x03\x04 the new one")
    channel = TerminalChannel("alice", stdin=io.StringIO(), stdout=screen, files_dir=folder)
    to = IncomingMessage(channel="terminal", chat_id="alice", chat_type="direct", user_id="alice",
                         user_name="alice", text="/memory export", message_id="1")
    for _ in range(2):
        await channel.send_file(OutgoingFile(source, "export.zip", "application/zip"), to)
    assert (folder / "export.zip").read_bytes() == b"an older export"
    assert (folder / "export-1.zip").read_bytes() == (folder / "export-2.zip").read_bytes() == source.read_bytes()
    assert screen.getvalue().splitlines() == [f"saved export.zip as {folder / 'export-1.zip'}",
                                              f"saved export.zip as {folder / 'export-2.zip'}"]


class HeldKeyboard(Keyboard):
    """A terminal whose next line is typed only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting, self.typed = threading.Event(), threading.Event()
        self.reader: threading.Thread | None = None

    def readline(self, size: int | None = -1) -> str:
        self.reader = threading.current_thread()
        self.waiting.set()
        self.typed.wait(HANG_GUARD_S)
        return "typed after the bot stopped\n"


def test_a_line_typed_after_the_bot_stopped_ends_the_reader_quietly(monkeypatch) -> None:
    keyboard, failures, received = HeldKeyboard(), [], []
    monkeypatch.setattr(threading, "excepthook", failures.append)

    async def run_and_stop() -> None:
        channel = TerminalChannel("alice", stdin=keyboard, stdout=io.StringIO())

        async def on_message(message: IncomingMessage) -> None:
            received.append(message.text)

        await channel.start(on_message)
        await asyncio.to_thread(keyboard.waiting.wait, HANG_GUARD_S)
        await channel.stop()

    asyncio.run(run_and_stop())  # the loop is closed when this returns
    reader = keyboard.reader
    assert reader is not None
    keyboard.typed.set()
    reader.join(HANG_GUARD_S)
    assert not reader.is_alive() and failures == [] and received == []
