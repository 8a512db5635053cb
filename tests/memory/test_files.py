"""Durable file primitives: a new file's (and new folder's) directory entry is fsynced too."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.files import files


@pytest.fixture
def synced(monkeypatch) -> list[Path]:
    folders: list[Path] = []
    real = files.fsync_dir
    monkeypatch.setattr(files, "fsync_dir", lambda folder: (folders.append(Path(folder)), real(folder)))
    return folders


def test_appending_creates_a_daily_file_whose_directory_entry_is_fsynced(tmp_path, synced) -> None:
    daily = tmp_path / "scopes" / "alice" / "memory" / "2026-12-03.md"
    files.append_text(daily, "- the first note of the day")
    # the new file in its folder, and each new folder in its parent
    assert set(synced) == {daily.parent, daily.parent.parent, daily.parent.parent.parent, tmp_path}
    synced.clear()
    files.append_text(daily, "- a second note")
    assert synced == []  # the entry exists already: only the data is fsynced
    assert daily.read_text() == "- the first note of the day\n- a second note\n"


def test_a_new_file_in_an_existing_folder_fsyncs_only_that_folder(tmp_path, synced) -> None:
    files.append_text(tmp_path / "log.md", "- one")
    assert synced == [tmp_path]


def test_an_atomic_write_into_new_folders_fsyncs_them(tmp_path, synced) -> None:
    target = tmp_path / "scopes" / "bob" / "MEMORY.md"
    files.atomic_write(target, b"- bob\n")
    assert set(synced) == {target.parent, target.parent.parent, tmp_path}
