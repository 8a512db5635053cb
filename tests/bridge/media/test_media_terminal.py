"""The terminal's ``/attach PATH [caption]``: a local file through the same pipeline as a chat
platform's attachment, with clear errors for a path that cannot be attached."""

from __future__ import annotations

import asyncio
import io
import sys

import pytest
from fakes import HANG_GUARD_S
from support.bot import make_services
from support.documents import tiny_pdf

from bridge.media.intake import PHOTO_OFF
from bridge.wiring.runtime import Bridge
from channels.local_file import kind_of
from channels.terminal import ATTACH_USAGE, TerminalChannel
from plugins import PluginRegistry
from plugins.builtin.commands import CommandsPlugin


class Screen(io.StringIO):
    """The terminal's output; each write wakes the test waiting for a text to appear."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        self.changed.set()
        return written

    async def shows(self, count: int, text: str) -> str:
        async def until() -> None:
            while self.getvalue().count(text) < count:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), HANG_GUARD_S)
        return self.getvalue()


async def terminal_chat(tmp_path, fake_llm, lines: str, wait_for: str, count: int = 1) -> str:
    """Run a real bridge with the terminal reading ``lines``; the screen once ``wait_for`` shows ``count`` times."""
    services = make_services(tmp_path / "ws", fake_llm.base_url)
    screen = Screen()
    channel = TerminalChannel("alice", stdin=io.StringIO(lines), stdout=screen)
    bridge = Bridge(services, [channel], PluginRegistry([CommandsPlugin(None)]))
    await bridge.start(timer=False)
    try:
        return await screen.shows(count, wait_for)
    finally:
        await bridge.shutdown()


async def test_an_attached_pdf_is_saved_to_memory_and_found(tmp_path, fake_llm) -> None:
    folder = tmp_path / "my files"
    folder.mkdir()
    (folder / "boiler.pdf").write_bytes(tiny_pdf("Boiler service code is 7713"))
    fake_llm.reply("Boiler manual.")
    screen = await terminal_chat(tmp_path, fake_llm, f'/attach "{folder}/boiler.pdf"\n/memory search boiler code\n',
                                 "> Boiler service code is 7713")
    assert "Saved boiler.pdf to your memory (1 page, 27 characters). Boiler manual.\n" in screen


@pytest.mark.parametrize(("line", "said"), [
    ("/attach {tmp}/nothing.txt", "There is no file at {tmp}/nothing.txt."),
    ("/attach {tmp}", "{tmp} is not a file."),
    ("/attach", ATTACH_USAGE),
    ('/attach "{tmp}/unclosed', ATTACH_USAGE),
    ("/attach {tmp}/cat.jpg what is this?", PHOTO_OFF),
])
async def test_what_cannot_be_attached_is_said_and_nothing_reaches_the_model(tmp_path, fake_llm, line, said) -> None:
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    tmp = str(tmp_path)
    screen = await terminal_chat(tmp_path, fake_llm, line.format(tmp=tmp) + "\n", said.format(tmp=tmp))
    assert said.format(tmp=tmp) in screen and fake_llm.requests == []


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/mem is Linux's")
async def test_a_file_that_fails_to_read_is_said(tmp_path, fake_llm) -> None:
    """/proc/self/mem is a readable regular file whose read at offset 0 fails (even for root)."""
    (tmp_path / "mem.txt").symlink_to("/proc/self/mem")
    screen = await terminal_chat(tmp_path, fake_llm, f"/attach {tmp_path}/mem.txt\n", "I couldn't read")
    assert f"I couldn't read {tmp_path}/mem.txt: Input/output error." in screen and fake_llm.requests == []


def test_the_kind_follows_the_extension(tmp_path) -> None:
    assert [kind_of(tmp_path / name) for name in ("a.JPG", "b.png", "c.mp3", "d.ogg", "e.pdf", "f")] == [
        "photo", "photo", "audio", "audio", "document", "document"]
