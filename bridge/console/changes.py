"""A change to MEMORY.md or a daily file in plain words: what the console lists above a raw diff.

A unified diff speaks to programs (``@@ -1,4 +1,4 @@``, a ``-`` before an entry's own ``- ``);
people want "changed entry 3: likes tea → likes coffee". Each change names the entry (a list item,
counted as :func:`memory.count_entries` counts them) or else the line, on the side where it is:
the new file for changed and added lines, the old file for removed ones.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?=\S)")


def plain_changes(before: str, after: str) -> list[dict[str, Any]]:
    """``[{"kind": "changed" | "added" | "removed", "entry": n | None, "line": n, "before", "after"}]``
    in file order; ``before``/``after`` are the line's text without its list marker (None where absent)."""
    old, new = before.splitlines(), after.splitlines()
    old_entries, new_entries = _entry_numbers(old), _entry_numbers(new)
    changes: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for offset in range(paired):
            changes.append(_change("changed", j1 + offset, new_entries, old[i1 + offset], new[j1 + offset]))
        for index in range(j1 + paired, j2):
            changes.append(_change("added", index, new_entries, None, new[index]))
        for index in range(i1 + paired, i2):
            changes.append(_change("removed", index, old_entries, old[index], None))
    return changes


def _entry_numbers(lines: list[str]) -> list[int | None]:
    """For each line, its number among the list items (1-based), or None for other lines."""
    numbers: list[int | None] = []
    count = 0
    for line in lines:
        if _BULLET_RE.match(line):
            count += 1
            numbers.append(count)
        else:
            numbers.append(None)
    return numbers


def _change(kind: str, index: int, entries: list[int | None], before: str | None, after: str | None) -> dict[str, Any]:
    return {"kind": kind, "entry": entries[index], "line": index + 1,
            "before": None if before is None else _BULLET_RE.sub("", before),
            "after": None if after is None else _BULLET_RE.sub("", after)}
