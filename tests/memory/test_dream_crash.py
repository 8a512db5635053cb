"""SIGKILL while MEMORY.md is being replaced: the file is always the old or the new version."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from memory.files.files import atomic_write
target = Path(sys.argv[1])
versions = [("- old fact\\n" * 40000).encode(), ("- new fact\\n" * 45000).encode()]
print("READY", flush=True)
i = 0
while True:
    atomic_write(target, versions[i % 2])
    i += 1
"""


@pytest.mark.slow
async def test_kill_during_memory_write_never_leaves_a_torn_file(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    old, new = ("- old fact\n" * 40000).encode(), ("- new fact\n" * 45000).encode()
    rng = random.Random(7)
    for _ in range(8):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER.format(root=str(ROOT)), str(target), stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 30)).strip() == b"READY"
        await asyncio.sleep(rng.uniform(0.01, 0.15))
        process.send_signal(signal.SIGKILL)
        await process.wait()
        if target.exists():
            assert target.read_bytes() in (old, new)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "MEMORY.md"]
    assert all(name.startswith(".MEMORY.md.") for name in leftovers)  # temp files only, never the target
