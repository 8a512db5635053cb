"""SIGKILL in the middle of a forget or an erase, in a real subprocess; the restart ends fully erased."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.forgetting import occurrences

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace

DRIVER = Path(__file__).with_name("forget_driver.py")
TOKEN = "Zorblaxquint"


def driver(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DRIVER), str(workspace), *args], capture_output=True, text=True,
                          timeout=120)


def killed_at(workspace: Path, mode: str, step: str) -> None:
    """Run ``mode`` until the driver says it reached ``step``, then SIGKILL it."""
    process = subprocess.Popen([sys.executable, str(DRIVER), str(workspace), mode, step], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "READY", process.stderr.read() if process.stderr else line
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("planted") / "ws"
    result = driver(workspace, "plant")
    assert result.returncode == 0, result.stderr
    return workspace


def copy_of(planted: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    subprocess.run(["cp", "-a", str(planted), str(target)], check=True)
    return target


def search_texts(workspace: Path, query: str, scope: str) -> list[str]:
    manager = MemoryManager(Workspace(workspace), MemorySettings(), embedder=HashEmbedding())
    try:
        return [result.text.strip() for result in manager.search(query, scope)]
    finally:
        manager.close()


@pytest.mark.slow
@pytest.mark.parametrize("step", ["rewrite", "versions", "conversations", "sync", "wipe", "purge", "vacuum"])
def test_a_forget_killed_at_any_step_is_finished_by_the_restart(planted: Path, tmp_path: Path, step: str) -> None:
    workspace = copy_of(planted, tmp_path)
    killed_at(workspace, "forget", step)
    resumed = driver(workspace, "resume")
    assert resumed.returncode == 0 and resumed.stdout == "resumed 1\n", resumed.stderr
    assert occurrences(workspace, TOKEN) == {}
    assert not any(TOKEN in text for text in search_texts(workspace, TOKEN, "alice"))
    assert "- likes green tea" in search_texts(workspace, "green tea", "alice")
    assert occurrences(workspace, "Bobsmarker")  # another scope is untouched
    assert driver(workspace, "resume").stdout == "resumed 0\n"


@pytest.mark.slow
@pytest.mark.parametrize("step", ["unindex", "history", "sessions", "wipe", "vacuum"])
def test_an_erase_killed_at_any_step_is_finished_by_the_restart(planted: Path, tmp_path: Path, step: str) -> None:
    workspace = copy_of(planted, tmp_path)
    killed_at(workspace, "erase", step)
    assert driver(workspace, "resume").stdout == "resumed 1\n"
    assert occurrences(workspace, "alice") == {} and occurrences(workspace, TOKEN) == {}
    assert "- likes green tea" not in search_texts(workspace, "green tea", "bob")
    assert any("Bobsmarker" in text for text in search_texts(workspace, "Bobsmarker", "bob"))
