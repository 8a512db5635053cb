"""Writing memory files the way a user or the bot would."""

from __future__ import annotations

from pathlib import Path

from memory import Workspace


def write(workspace: Workspace, scope: str, relative: str, text: str) -> Path:
    path = workspace.scope_dir(scope) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
