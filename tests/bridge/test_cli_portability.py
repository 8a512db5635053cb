"""``membridge memory export`` / ``import`` as a user runs them: real subprocesses, real zips."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import zipfile
from pathlib import Path

from support.cli import ROOT, membridge
from support.stress import Scan

from bridge.config import load_config
from bridge.wiring.app import Services
from memory import Turn

TOKEN = "quokka-ledger-5521"


def plant(config: Path) -> None:
    """Notes, a MEMORY.md with a version, and a conversation in alice's scope (terminal-alice)."""
    services = Services(load_config(str(config)))
    try:
        services.memory.append_daily("terminal-alice", f"- the storage unit code is {TOKEN}")
        services.dreamer.memory_file.write("terminal-alice", b"- alice keeps bees\n", "dream")
        store = services.conversations
        store.ensure_session("terminal-alice|terminal::alice:", "terminal-alice", "terminal")
        store.append_messages("terminal-alice|terminal::alice:", [Turn("user", f"code {TOKEN}")])
    finally:
        services.close()


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name != "manifest.json"}


async def test_export_import_export_round_trip(config_file, tmp_path: Path) -> None:
    config = config_file()
    plant(config)
    first = tmp_path / "alice.zip"
    code, out, err = await membridge(config, "memory", "export", "--out", str(first))
    assert code == 0, err
    assert out.splitlines()[0] == f"exported scope terminal-alice to {first} ({first.stat().st_size:,} bytes)"
    assert out.splitlines()[1] == ("  1 memory md, 1 daily files, 0 dream diaries, 0 other files, 0 media files, 1 versions, "
                                   "1 sessions, 1 messages")
    code, out, err = await membridge(config, "memory", "import", str(first), "--scope", "alice-copy", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["scope"] == "alice-copy" and report["counts"]["messages"] == 1 and report["chunks_indexed"] == 2
    code, out, err = await membridge(config, "memory", "search", TOKEN, "--scope", "alice-copy", "--json")
    assert code == 0 and [hit["scope"] for hit in json.loads(out)] == ["alice-copy"]
    second = tmp_path / "copy.zip"
    code, _, err = await membridge(config, "memory", "export", "--scope", "alice-copy", "--out", str(second))
    assert code == 0, err
    assert members(first) == members(second)


async def test_errors_name_the_bad_input(config_file, tmp_path: Path) -> None:
    config = config_file()
    plant(config)
    code, _, err = await membridge(config, "memory", "export", "--scope", "nobody", "--out", str(tmp_path / "x.zip"))
    assert code == 1 and "unknown scope 'nobody'" in err and "terminal-alice" in err
    code, _, err = await membridge(config, "memory", "export", "--out", str(tmp_path / "no" / "x.zip"))
    assert code == 1 and f"the folder {tmp_path / 'no'} does not exist" in err
    export = tmp_path / "alice.zip"
    await membridge(config, "memory", "export", "--out", str(export))
    code, _, err = await membridge(config, "memory", "import", str(export))
    assert code == 1 and "--scope NAME" in err
    code, _, err = await membridge(config, "memory", "import", str(export), "--scope", "terminal-alice")
    assert code == 1 and "scope 'terminal-alice' is not empty: it has MEMORY.md, 1 file(s) under memory/" in err
    code, _, err = await membridge(config, "memory", "import", str(tmp_path / "none.zip"), "--scope", "x")
    assert code == 1 and "none.zip does not exist" in err
    assert [p.name for p in tmp_path.glob("*.zip")] == ["alice.zip"]


async def test_a_killed_export_never_leaves_a_half_zip_under_the_name(config_file, tmp_path: Path) -> None:
    """SIGKILL while the zip is written (seen by its temp file appearing): no FILE.zip, and the next
    export cleans the leftover and writes a whole one."""
    config = config_file()
    plant(config)
    daily = tmp_path / "ws" / "scopes" / "terminal-alice" / "memory" / "2026-01-01.md"
    daily.write_bytes(os.urandom(48 << 20).hex().encode())  # 96 MB: seconds to deflate
    out = tmp_path / "out" / "alice.zip"
    out.parent.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), "memory", "export", "--out", str(out), cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    while not list(out.parent.glob(".alice.zip.*.tmp")):
        assert process.returncode is None, "the export ended before its temp file was seen"
        await asyncio.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    await process.wait()
    assert not out.exists()
    code, _, err = await membridge(config, "memory", "export", "--out", str(out))
    assert code == 0, err
    assert [p.name for p in out.parent.iterdir()] == ["alice.zip"]
    assert members(out)["memory/2026-01-01.md"] == daily.read_bytes()


