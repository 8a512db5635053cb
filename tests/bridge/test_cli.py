"""The ``membridge`` command as a user runs it: a real subprocess, a config file, stdout/stderr."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from datetime import date
from importlib.metadata import version
from pathlib import Path

import pytest
from support.cli import ROOT, membridge
from support.ports import free_port


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
    assert code == 2 and f"{bad}:2:1: not valid YAML: expected ',' or ']', but got '<stream end>'" in err
    assert "(while parsing a flow sequence at line 1, column 6)" in err and "<unicode string>" not in err
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


async def test_doctor_reports_each_part(config_file, fake_llm, tmp_path) -> None:
    port = free_port()
    config = config_file(fake_llm.base_url, llm={"base_url": fake_llm.base_url, "api_key": "test-key", "model": "fake-model"},
                         metrics={"port": port})
    code, out, _ = await membridge(config, "doctor")
    lines = out.splitlines()
    assert [line.split(":")[0].split()[-1] for line in lines] == [
        "config", "sqlite", "workspace", "flush", "lancedb", "embeddings", "llm", "running"]
    assert code == 0 and all(line.startswith("ok") for line in lines[:7])
    assert lines[0] == f"ok    config: {config}" and lines[2].startswith(f"ok    workspace: {tmp_path / 'ws'}: ")
    assert lines[3] == "ok    flush: no flush job is failing"
    assert lines[6] == f"ok    llm: {fake_llm.base_url} reachable, model 'fake-model'"
    assert lines[7].startswith(f"skip  running: no membridge process answers at http://127.0.0.1:{port}/readyz (")
    code, out, _ = await membridge(config_file("http://127.0.0.1:9/v1"), "doctor")
    assert code == 1 and "FAIL  llm: cannot reach the LLM at http://127.0.0.1:9/v1" in out


async def test_doctor_reads_the_running_bots_readiness(tmp_path, metered_bot) -> None:
    _telegram, llm, services, base = metered_bot
    config = tmp_path / "doctor.yaml"
    config.write_text(json.dumps({"workspace": str(services.config.workspace), "embedding": {"provider": "none"},
                                  "llm": {"base_url": llm.base_url, "api_key": "test-key", "model": "fake-model"},
                                  "metrics": {"port": services.config.metrics.port}}), encoding="utf-8")
    code, out, _ = await membridge(config, "doctor")
    assert code == 0, out
    assert out.splitlines()[-1] == f"ok    running: {base}/readyz: ready (index, flush_worker, telegram)"


async def test_doctor_fails_on_a_model_the_server_lacks(config_file, fake_llm) -> None:
    code, out, _ = await membridge(config_file(fake_llm.base_url), "doctor")  # llm.model: the default gpt-4o-mini
    assert code == 1
    assert f"FAIL  llm: {fake_llm.base_url} has no model 'gpt-4o-mini' (llm.model); it has: fake-model\n" in out


async def test_doctor_names_a_flush_job_that_keeps_failing(config_file) -> None:
    from bridge.config import load_config
    from bridge.wiring.app import Services
    from memory import Turn

    config = config_file("http://127.0.0.1:9/v1")
    services = Services(load_config(str(config)))
    try:
        store = services.conversations
        store.ensure_session("telegram-5|c", "telegram-5")
        store.append_messages("telegram-5|c", [Turn("user", "hello"), Turn("assistant", "hi")])
        job = store.trim("telegram-5|c", 3, "trim", "2026-12-01")
        assert job is not None
        for _ in range(6):
            store.fail_job_attempt(job.id, "[Errno 28] No space left on device")
    finally:
        services.close()
    code, out, _ = await membridge(config, "doctor", "--offline")
    assert code == 1
    [line] = [line for line in out.splitlines() if " flush: " in line]
    assert line.startswith("FAIL  flush: 1 flush job(s) failing and retried with backoff; oldest: job 1 of scope "
                           "telegram-5, 6 attempts since ")
    assert line.endswith("last error: [Errno 28] No space left on device")


async def test_doctor_offline_checks_no_server(config_file, tmp_path) -> None:
    code, out, _ = await membridge(config_file("http://127.0.0.1:9/v1"), "doctor", "--offline")
    assert code == 0, out
    assert out.splitlines()[4:] == [
        f"ok    lancedb: LanceDB {version('lancedb')} installed (not opened: --offline)",
        "ok    embeddings: provider 'none': keyword search only",
        "skip  llm: http://127.0.0.1:9/v1, model 'gpt-4o-mini' (not called: --offline)",
    ]


async def test_doctor_fills_what_a_killed_sync_left_queued(config_file, tmp_path) -> None:
    from memory import MemoryManager, MemorySettings, Workspace

    memory_md = tmp_path / "ws" / "scopes" / "terminal-alice" / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("- redeployment of the kiosk\n")
    manager = MemoryManager(Workspace(tmp_path / "ws"), MemorySettings(), embedder=None)
    manager.indexer._start_trigram_fill = lambda: None  # as if killed before the background fill ran
    manager.indexer.sync()
    manager.close()
    _code, out, _ = await membridge(config_file(), "doctor")
    assert "ok    workspace:" in out and "1 chunks indexed, keyword index intact; 1 queued for the substring index, added now" in out
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        assert db.execute("SELECT count(*) FROM tri_pending").fetchone() == (0,)


def _damaged_index(tmp_path: Path, damage: str) -> None:
    """A workspace with one indexed note, then ``damage`` done to index.db by another program."""
    from memory import MemoryManager, MemorySettings, Workspace

    memory_md = tmp_path / "ws" / "scopes" / "terminal-alice" / "MEMORY.md"
    memory_md.parent.mkdir(parents=True)
    memory_md.write_text("- the parrot says hello\n")
    manager = MemoryManager(Workspace(tmp_path / "ws"), MemorySettings(), embedder=None)
    manager.indexer.sync()
    manager.indexer.finish_indexing()
    manager.close()
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        db.execute(damage)


#: Damage FTS5 can repair itself (segments lost), and damage that stops it opening the table at
#: all (block 10 is the structure record; the config row holds the format version).
DAMAGES = {
    "segments lost": "DELETE FROM chunks_fts_data WHERE id > 10",
    "structure record lost": "DELETE FROM chunks_fts_data WHERE id = 10",
    "config lost": "DELETE FROM chunks_fts_config",
    "substring index structure lost": "DELETE FROM chunks_tri_data WHERE id = 10",
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
async def test_doctor_rebuilds_a_damaged_keyword_index(config_file, tmp_path, damage) -> None:
    _damaged_index(tmp_path, damage)
    _code, out, _ = await membridge(config_file(), "doctor", "--offline")
    assert f"ok    workspace: {tmp_path / 'ws'}: keyword index was damaged and has been rebuilt" in out
    _code, out, _ = await membridge(config_file(), "doctor", "--offline")
    assert f"ok    workspace: {tmp_path / 'ws'}: 1 chunks indexed, keyword index intact" in out
    _code, out, _ = await membridge(config_file(), "memory", "search", "parrot")
    assert "the parrot says hello" in out
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


async def test_a_search_repairs_a_keyword_index_whose_structure_record_is_lost(config_file, tmp_path) -> None:
    _damaged_index(tmp_path, DAMAGES["structure record lost"])
    code, out, err = await membridge(config_file(), "memory", "search", "parrot")
    assert code == 0 and "the parrot says hello" in out, err
    _code, out, _ = await membridge(config_file(), "doctor", "--offline")
    assert "1 chunks indexed, keyword index intact" in out


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


# --------------------------------------------------------------- the command line itself
async def test_version_and_help_without_a_command() -> None:
    code, out, err = await membridge(None, "--version")
    assert (code, out, err) == (0, f"membridge {version('membridge')}\n", "")
    code, out, err = await membridge(None)
    assert code == 0 and err == "" and out.startswith("usage: membridge [-h]") and "commands:" in out
    assert "    run            start the bot" in out and "    console        serve the memory console" in out
    code, out, _ = await membridge(None, "memory")
    assert code == 0 and out.startswith("usage: membridge memory [-h]") and "    history        list MEMORY.md versions" in out


def test_every_command_has_a_description_and_an_example(capsys) -> None:
    from bridge.cli.main import main

    commands = [["run"], ["chat"], ["console"], ["doctor"]] + [["memory", name] for name in (
        "sync", "search", "get", "add", "dream", "stats", "history", "revert")] + [["knowledge", name] for name in (
        "list", "show", "add", "rm", "graph")]
    for command in commands:
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--help"])
        out = capsys.readouterr().out
        usage, description = out.split("\n\n")[:2]
        assert exit_.value.code == 0 and usage.startswith(f"usage: membridge {' '.join(command)} ")
        assert description[0].isupper() and description.endswith("."), (command, description)
        assert f"\nexample:\n  membridge {command[0]}" in out or "\nexample:\n  MEMBRIDGE_" in out, command


async def test_global_options_work_after_the_command(config_file, tmp_path) -> None:
    config = config_file()
    code, out, err = await membridge(None, "memory", "add", "after the command", "--config", str(config), "-v")
    assert code == 0 and "(scope terminal-alice)" in out, err
    assert " DEBUG " in err  # -v after the command turned debug logging on
    code, out, _ = await membridge(config, "memory", "search", "command", "--json")
    assert [hit["text"] for hit in json.loads(out)] == ["- after the command"]


async def test_a_query_starting_with_a_dash_after_two_dashes(config_file) -> None:
    config = config_file()
    await membridge(config, "memory", "add", "ship -v2 of the release notes")
    code, out, err = await membridge(config, "memory", "search", "--json", "--", "-v2 release")
    assert code == 0, err
    assert [hit["text"] for hit in json.loads(out)] == ["- ship -v2 of the release notes"]


def test_a_closed_pipe_ends_quietly(config_file, tmp_path) -> None:
    config = config_file()
    daily = tmp_path / "ws" / "scopes" / "terminal-alice" / "memory" / "2026-01-05.md"
    daily.parent.mkdir(parents=True)
    daily.write_text("".join(f"- note {n}\n" for n in range(200_000)))  # far more than a pipe buffer
    command = (f"{sys.executable} -m bridge --config {config} memory get memory/2026-01-05.md 2>{tmp_path / 'err'}"
               " | head -n 2")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.stdout == "- note 0\n- note 1\n"
    assert (tmp_path / "err").read_text() == ""  # no BrokenPipeError traceback
    assert result.returncode == 141  # 128 + SIGPIPE, as cat or grep would end


# ------------------------------------------------------------------------ paths
async def test_relative_paths_in_a_config_file_start_at_its_folder(tmp_path) -> None:
    folder, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    config = folder / "config.yaml"
    config.write_text("workspace: ./ws\nembedding: {provider: none}\nchannels: {terminal: {user: alice}}\n")
    code, out, err = await membridge(Path("../conf/config.yaml"), "memory", "add", "relative", cwd=elsewhere)
    assert code == 0, err
    assert (folder / "ws" / "scopes" / "terminal-alice" / "memory" / f"{date.today()}.md").read_text() == "- relative\n"
    assert list(elsewhere.iterdir()) == [] and err == ""
    env = {**os.environ, "MEMBRIDGE_CONFIG": str(config)}
    code, out, _ = await membridge(None, "doctor", "--offline", cwd=elsewhere, env=env)
    assert f"ok    config: {config}\n" in out and f"ok    workspace: {folder / 'ws'}: 0 chunks indexed" in out


async def test_without_a_config_file_the_workspace_is_the_user_data_folder(tmp_path) -> None:
    home, here = tmp_path / "home", tmp_path / "here"
    here.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("XDG_", "MEMBRIDGE_"))}
    env.update(HOME=str(home), MEMBRIDGE_CONFIG="")
    code, out, err = await membridge(None, "memory", "add", "hello", "--scope", "mine", "--create", cwd=here, env=env)
    data = home / ".local" / "share" / "membridge"
    assert code == 0, err
    assert err == (f"membridge: no config file (looked for --config, $MEMBRIDGE_CONFIG, ./config.yaml and "
                   f"{home}/.config/membridge/config.yaml); using built-in defaults with the workspace in {data}\n")
    assert (data / "scopes" / "mine" / "memory" / f"{date.today()}.md").is_file()
    assert list(here.iterdir()) == []  # nothing in the current directory
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    code, out, _ = await membridge(None, "doctor", "--offline", cwd=here, env=env)
    assert f"ok    workspace: {tmp_path / 'xdg' / 'membridge'}: 0 chunks indexed" in out
    assert "ok    config: no config file (looked for" in out
    user_config = home / ".config" / "membridge" / "config.yaml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("workspace: ./ws\nembedding: {provider: none}\n")
    code, out, err = await membridge(None, "doctor", "--offline", cwd=here, env=env)
    assert f"ok    config: {user_config}\n" in out and f"ok    workspace: {user_config.parent / 'ws'}:" in out
    assert "no config file" not in err


# ------------------------------------------------------------ memory surprises
async def test_add_to_an_unknown_scope_needs_create(config_file, tmp_path) -> None:
    config = config_file()
    await membridge(config, "memory", "add", "mine")
    code, out, err = await membridge(config, "memory", "add", "lost", "--scope", "typo")
    assert (code, out) == (1, "")
    assert err == "membridge: unknown scope 'typo' (known scopes: terminal-alice); add --create to start a new scope\n"
    assert not (tmp_path / "ws" / "scopes" / "typo").exists()
    code, out, _ = await membridge(config, "memory", "add", "found", "--scope", "typo", "--create")
    assert code == 0 and out == f"added to memory/{date.today()}.md (scope typo)\n"


async def test_a_dream_or_revert_that_changes_nothing_writes_nothing(config_file, tmp_path, fake_llm) -> None:
    config = config_file(fake_llm.base_url)
    scope_dir = tmp_path / "ws" / "scopes" / "terminal-alice"
    (scope_dir / "memory").mkdir(parents=True)
    (scope_dir / "MEMORY.md").write_text("- likes tea\n")
    await membridge(config, "memory", "add", "had tea again")
    diary = scope_dir / "memory" / "dreams" / f"{date.today()}.md"
    for flags in ([], ["--force"]):
        fake_llm.reply("[MEMORY]\n- likes tea\n[DREAM]\nNothing new today.")
        code, out, err = await membridge(config, "memory", "dream", *flags)
        assert (code, out) == (0, "terminal-alice: MEMORY.md already up to date: no new version, no diary entry\n"), err
        assert not diary.exists()
    code, out, _ = await membridge(config, "memory", "history")
    assert out == "MEMORY.md of terminal-alice has no recorded versions yet\n"
    fake_llm.reply("[MEMORY]\n- likes tea a lot\n[DREAM]\nTea again.")
    await membridge(config, "memory", "dream", "--force")
    code, out, _ = await membridge(config, "memory", "history", "--json")
    versions = json.loads(out)
    assert [v["cause"] for v in versions] == ["deep dream", "as found on disk"]
    code, out, _ = await membridge(config, "memory", "revert", str(versions[0]["id"]))
    assert (code, out) == (0, f"terminal-alice: MEMORY.md already equals version {versions[0]['id']}; nothing "
                              "changed, no new version recorded\n")
    code, out, _ = await membridge(config, "memory", "history", "--json")
    assert len(json.loads(out)) == 2


# ------------------------------------------------------------------ run: what it says


def _status_lines(stderr: str) -> list[str]:
    """The `membridge run` status lines, without their time stamps."""
    return [line.split(" INFO membridge: ", 1)[1] for line in stderr.splitlines() if " INFO membridge: " in line]


async def test_run_names_each_part_it_starts_and_says_when_it_stops(config_file, tmp_path) -> None:
    import re
    import signal

    from fakes.slack_server import BOT_TOKEN, FakeSlack
    from fakes.telegram_server import TOKEN, FakeTelegram

    port, slack_port, metrics_port = free_port(), free_port(), free_port()
    async with FakeTelegram() as telegram, FakeSlack() as slack:
        config = config_file(
            channels={"terminal": {"user": "alice"},
                      "telegram": {"enabled": True, "token": TOKEN, "base_url": telegram.base_url},
                      "slack": {"enabled": True, "bot_token": "${SLACK_BOT_TOKEN}", "signing_secret": "s3cret-sign",
                                "api_url": slack.api_url, "port": slack_port}},
            console={"enabled": True, "port": port, "token": "console-read-token"}, metrics={"port": metrics_port})
        env = {**os.environ, "SLACK_BOT_TOKEN": BOT_TOKEN}  # as an operator sets it: bolt must not warn about it
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "--config", str(config), "run", cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stderr is not None
        seen: list[str] = []
        while not any("INFO membridge: running:" in line for line in seen):
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            assert line, "".join(seen)
            seen.append(line.decode())
        process.send_signal(signal.SIGTERM)
        out, rest = await asyncio.wait_for(process.communicate(), 60)
    stderr = "".join(seen) + rest.decode()
    assert process.returncode == 0, stderr
    lines = _status_lines(stderr)
    assert lines[:3] == ["embeddings: none (keyword search only)",
                         f"console: http://127.0.0.1:{port}/ (sign in with console.token or console.admin_token)",
                         f"metrics: http://127.0.0.1:{metrics_port}/metrics (health: /healthz, /readyz)"]
    assert re.fullmatch(r"nightly run \(summaries, Deep Dream\): next at \d{4}-\d\d-\d\d \d\d:\d\d", lines[3])
    assert lines[4] == "telegram: @membridge_bot (polling)"
    assert lines[5] == f"slack: team Fake Team as @membridge (Events API at http://127.0.0.1:{slack_port}/slack/events)"
    assert lines[6:] == ["running: terminal, telegram, slack; Ctrl-C or SIGTERM stops it",
                         "stopped: terminal, telegram, slack (up 0h 00m)"]
    assert "console-read-token" not in stderr and BOT_TOKEN not in stderr
    assert "token will be unused" not in stderr and "WARNING" not in stderr, stderr
    assert out.decode().startswith("membridge — chatting as alice (memory scope terminal-alice).")


def _read_until(fd: int, marker: str, timeout_s: float = 60.0) -> str:
    """What a pseudo-terminal shows until ``marker`` appears (or the process ends)."""
    import select
    import time

    seen, deadline = b"", time.monotonic() + timeout_s
    while marker.encode() not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen.decode("utf-8", "replace").replace("\r\n", "\n")


def test_on_a_terminal_the_chat_shows_no_log_lines_and_refuses_a_cut_paste(config_file, tmp_path) -> None:
    import pty

    config = config_file()  # an LLM that cannot be reached: every turn logs a warning
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "bridge", "--config", str(config), "run"], cwd=ROOT,
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        screen = _read_until(master, "you> ")
        os.write(master, b"hello\n")
        screen += _read_until(master, "you> ")
        os.write(master, b"x" * 5000 + b"\n")  # the terminal delivers 4,095 bytes of it
        screen += _read_until(master, "it was not sent.")
        os.write(master, b"\x04")  # Ctrl-D
        screen += _read_until(master, "stopped: terminal")
        assert process.wait(60) == 0, screen
    finally:
        process.kill()
        os.close(master)
    log_file = tmp_path / "ws" / "membridge.log"
    assert f"INFO membridge: log: {log_file} (the chat below shows the bot's messages only)" in screen
    assert "bot> I can't reach my language model right now" in screen
    assert "WARNING" not in screen and "bridge.agent" not in screen  # the warning went to the log file
    assert "WARNING bridge.agent" in log_file.read_text()
    assert "(That line reached the terminal's limit of 4,095 bytes, so its end was probably cut off; it was not " \
           "sent. Paste long text in parts, or pipe it in: membridge chat < notes.txt)" in screen
    assert screen.count("bot> ") == 1  # the cut line was not answered
    assert "INFO membridge: stopped: terminal (up 0h 00m)" in screen


async def test_a_long_piped_line_is_read_whole(config_file, fake_llm) -> None:
    long_note = "remember " + " ".join(f"word{n}" for n in range(1500))  # ~13,000 characters on one line
    fake_llm.reply("noted")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config_file(fake_llm.base_url)), "chat", cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(f"{long_note}\n".encode()), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode().endswith("noted\n")
    assert fake_llm.requests[-1]["messages"][-1] == {"role": "user", "content": long_note}


async def test_without_an_llm_the_chat_saves_notes_and_answers_with_search_results(config_file, tmp_path) -> None:
    scope_dir = tmp_path / "ws" / "scopes" / "terminal-alice"
    scope_dir.mkdir(parents=True)
    (scope_dir / "MEMORY.md").write_text("- has a cat\n- likes tea\n")
    chat = "I like green tea from Kyoto\nwhat tea do I like?\n/memory forget! cat\n/memory revert\n"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config_file(llm={})), "chat", cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(chat.encode()), 60)
    assert process.returncode == 0, err.decode()
    today = date.today()
    lines = out.decode().splitlines()
    assert lines[:2] == [
        "membridge — chatting as alice (memory scope terminal-alice). /help lists commands; Ctrl-D quits.",
        "No language model is connected: I save what you tell me and answer questions with memory search results. "
        "For real answers set OPENAI_API_KEY, or llm.base_url in config.yaml (e.g. Ollama: http://localhost:11434/v1).",
    ]
    assert lines[2] == f"Saved to today's memory (memory/{today}.md)."
    assert (scope_dir / "memory" / f"{today}.md").read_text() == "- I like green tea from Kyoto\n"
    assert lines[3] == "Memory search results (no language model is connected, so this is not an AI answer):"
    assert lines[4].startswith("1. ") and lines[5].startswith("2. ")
    assert any(f". - I like green tea from Kyoto ({today}, memory/{today}.md:1, score 0." in line for line in lines[4:6])
    assert "Forgotten for good: 1 in memory files" in out.decode()
    assert "has no earlier version" in out.decode() and "only an admin" not in out.decode()  # the terminal user may
    assert (scope_dir / "MEMORY.md").read_text() == "- likes tea\n"  # a revert cannot bring it back


async def test_logging_as_json_to_a_file(config_file, tmp_path) -> None:
    config = config_file(logging={"format": "json", "file": "logs/bot.jsonl"})  # relative to the config's folder
    code, _, err = await membridge(config, "run")  # stdin is empty: the terminal chat ends at once
    assert code == 0, err
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    said = [(r["level"], r["logger"], r["message"]) for r in records if r["logger"] == "membridge"]
    assert said[-2:] == [("info", "membridge", "running: terminal; Ctrl-C or SIGTERM stops it"),
                         ("info", "membridge", "stopped: terminal (up 0h 00m)")]
    assert all(set(r) == {"time", "level", "logger", "message"} and r["time"][:2] == "20" for r in records)
    assert [json.loads(line) for line in (tmp_path / "logs" / "bot.jsonl").read_text().splitlines()] == records
