"""``membridge memory history/revert --file``: a daily file's versions (console edits) from the shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from support.bot import make_services

ROOT = Path(__file__).resolve().parents[2]
DAY = "memory/2026-01-31.md"


def membridge(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "--config", str(config), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_daily_file_edit_is_listed_and_reverted_from_the_shell(tmp_path: Path) -> None:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1")
    daily = services.workspace.scope_dir("alice") / DAY
    daily.parent.mkdir(parents=True)
    daily.write_bytes(b"- the cat is called Miso\n")
    services.dreamer.memory_file.write("alice", b"- the cat is called Mochi\n", "console: edit line 1", file=DAY)
    services.close()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"}}))

    listed = membridge(config, "memory", "history", "--scope", "alice", "--file", DAY)
    assert listed.returncode == 0, listed.stderr
    assert [line.split("  ")[-1] for line in listed.stdout.splitlines()] == ["console: edit line 1", "as found on disk"]
    assert membridge(config, "memory", "history", "--scope", "alice").stdout == (
        "MEMORY.md of alice has no recorded versions yet\n")

    reverted = membridge(config, "memory", "revert", "--scope", "alice", "--file", DAY)
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout.startswith(f"alice: {DAY} restored (now version 3)\n") and "+- the cat is called Miso" in reverted.stdout
    assert daily.read_bytes() == b"- the cat is called Miso\n"

    bad = membridge(config, "memory", "revert", "--scope", "alice", "--file", "memory/dreams/2026-01-31.md")
    assert bad.returncode == 1 and "--file 'memory/dreams/2026-01-31.md' has no versions" in bad.stderr
