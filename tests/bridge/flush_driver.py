"""Run in a subprocess by test_crash.py: drive real turns, then die by SIGKILL at a chosen point.

usage: flush_driver.py WORKSPACE LLM_URL MODE
  turns         3 turns with max_turns 2 (a flush job is recorded), print READY, wait to be killed
  die-on-finish run pending jobs, SIGKILL ourselves right after the daily write, before "done"
  recover       run pending jobs to completion and exit 0
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.bot import dm, make_services  # noqa: E402


async def main(workspace: str, url: str, mode: str) -> None:
    services = make_services(Path(workspace), url, context={"max_turns": 2})
    if mode == "turns":
        for i in range(3):
            await services.agent.handle(dm(f"my gym locker is number {i}"))
        print("READY", flush=True)
        time.sleep(60)  # noqa: ASYNC251 - holds the loop so no flush runs before the kill
    if mode == "die-on-finish":
        services.conversations.finish_job = lambda job_id: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[method-assign]
    await services.flush_worker.drain()
    print("DONE", flush=True)
    await services.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
