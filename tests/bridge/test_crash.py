"""SIGKILL during a flush, in a real subprocess: the summary lands in daily memory exactly once."""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import datetime
from pathlib import Path

import pytest
from support.bot import is_summary_request

DRIVER = Path(__file__).with_name("flush_driver.py")
SUMMARY = "- Ann's gym locker is number 0"


async def run_driver(workspace: Path, url: str, mode: str, *, kill_on_ready: bool = False) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(DRIVER), str(workspace), url, mode,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    if kill_on_ready:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"READY"
        process.send_signal(signal.SIGKILL)
    await asyncio.wait_for(process.wait(), 60)
    return process.returncode


def daily_text(workspace: Path) -> str:
    path = workspace / "scopes" / "telegram-42" / "memory" / f"{datetime.now():%Y-%m-%d}.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.mark.slow
async def test_kill_after_trim_then_restart_writes_the_summary_once(tmp_path, fake_llm) -> None:
    fake_llm.responder = lambda r: SUMMARY if is_summary_request(r) else "ok"
    workspace = tmp_path / "ws"
    assert await run_driver(workspace, fake_llm.base_url, "turns", kill_on_ready=True) == -signal.SIGKILL
    assert daily_text(workspace) == ""
    assert await run_driver(workspace, fake_llm.base_url, "recover") == 0
    assert daily_text(workspace).count(SUMMARY) == 1
    assert await run_driver(workspace, fake_llm.base_url, "recover") == 0
    assert daily_text(workspace).count(SUMMARY) == 1
    assert len([r for r in fake_llm.requests if is_summary_request(r)]) == 1


@pytest.mark.slow
async def test_kill_between_the_write_and_the_done_mark_writes_nothing_twice(tmp_path, fake_llm) -> None:
    fake_llm.responder = lambda r: SUMMARY if is_summary_request(r) else "ok"
    workspace = tmp_path / "ws"
    assert await run_driver(workspace, fake_llm.base_url, "turns", kill_on_ready=True) == -signal.SIGKILL
    assert await run_driver(workspace, fake_llm.base_url, "die-on-finish") == -signal.SIGKILL
    assert daily_text(workspace).count(SUMMARY) == 1
    assert await run_driver(workspace, fake_llm.base_url, "recover") == 0
    assert daily_text(workspace).count(SUMMARY) == 1
