"""Deep Dream: distil recent daily memory into MEMORY.md, safely, with a way back.

One LLM call reads MEMORY.md and the last ``lookback_days`` daily files and answers with a
``[MEMORY]`` section (the new MEMORY.md) and a ``[DREAM]`` section (a diary). The output is refused,
leaving MEMORY.md as it was, when it has no ``[MEMORY]``, more than ``max_entries`` entries, or drops
more than ``max_loss`` of the old entries. Otherwise MEMORY.md is replaced atomically, keeping
the old state as a version (:mod:`memory.files.memory_file`), so ``revert`` restores the exact bytes.

Dedupe hashes the daily content only (not MEMORY.md, which the dream itself rewrites) and is stored
in SQLite, so the same input is not dreamt twice, even across a restart.

The LLM answers long after MEMORY.md was read, so the dream's write is a compare-and-swap on the
bytes it read: when a ``/memory forget``, a revert or another dream changed the file meanwhile, the
dream is redone over the new file (once), then refused; it never overwrites what it did not see.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from ..config import DreamSettings
from ..files.files import append_text
from ..files.memory_file import MemoryChanged, MemoryFile, count_entries, unified_diff
from ..manager import MemoryManager
from .offload import Offload, to_thread

log = logging.getLogger(__name__)

Complete = Callable[[str, str], Awaitable[str]]
"""``complete(instructions, material)``: the model's text answer to ``material`` under
``instructions``. The bridge turns the two into its LLM's chat format; memory knows no such format."""

DREAM_PROMPT = """You maintain a person's long-term memory file, MEMORY.md. You are given the current MEMORY.md and
recent daily notes (newest first). Produce an updated MEMORY.md:
- merge new durable facts from the daily notes; update entries the notes contradict (newer wins);
- drop items that are stale or no longer true; keep everything else, in substance, from the old file;
- keep absolute dates (YYYY-MM-DD), never "yesterday"; keep the language the person uses;
- invent nothing that is not in the inputs; one fact per "- " bullet; at most {max_entries} entries.
Then write a short diary paragraph about what you noticed.
Answer in exactly this form:
[MEMORY]
- entry
- entry
[DREAM]
diary text"""