async def test_export_carries_kept_media_and_import_restores_it(config_file, tmp_path: Path) -> None:
    """media.keep: the kept files go into the export and come back with the import, byte for byte."""
    config = config_file(media={"keep": True})
    plant(config)
    services = Services(load_config(str(config)))
    try:
        kept = services.workspace.keep_media("terminal-alice", b"\x89PNG\r\n\x1a\n a photo", ".png")
    finally:
        services.close()
    export = tmp_path / "alice.zip"
    code, out, err = await membridge(config, "memory", "export", "--out", str(export), "--json")
    assert code == 0, err
    assert json.loads(out)["counts"]["media_files"] == 1
    assert members(export)[f"media/{kept.name}"] == kept.read_bytes()
    code, _, err = await membridge(config, "memory", "import", str(export), "--scope", "alice-copy")
    assert code == 0, err
    copy = tmp_path / "ws" / "scopes" / "alice-copy" / "media" / kept.name
    assert copy.read_bytes() == kept.read_bytes()


async def test_a_killed_import_leaves_nothing_that_erase_or_a_later_import_misses(config_file, tmp_path: Path) -> None:
    """SIGKILL while an import unpacks: its staging folder holds the person's files. An erase of the
    scope removes it; so does the next import, which then lands whole."""
    config = config_file()
    plant(config)
    diary = tmp_path / "ws" / "scopes" / "terminal-alice" / "memory" / "dreams" / "2026-01-01.md"
    diary.parent.mkdir()
    diary.write_bytes(os.urandom(24 << 20).hex().encode() + f"\n{TOKEN}\n".encode())  # never indexed: seconds to unpack
    export = tmp_path / "alice.zip"
    code, _, err = await membridge(config, "memory", "export", "--out", str(export))
    assert code == 0, err
    ws = tmp_path / "ws"

    async def killed_import() -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "--config", str(config), "memory", "import", str(export), "--scope", "bee",
            cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        while not list(ws.glob(".import-bee-*/memory/*")):
            assert process.returncode is None, "the import ended before its staging folder was seen"
            await asyncio.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        await process.wait()

    await killed_import()
    assert list(ws.glob(".import-bee-*")), "the kill left no staging folder: nothing was tested"
    code, _, err = await membridge(config, "memory", "erase", "--scope", "bee", "--yes")
    assert code == 0, err
    assert list(ws.glob(".import-bee-*")) == [] and not (ws / "scopes" / "bee").exists()

    await killed_import()
    code, _, err = await membridge(config, "memory", "import", str(export), "--scope", "bee")
    assert code == 0, err
    assert list(ws.glob(".import-bee-*")) == []
    assert (ws / "scopes" / "bee" / "memory" / "dreams" / "2026-01-01.md").read_bytes() == diary.read_bytes()


async def test_exports_a_crash_left_unsent_are_removed_by_forget_and_by_erase(config_file, tmp_path: Path) -> None:
    """``/memory export`` writes its zip into the workspace's outbox, sends it, then deletes it; a bot
    killed in between leaves the zip there, deflated, where no byte search sees the text. A forget
    of the scope lists and removes it (and leaves another scope's), an erase too."""
    config = config_file()
    plant(config)
    services = Services(load_config(str(config)))
    try:
        services.memory.append_daily("terminal-bob", "- bob's note")
        unsent = [services.portability.export_to_outbox(scope).path
                  for scope in ("terminal-alice", "terminal-bob", "terminal-alice")]
    finally:
        services.close()
    ws = tmp_path / "ws"
    assert Scan().holders([ws], [TOKEN.encode()]), "the outbox's zips hold the text: nothing was tested"
    code, out, err = await membridge(config, "memory", "forget", TOKEN, "--dry-run", "--json")
    assert code == 0, err
    listed = [match["where"] for match in json.loads(out)["matches"] if match["place"] == "export leftovers"]
    assert listed == sorted(path.relative_to(ws).as_posix() for path in (unsent[0], unsent[2]))
    code, _, err = await membridge(config, "memory", "forget", TOKEN)
    assert code == 0, err
    assert Scan().holders([ws], [TOKEN.encode()]) == []
    assert [path.exists() for path in unsent] == [False, True, False]
    code, _, err = await membridge(config, "memory", "erase", "--scope", "terminal-bob", "--yes")
    assert code == 0, err
    assert list((ws / ".exports").iterdir()) == []
