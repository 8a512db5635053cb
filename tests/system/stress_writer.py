"""The second process of the pipeline stress test: a person at a shell writing to the same workspace.

It appends notes to the scope's daily memory and adds lines to its MEMORY.md (a compare-and-swap
edit, as the console does), printing each note's token once it is committed, until the stop file
appears. ``ready`` on the first line says it has opened the workspace.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bridge.config import load_config
from bridge.wiring.app import Services
from memory.files.memory_file import MemoryChanged

PACE_S = 0.05  # load shaping only (nothing waits on it): a write every 50 ms leaves the lock to the bot too


def main(config: str, scope: str, stop: Path) -> None:
    services = Services(load_config(config))
    memory_file = services.dreamer.memory_file
    print("ready", flush=True)
    number = 0
    while not stop.exists():
        number += 1
        token = f"kZ{number:04d}q"
        if number % 10:
            services.memory.append_daily(scope, f"- child note {token}")
            print(f"daily {token}", flush=True)
        else:
            while True:
                read = memory_file.read(scope)
                try:
                    memory_file.write(scope, read + f"- child {token}\n".encode(), "child edit", expected=read)
                    break
                except MemoryChanged:
                    continue
            print(f"memory {token}", flush=True)
        time.sleep(PACE_S)
    services.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