_DREAM_ATTEMPTS = 2  # the first pass and one redo over a MEMORY.md that changed meanwhile
_SECTION_RE = re.compile(r"^[#*\s]*\[(MEMORY|DREAM)\][*\s:]*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class DreamOutput:
    memory: str | None
    dream: str


def parse_dream_output(text: str) -> DreamOutput:
    """Find the ``[MEMORY]`` and ``[DREAM]`` sections in any order, ignoring fences and chatter."""
    cleaned = re.sub(r"^\s*```[\w-]*\s*$", "", text, flags=re.MULTILINE)
    marks = list(_SECTION_RE.finditer(cleaned))
    sections: dict[str, str] = {}
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(cleaned)
        sections.setdefault(mark.group(1).upper(), cleaned[mark.end():end].strip())
    memory = sections.get("MEMORY")
    return DreamOutput(memory=memory, dream=sections.get("DREAM", ""))


@dataclass
class DreamResult:
    status: str  # written | skipped | refused | failed
    reason: str
    diff: str = ""
    entries_before: int = 0
    entries_after: int = 0
    version: int | None = None

    @property
    def changed(self) -> bool:
        return self.status == "written"


def _only_grew(seen: list[tuple[str, str | None]], now: list[tuple[str, str | None]]) -> bool:
    """Each day of ``now`` still starts with the lines ``seen`` of it: nothing read was removed or changed."""
    def lines(text: str | None) -> list[str]:
        return (text or "").splitlines()

    return all(lines(text)[:len(lines(old))] == lines(old) for (_day, old), (_same, text) in zip(seen, now, strict=True))


def _window_hash(window: list[tuple[str, str | None]]) -> str:
    return hashlib.sha256(repr(window).encode("utf-8")).hexdigest()


class DeepDream:
    def __init__(self, manager: MemoryManager, settings: DreamSettings, *, clock: Callable[[], datetime] = datetime.now,
                 offload: Offload = to_thread) -> None:
        self.manager = manager
        self.settings = settings
        self.memory_file = MemoryFile(manager)
        self._clock = clock
        self._offload = offload

    def daily_window(self, scope: str, day: date, lookback_days: int) -> list[tuple[str, str | None]]:
        """(date, content or None when missing) for the window ending at ``day``, newest first."""
        window = []
        for offset in range(lookback_days):
            current = (day - timedelta(days=offset)).isoformat()
            path = self.manager.workspace.daily_file(scope, current)
            text = path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else ""
            window.append((current, text or None))
        return window

    def has_daily_content(self, scope: str, day: date, lookback_days: int) -> bool:
        return any(text for _, text in self.daily_window(scope, day, lookback_days))

    async def dream(
        self, scope: str, complete: Complete, *, lookback_days: int | None = None, force: bool = False, day: date | None = None
    ) -> DreamResult:
        lookback = lookback_days or self.settings.lookback_days
        day = day or self._clock().date()
        window = await self._offload(self.daily_window, scope, day, lookback)
        input_hash = _window_hash(window)
        if any(text for _, text in window) and not force and await self._offload(self._already_dreamt, scope, input_hash):
            return DreamResult("skipped", "already dreamt over exactly this daily memory")
        for attempt in range(_DREAM_ATTEMPTS):
            if attempt:  # the input changed under the first answer: read it again (a forget may have emptied lines)
                window = await self._offload(self.daily_window, scope, day, lookback)
                input_hash = _window_hash(window)
            if not any(text for _, text in window):  # checked again on a retry: an erase leaves nothing to dream over
                return DreamResult("skipped", f"no daily memory in the last {lookback} day(s); MEMORY.md left as it is")
            result = await self._dream_once(scope, complete, window, input_hash, day)
            if result is not None:
                return result
        log.warning("deep dream for %s refused: its input kept changing while the model answered", scope)
        return DreamResult("refused", "MEMORY.md or the daily memory kept changing while the model was answering; "
                                      "MEMORY.md left as it is (the next dream starts from it)")

    async def _dream_once(
        self, scope: str, complete: Complete, window: list[tuple[str, str | None]], input_hash: str, day: date
    ) -> DreamResult | None:
        """One pass over MEMORY.md as it is now; None when it changed before the answer could land."""
        before = await self._offload(self.memory_file.read, scope)
        try:
            answer = await complete(self._instructions(), self._material(before.decode("utf-8", "replace"), window))
        except Exception as exc:
            log.warning("deep dream for %s failed: %s", scope, exc)
            return DreamResult("failed", f"the LLM call failed: {exc}; MEMORY.md left as it is")
        try:
            return await self._offload(self._apply, scope, before, answer, (input_hash, window), day)
        except MemoryChanged:
            log.info("deep dream for %s: its input changed while the model answered; dreaming over the new one", scope)
            return None

    def _instructions(self) -> str:
        return DREAM_PROMPT.format(max_entries=self.settings.max_entries)

    @staticmethod
    def _material(memory: str, window: list[tuple[str, str | None]]) -> str:
        days = "\n\n".join(f"### {d}\n{text if text else '(no notes this day)'}" for d, text in window)
        return f"## Current MEMORY.md\n{memory.strip() or '(empty)'}\n\n## Daily notes, newest first\n{days}"

    def last_dreamt(self, scope: str) -> float | None:
        """When a dream last read ``scope``'s daily memory (a Unix time; None: never), whether or not
        it changed MEMORY.md: what the console's overview shows as the last Deep Dream."""
        rows = self.manager.db.query("SELECT dreamed_at FROM dream_state WHERE scope = ?", (scope,))
        return float(rows[0][0]) if rows else None

    def _already_dreamt(self, scope: str, input_hash: str) -> bool:
        rows = self.manager.db.query("SELECT input_hash FROM dream_state WHERE scope = ?", (scope,))
        return bool(rows) and rows[0][0] == input_hash

    def _apply(self, scope: str, read: bytes, answer: str, window: tuple[str, list[tuple[str, str | None]]],
               day: date) -> DreamResult:
        """Write the answer when it passes the checks and its input is still what the model read:
        MEMORY.md (compare-and-swap) and the daily window, which may only have grown (notes appended
        meanwhile are the next dream's; a forget that emptied lines of it makes the answer stale)."""
        input_hash, seen = window
        before = read.decode("utf-8", "replace")
        parsed = parse_dream_output(answer)
        old_entries = count_entries(before)
        refusal = self._refusal(parsed, old_entries)
        if refusal:
            log.warning("deep dream for %s refused: %s", scope, refusal)
            return DreamResult("refused", refusal + "; MEMORY.md left as it is", entries_before=old_entries)
        assert parsed.memory is not None
        after = parsed.memory.strip() + "\n"
        diff = unified_diff(before, after)
        version = None
        if after != before:  # a dream that changed nothing writes no diary either
            with self.manager.lock:  # MEMORY.md and the diary together: a forget comes before both or after both
                if not _only_grew(seen, self.daily_window(scope, day, len(seen))):
                    raise MemoryChanged(f"daily memory of scope {scope!r} changed since it was read")
                version = self.memory_file.write(scope, after.encode("utf-8"), "deep dream", expected=read)
                if parsed.dream:
                    self._write_diary(scope, day, parsed.dream)
        with self.manager.db.transaction() as conn:
            conn.execute(
                "INSERT INTO dream_state (scope, input_hash, dreamed_at) VALUES (?, ?, ?) ON CONFLICT (scope)"
                " DO UPDATE SET input_hash = excluded.input_hash, dreamed_at = excluded.dreamed_at",
                (scope, input_hash, time.time()),
            )
        new_entries = count_entries(after)
        reason = f"MEMORY.md updated: {old_entries} → {new_entries} entries" if diff else (
            "MEMORY.md already up to date: no new version, no diary entry")
        return DreamResult("written" if diff else "skipped", reason, diff, old_entries, new_entries, version)

    def _refusal(self, parsed: DreamOutput, old_entries: int) -> str | None:
        if parsed.memory is None:
            return "the model's answer has no [MEMORY] section"
        new_entries = count_entries(parsed.memory)
        if new_entries > self.settings.max_entries:
            return f"the new MEMORY.md has {new_entries} entries, over the limit of {self.settings.max_entries}"
        if old_entries and (old_entries - new_entries) / old_entries > self.settings.max_loss:
            return (f"the new MEMORY.md drops {old_entries - new_entries} of {old_entries} entries, more than "
                    f"memory.dream.max_loss ({self.settings.max_loss:.0%}) allows")
        return None

    def _write_diary(self, scope: str, day: date, text: str) -> None:
        """Append to the day's diary; the caller holds the workspace lock."""
        path = self.manager.workspace.dreams_dir(scope) / f"{day.isoformat()}.md"
        append_text(path, f"## {self._clock():%H:%M}\n{text.strip()}\n")
