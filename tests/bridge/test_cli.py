"""The ``membridge`` command as a user runs it: a real subprocess, a config file, stdout/stderr."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def config_file(tmp_path: Path):
    def make(llm_url: str = "http://127.0.0.1:9/v1", **extra: object) -> Path:
        data = {"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
                "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 5},
                "channels": {"terminal": {"user": "alice"}}, **extra}
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return make


async def membridge(config: Path | None, *args: str) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "bridge"] + (["--config", str(config)] if config else []) + list(args)
    process = await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def test_add_then_search_as_json(config_file) -> None:
    config = config_file()
    code, out, _ = await membridge(config, "memory", "add", "my passport expires on 2027-03-01")
    assert code == 0 and "(scope terminal-alice)" in out
    code, out, err = await membridge(config, "memory", "search", "passport", "--json")
    assert code == 0, err
    [hit] = json.loads(out)
    assert hit["text"] == "- my passport expires on 2027-03-01" and hit["scope"] == "terminal-alice"
    assert hit["source"] == "memory" and hit["path"].startswith("memory/") and hit["start_line"] == 1
    code, out, _ = await membridge(config, "memory", "get", hit["path"], "--start", "1", "--lines", "1")
    assert code == 0 and out == "- my passport expires on 2027-03-01\n"


async def test_sync_reports_counts(config_file, tmp_path) -> None:
    config = config_file()
    memory_md = tmp_path / "ws" / "scopes" / "terminal-alice" / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("- one\n- two\n")
    code, out, _ = await membridge(config, "memory", "sync", "--json")
    report = json.loads(out)
    assert code == 0 and report["files_changed"] == 1 and report["ok"] is True
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:  # the command left the index whole
        assert db.execute("SELECT count(*) FROM tri_pending").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM chunks_tri WHERE chunks_tri MATCH '\"two\"'").fetchone() == (1,)


async def test_clear_errors_for_bad_input(config_file, tmp_path) -> None:
    config = config_file()
    await membridge(config, "memory", "add", "x")
    code, _, err = await membridge(config, "memory", "search", "x", "--scope", "nobody")
    assert code == 1 and "unknown scope 'nobody'" in err and "terminal-alice" in err
    code, _, err = await membridge(config, "memory", "get", "../../etc/passwd")
    assert code == 1 and "'..' is not allowed" in err
    code, _, err = await membridge(config, "memory", "search", "x", "--scope", "../evil")
    assert code == 1 and "invalid scope" in err
    missing = config_file(workspace=str(tmp_path / "nowhere"))
    code, _, err = await membridge(missing, "memory", "search", "x")
    assert code == 1 and "does not exist" in err


async def test_bad_config_names_the_key(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("memory:\n  half_life_days: -1\n  vector_wieght: 2\n")
    code, _, err = await membridge(bad, "memory", "sync")
    assert code == 2
    assert "memory.half_life_days: Input should be greater than 0 (got -1)" in err
    assert "memory.vector_wieght: unknown key" in err
    bad.write_text("llm: [unclosed\n")
    code, _, err = await membridge(bad, "doctor")
    assert code == 2 and "not valid YAML" in err
    code, _, err = await membridge(tmp_path / "absent.yaml", "doctor")
    assert code == 2 and "does not exist" in err


async def test_dream_history_and_revert(config_file, tmp_path, fake_llm) -> None:
    config = config_file(fake_llm.base_url)
    scope_dir = tmp_path / "ws" / "scopes" / "terminal-alice"
    (scope_dir / "memory").mkdir(parents=True)
    (scope_dir / "MEMORY.md").write_text("- likes tea\n")
    code, out, _ = await membridge(config, "memory", "dream")
    assert code == 0 and "no daily memory" in out and fake_llm.requests == []
    await membridge(config, "memory", "add", "switched to coffee today")
    fake_llm.reply("[MEMORY]\n- likes coffee (switched from tea)\n[DREAM]\nA change of taste.")
    code, out, err = await membridge(config, "memory", "dream")
    assert code == 0, err
    assert "-- likes tea" in out and "+- likes coffee (switched from tea)" in out
    code, out, _ = await membridge(config, "memory", "history", "--json")
    assert [v["cause"] for v in json.loads(out)] == ["deep dream", "as found on disk"]
    code, out, _ = await membridge(config, "memory", "revert")
    assert code == 0 and (scope_dir / "MEMORY.md").read_text() == "- likes tea\n"
    code, out, _ = await membridge(config, "memory", "dream")
    assert "already dreamt" in out and len(fake_llm.requests) == 1


async def test_doctor_reports_each_part(config_file, fake_llm) -> None:
    code, out, _ = await membridge(config_file(fake_llm.base_url), "doctor")
    lines = out.splitlines()
    assert [line.split(":")[0].split()[-1] for line in lines] == ["config", "sqlite", "workspace", "lancedb", "embeddings", "llm"]
    assert code == 0 and all(line.startswith("ok") for line in lines)
    code, out, _ = await membridge(config_file("http://127.0.0.1:9/v1"), "doctor")
    assert code == 1 and "FAIL  llm: cannot reach the LLM at http://127.0.0.1:9/v1" in out


async def test_doctor_fills_what_a_killed_sync_left_queued(config_file, tmp_path) -> None:
    from memory import MemoryManager, MemorySettings, Workspace

    memory_md = tmp_path / "ws" / "scopes" / "terminal-alice" / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("- redeployment of the kiosk\n")
    manager = MemoryManager(Workspace(tmp_path / "ws"), MemorySettings(), embedder=None)
    manager._start_trigram_fill = lambda: None  # as if killed before the background fill ran
    manager.sync()
    manager.close()
    code, out, _ = await membridge(config_file(), "doctor")
    assert "ok    workspace:" in out and "1 chunks indexed, keyword index intact; 1 queued for the substring index, added now" in out
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        assert db.execute("SELECT count(*) FROM tri_pending").fetchone() == (0,)


async def test_knowledge_commands(config_file, tmp_path) -> None:
    config = config_file()
    code, out, err = await membridge(config, "knowledge", "add", "tech/deploy", "# Deploy\nSee [[tech/docker]].")
    assert code == 0 and out == "saved knowledge/tech/deploy.md\n", err
    await membridge(config, "knowledge", "add", "tech/docker", "# Docker\nContainers, see [deploy](deploy.md).")
    code, out, _ = await membridge(config, "knowledge", "list")
    assert out == "tech/deploy  Deploy\ntech/docker  Docker\n"
    code, out, _ = await membridge(config, "knowledge", "graph", "--json")
    graph = json.loads(out)
    assert graph["edges"] == [{"source": "knowledge/tech/deploy.md", "target": "knowledge/tech/docker.md"}]
    code, out, _ = await membridge(config, "memory", "search", "containers", "--json")
    assert [hit["path"] for hit in json.loads(out)] == ["knowledge/tech/docker.md"]
    code, out, _ = await membridge(config, "knowledge", "show", "tech/docker")
    assert out == "# Docker\nContainers, see [deploy](deploy.md).\n"
    code, _, err = await membridge(config, "knowledge", "add", "../etc/passwd", "x")
    assert code == 1 and "membridge:" in err
    code, out, _ = await membridge(config, "knowledge", "rm", "tech/docker")
    assert code == 0
    code, out, _ = await membridge(config, "knowledge", "list", "--json")
    assert [p["slug"] for p in json.loads(out)] == ["deploy"]
