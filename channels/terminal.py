"""The terminal channel: a REPL on standard input and output, the default with no chat token.

Lines are read in a daemon thread (so piped input works as well as a keyboard, and a pending
read never blocks exit), each one is a
direct message from the local user, and replies are printed as they come. End of input (Ctrl-D)
calls ``on_close`` so the application can shut down cleanly.

A terminal in its usual (canonical) mode hands over at most 4,095 bytes of a line and drops the
rest (Linux's N_TTY buffer); a longer paste arrives cut. Such a line is not sent as if it were
whole: the chat says what happened and how to send long text (piped input has no such limit).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from .base import AttachmentError, Channel, IncomingMessage, MessageHandler, OutgoingFile, Reply
from .local_file import LocalFileAttachment

#: The most bytes of one line a terminal in canonical mode delivers (Linux: N_TTY_BUF_SIZE - 1).
TTY_LINE_BYTES = 4095
CUT_LINE_NOTICE = ("(That line reached the terminal's limit of 4,095 bytes, so its end was probably cut off; "
                   "it was not sent. Paste long text in parts, or pipe it in: membridge chat < notes.txt)")
ATTACH = "/attach"
ATTACH_USAGE = ("Usage: /attach PATH [caption], e.g. /attach ~/notes.pdf or /attach \"my photo.jpg\" what is this? "
                "(a photo or audio file by its extension, else a document)")


class TerminalChannel(Channel):
    name = "terminal"
    max_message_chars = 100_000

    def __init__(
        self,
        user: str,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        on_close: Callable[[], None] | None = None,
        banner: str | None = None,
        files_dir: Path | None = None,
    ) -> None:
        """``files_dir`` is where files the bot sends are saved (default: the current folder)."""
        self.user = user
        self._files_dir = files_dir
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._on_close = on_close or (lambda: None)
        self._banner = banner
        self._task: asyncio.Task[None] | None = None
        self._interactive = bool(getattr(self._stdin, "isatty", lambda: False)())
        self._counter = 0

    async def start(self, on_message: MessageHandler) -> None:
        if self._banner:
            self._write(self._banner + "\n")
        self._task = asyncio.create_task(self._read_loop(on_message), name="terminal-reader")

    def describe(self) -> str:
        return f"terminal: chatting as {self.user}"

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        text = reply.text.rstrip()
        self._write(f"bot> {text}\n\n" if self._interactive else f"{text}\n")
        self._prompt()

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        """Save a copy in ``files_dir`` under the file's name (``name-1.zip``… when taken) and say where."""
        saved = await asyncio.to_thread(_save_copy, file, self._files_dir or Path.cwd())
        await self.send(Reply(f"saved {file.name} as {saved}", markdown=False), to)

    def say(self, text: str) -> None:
        """A notice from the application itself (not a reply to a message)."""
        self._write(f"{text}\n")

    async def _read_loop(self, on_message: MessageHandler) -> None:
        lines: asyncio.Queue[str] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def reader() -> None:
            """A daemon thread: a blocked read never keeps the process from exiting. A line read
            after the channel's loop has closed (the bot stopped while this read waited) has no one
            to go to: the thread ends quietly instead of failing."""
            while True:
                line = self._read_line()
                try:
                    loop.call_soon_threadsafe(lines.put_nowait, line)
                except RuntimeError:  # the event loop is closed
                    return
                if line == "":
                    return

        threading.Thread(target=reader, name="terminal-stdin", daemon=True).start()
        self._prompt()
        while True:
            line = await lines.get()
            if line == "":
                self._on_close()
                return
            notice = self._refusal(line)
            if notice:
                self.say(notice)
                self._prompt()
                continue
            text = line.strip()
            if not text:
                self._prompt()
                continue
            self._counter += 1
            message = self._message(text)
            if text.split(maxsplit=1)[0] == ATTACH:
                try:
                    message = _attach(message, text)
                except AttachmentError as exc:
                    self.say(str(exc))
                    self._prompt()
                    continue
            await on_message(message)

    def _read_line(self) -> str:
        """One line; bytes that are not UTF-8 (a paste cut inside a character) become U+FFFD rather
        than an error that would end the input."""
        raw = getattr(self._stdin, "buffer", None)
        if raw is None:
            return self._stdin.readline()
        line: bytes = raw.readline()
        return line.decode("utf-8", "replace")

    def _refusal(self, line: str) -> str | None:
        """Why ``line`` must not be answered as if it were whole (the terminal cut it), or None."""
        if self._interactive and len(line.rstrip("\n").encode("utf-8")) >= TTY_LINE_BYTES:
            return CUT_LINE_NOTICE
        return None

    def _message(self, text: str) -> IncomingMessage:
        return IncomingMessage(
            channel="terminal", chat_id=self.user, chat_type="direct", user_id=self.user, user_name=self.user,
            text=text, message_id=f"{uuid.uuid4().hex[:8]}-{self._counter}",
        )

    def _prompt(self) -> None:
        if self._interactive:
            self._write("you> ")

    def _write(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()



def _attach(message: IncomingMessage, line: str) -> IncomingMessage:
    """``/attach PATH [caption]``: ``message`` carrying the file at PATH (quote a path with spaces),
    the rest of the line its caption."""
    try:
        words = shlex.split(line)[1:]
    except ValueError:
        words = []
    if not words:
        raise AttachmentError(ATTACH_USAGE)
    path = Path(os.path.expanduser(words[0]))
    return replace(message, text=" ".join(words[1:]), attachments=(LocalFileAttachment(path),))


def _save_copy(file: OutgoingFile, folder: Path) -> Path:
    """Copy ``file`` into ``folder`` under a name no file has yet (never overwrites)."""
    stem, suffix = Path(file.name).stem, Path(file.name).suffix
    for number in range(1000):
        target = folder / (file.name if number == 0 else f"{stem}-{number}{suffix}")
        try:
            with open(target, "xb") as out, open(file.path, "rb") as source:
                shutil.copyfileobj(source, out)
        except FileExistsError:
            continue
        return target.absolute()
    raise FileExistsError(f"{folder} already has {file.name} and 999 numbered copies of it")
