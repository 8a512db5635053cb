"""``membridge memory forget`` and ``membridge memory erase`` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

from memory.privacy.forgetting import SCHEMA as FORGET_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "Quaffelbrink"


def run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "--config", str(config), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def setup(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
                                      "channels": {"terminal": {"user": "alice"}}}), encoding="utf-8")
    for text in (f"the {TOKEN} key is under the mat", "likes green tea"):
        assert run(config, "memory", "add", text).returncode == 0
    assert run(config, "memory", "add", "--scope", "bob", "--create", "bob's own note").returncode == 0
    assert run(config, "memory", "sync").returncode == 0
    return config


def bytes_found(root: Path, token: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and token.encode() in p.read_bytes())


def test_forget_dry_run_lists_then_forget_removes_every_byte(tmp_path: Path) -> None:
    config = setup(tmp_path)
    dry = run(config, "memory", "forget", TOKEN.lower(), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    listing = json.loads(dry.stdout)
    assert listing["counts"] == {"memory files": 1, "index": 1} and listing["dry_run"] is True
    [line] = [m for m in listing["matches"] if m["place"] == "memory files"]
    assert line["where"].endswith(".md:1") and line["text"] == f"- the {TOKEN} key is under the mat"
    assert bytes_found(tmp_path / "ws", TOKEN)  # a dry run changes nothing

    done = run(config, "memory", "forget", TOKEN.lower())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("terminal-alice: forgotten (memory files: 1; index: 1")
    assert bytes_found(tmp_path / "ws", TOKEN) == []
    search = run(config, "memory", "search", "key under the mat", "--json")
    assert all(TOKEN not in hit["text"] for hit in json.loads(search.stdout))
    hits = json.loads(run(config, "memory", "search", "green tea", "--json").stdout)
    assert [(hit["text"], hit["start_line"]) for hit in hits] == [("\n- likes green tea", 1)]  # line 1 is emptied


def test_erase_wants_yes_and_an_existing_scope(tmp_path: Path) -> None:
    config = setup(tmp_path)
    refused = run(config, "memory", "erase", "--scope", "terminal-alice")
    assert refused.returncode == 1
    assert "would erase scope terminal-alice for good (1 files, 1 chunks, 0 versions, 0 sessions, 0 messages)" in refused.stderr
    assert "add --yes" in refused.stderr and (tmp_path / "ws" / "scopes" / "terminal-alice").is_dir()
    unknown = run(config, "memory", "erase", "--scope", "nobody", "--yes")
    assert unknown.returncode == 1 and "nothing is stored for scope 'nobody'" in unknown.stderr
    assert run(config, "memory", "erase", "--yes").returncode == 2  # --scope is required: no default victim

    done = run(config, "memory", "erase", "--scope", "terminal-alice", "--yes")
    assert done.returncode == 0, done.stderr and done.stdout.startswith("terminal-alice: erased")
    assert not (tmp_path / "ws" / "scopes" / "terminal-alice").exists()
    assert bytes_found(tmp_path / "ws", "terminal-alice") == []
    assert bytes_found(tmp_path / "ws", "bob's own note")  # bob's memory is his


def test_any_command_first_finishes_a_forget_a_crash_left_recorded(tmp_path: Path) -> None:
    config = setup(tmp_path)
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:  # what a SIGKILL right after recording leaves
        db.executescript(FORGET_SCHEMA)
        db.execute("INSERT INTO forget_jobs (kind, scope, needle, created_at) VALUES ('forget', 'terminal-alice', ?, 0)",
                   (TOKEN,))
    search = run(config, "memory", "search", TOKEN, "--json")
    assert search.returncode == 0, search.stderr
    assert all(TOKEN not in hit["text"] for hit in json.loads(search.stdout))
    assert bytes_found(tmp_path / "ws", TOKEN) == []


def _services(config: Path):  # type: ignore[no-untyped-def]
    from bridge.config import load_config
    from bridge.wiring.app import Services

    return Services(load_config(str(config)))


def test_forget_reaches_kept_media_and_lists_it_first(tmp_path: Path) -> None:
    """media.keep: a kept file holding the text is listed by the dry run and deleted by the forget;
    a kept file without it stays."""
    config = setup(tmp_path)
    services = _services(config)
    try:
        held = services.workspace.keep_media("terminal-alice", f"crate list\n{TOKEN} crate 7\n".encode(), ".txt")
        photo = services.workspace.keep_media("terminal-alice", b"\x89PNG\r\n\x1a\n not it", ".png")
    finally:
        services.close()
    dry = run(config, "memory", "forget", TOKEN.lower(), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    listing = json.loads(dry.stdout)
    assert listing["counts"] == {"memory files": 1, "media files": 1, "index": 1}
    [media] = [m for m in listing["matches"] if m["place"] == "media files"]
    assert media["where"] == f"media/{held.name}" and media["text"] == f"{TOKEN} crate 7"
    done = run(config, "memory", "forget", TOKEN.lower())
    assert done.returncode == 0, done.stderr
    assert bytes_found(tmp_path / "ws", TOKEN) == []
    assert not held.exists() and photo.read_bytes() == b"\x89PNG\r\n\x1a\n not it"


def test_forget_reaches_a_chat_that_has_no_folder_yet(tmp_path: Path) -> None:
    """A chat's scope with only conversation rows (no file written yet) is forgettable by --scope."""
    config = setup(tmp_path)
    from memory import Turn

    services = _services(config)
    try:
        store = services.conversations
        store.ensure_session("telegram-77|telegram::77:", "telegram-77", "telegram")
        store.append_messages("telegram-77|telegram::77:", [Turn("user", "my Zibbertack is blue"), Turn("assistant", "ok")])
    finally:
        services.close()
    assert not (tmp_path / "ws" / "scopes" / "telegram-77").exists()
    done = run(config, "memory", "forget", "zibbertack", "--scope", "telegram-77")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("telegram-77: forgotten (messages: 1")
    assert bytes_found(tmp_path / "ws", "Zibbertack") == []
    unknown = run(config, "memory", "forget", TOKEN, "--scope", "nobody")
    assert unknown.returncode == 1
    assert "unknown scope 'nobody'" in unknown.stderr and "telegram-77" in unknown.stderr
