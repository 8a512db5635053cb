"""The ledger of a randomized cluster run: what each chat must get back, and what must be gone.

A run sends each chat messages that carry new secret words and later forgets some of them; the
ledger keeps, per chat, a check for each answer in order and the secrets the chat's scope still
holds, and reads files back for the secrets that must be gone. A file is read as it is and, when
it is a zip (an export waiting in a workspace's outbox, a half-written one), member by member:
deflate would hide a text from a plain byte search.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from fakes import HANG_GUARD_S
from fakes.telegram_server import FakeTelegram

from support.cluster import Role, wait_all

SECRET_RE = re.compile(rb"sekrit\d{5}x[0-9a-f]{6}")
ZIP_MAGIC = b"PK\x03\x04"


def zip_members(data: bytes) -> dict[str, bytes]:
    """Every member of the zip ``data``, unpacked, by name."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def readable_bytes(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` (lower-cased), then those of each member when it is a zip; nothing when
    the file went away meanwhile (a temporary file renamed)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    yield data.lower()
    if data.startswith(ZIP_MAGIC):
        try:
            members = zip_members(data)
        except zipfile.BadZipFile:  # still being written: its finished members are seen next time
            return
        yield from (member.lower() for member in members.values())


class Scan:
    """Files read back for needles: which file held which, and how many bytes were read."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def holders(self, folders: Iterable[Path], needles: Iterable[bytes]) -> list[str]:
        """``path: needle`` for every file under ``folders`` holding one of ``needles`` (any case)."""
        wanted = [needle.lower() for needle in needles]
        found: list[str] = []
        for folder in folders:
            for path in sorted(folder.rglob("*")):
                if not path.is_file():
                    continue
                for data in readable_bytes(path):
                    self.bytes_read += len(data)
                    found += [f"{path}: {needle.decode()}" for needle in wanted if needle in data]
        return found


class Ledger:
    """The messages sent, what each chat must get back in order, and the texts that must be gone."""

    def __init__(self, telegram: FakeTelegram, roles: list[Role], chats: range) -> None:
        self.telegram, self.roles, self.chats = telegram, roles, chats
        self.expected: dict[int, list[Callable[[str], bool]]] = {chat: [] for chat in chats}
        self.said: dict[int, list[str]] = {chat: [] for chat in chats}  # each message, for a failure's message
        self.live: dict[int, list[str]] = {chat: [] for chat in chats}  # secrets a chat's scope holds
        self.gone: dict[str, list[bytes]] = {}  # forgotten secrets, each with the forms it must not take on disk
        self.tally: Counter[str] = Counter()
        self.scan = Scan()

    def push(self, chat: int, fields: dict[str, object] | str, expect: Callable[[str], bool]) -> None:
        """Send a text (a ``str``) or a message of ``fields``; ``expect`` checks its one answer."""
        self.expected[chat].append(expect)
        self.said[chat].append(fields if isinstance(fields, str) else str(fields.get("caption", sorted(fields))))
        if isinstance(fields, str):
            self.telegram.push_text(chat, chat, fields)
        else:
            self.telegram.push_message(chat, chat, dict(fields))

    def sent(self, chat: int) -> list[str]:
        return [m["visible"] for m in self.telegram.sent if int(m["chat_id"]) == chat]

    def answered(self, chat: int) -> bool:
        return len(self.sent(chat)) >= len(self.expected[chat])

    async def settle(self) -> None:
        """Until every chat has as many answers as messages."""
        await wait_all(self.roles, lambda: all(self.answered(c) for c in self.chats), "every answer",
                       timeout=HANG_GUARD_S * 3)

    def forgotten(self, secret: str, *forms: bytes) -> None:
        """``secret`` was forgotten: from now on no file may hold it, nor any of ``forms``."""
        self.gone[secret] = [secret.encode(), *forms]
        for held in self.live.values():
            if secret in held:
                held.remove(secret)

    def restored(self, secrets: Iterable[str]) -> None:
        """An import brought ``secrets`` back on purpose: they may be on disk again."""
        for secret in secrets:
            self.gone.pop(secret, None)

    def check_gone(self, folders: Iterable[Path]) -> None:
        """No file under ``folders`` holds a forgotten text."""
        self.tally["checks"] += 1
        found = self.scan.holders(folders, [form for forms in self.gone.values() for form in forms])
        assert not found, f"forgotten text found: {found[:10]}"

    def check_export(self, members: dict[str, bytes]) -> None:
        """An export holds none of the texts forgotten before it."""
        unpacked = b"".join(members.values()).lower()
        found = [secret for secret, forms in self.gone.items() if any(form.lower() in unpacked for form in forms)]
        assert not found, f"an export holds forgotten text {found}"

    def check_answers(self) -> None:
        """Each chat got exactly one answer per message, in order, each the one expected."""
        for chat in self.chats:
            sent = self.sent(chat)
            assert len(sent) == len(self.expected[chat]), f"chat {chat}: {len(sent)} answers to {len(self.expected[chat])}"
            for i, (reply, expect) in enumerate(zip(sent, self.expected[chat], strict=True)):
                assert expect(reply), (f"chat {chat}, message {i}: unexpected answer {reply!r}; the chat so far:\n"
                                       + "\n".join(f"{said!r} -> {got!r}" for said, got in zip(self.said[chat], sent, strict=True)))


def secrets_in(members: dict[str, bytes]) -> set[str]:
    """The secret words an export's members hold."""
    return {found.decode() for data in members.values() for found in SECRET_RE.findall(data.lower())}


def same_export(first: dict[str, bytes], second: dict[str, bytes]) -> list[str]:
    """The members in which two exports of one scope differ (the manifest's export time aside)."""
    names = sorted(set(first) | set(second))
    differ = [name for name in names if name != "manifest.json" and first.get(name) != second.get(name)]
    counts = [json.loads(export.get("manifest.json", b"{}")).get("counts") for export in (first, second)]
    if counts[0] != counts[1]:
        differ.append(f"manifest.json (counts {counts[0]} and {counts[1]})")
    return differ
