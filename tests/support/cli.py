"""Running the ``membridge`` command as a user does: a real subprocess, its exit code and output."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def membridge(config: Path | None, *args: str, cwd: Path = ROOT,
                    env: dict[str, str] | None = None) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "bridge"] + (["--config", str(config)] if config else []) + list(args)
    process = await asyncio.create_subprocess_exec(*command, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()
