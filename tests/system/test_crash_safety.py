"""SIGKILL at random moments of a sync and of conversation appends, in real subprocesses."""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import sys
from pathlib import Path

import pytest
import yaml
from fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ["apple", "river 7", "部署", "猫", "note 123", "Python 教程", "ountai", "ytho"]  # the last two: substrings


def build_workspace(root: Path, files: int = 300) -> None:
    rng = random.Random(3)
    words = ["apple", "river", "mountain", "Python", "教程", "部署", "机器人", "猫", "tea", "note"]
    for i in range(files):
        scope = f"user-{i % 5}"
        path = root / "scopes" / scope / "memory" / f"2026-{(i % 12) + 1:02d}-{(i % 28) + 1:02d}-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"- note {i} line {j}: " + " ".join(rng.choice(words) for _ in range(8)) + f" {j}" for j in range(40)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def config(tmp: Path, workspace: Path, url: str) -> Path:
    path = tmp / f"{workspace.name}.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(workspace), "embedding": {
        "provider": "openai", "base_url": url, "api_key": "test-key", "batch_size": 64, "model": "emb"}}))
    return path


async def membridge(cfg: Path, *args: str, kill_after: float | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(cfg), *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    if kill_after is not None:
        await asyncio.sleep(kill_after)
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
    out, err = await asyncio.wait_for(process.communicate(), 300)
    return process.returncode or 0, out.decode() + err.decode()


async def answers(cfg: Path) -> dict[str, list]:
    """What the index answers, read in-process (no sync first: the index as the killed runs left it)."""
    from bridge.config import load_config
    from bridge.wiring.app import Services

    services = Services(load_config(str(cfg)))

    def ask() -> dict[str, list]:
        return {
            f"{scope}:{query}": [(h.path, h.start_line, h.end_line, round(h.score, 4))
                                 for h in services.memory.search(query, scope, limit=5, auto_sync=False)]
            for scope in ("user-0", "user-3") for query in QUERIES
        }

    try:
        found = await asyncio.to_thread(ask)
        assert services.memory.storage.trigram_queue() == 0 and services.memory.keywords.check()
        return found
    finally:
        services.close()


@pytest.mark.slow
async def test_index_after_killed_syncs_answers_like_a_fresh_sync(tmp_path: Path) -> None:
    async with FakeOpenAI(embed_dim=32) as fake:
        killed = tmp_path / "killed"
        build_workspace(killed, files=200)
        fresh = tmp_path / "fresh"
        shutil.copytree(killed, fresh)
        killed_cfg, fresh_cfg = config(tmp_path, killed, fake.base_url), config(tmp_path, fresh, fake.base_url)
        rng = random.Random(11)
        for _ in range(3):
            code, output = await membridge(killed_cfg, "memory", "sync", kill_after=rng.uniform(1.0, 2.5))
            assert code in (0, -signal.SIGKILL), output
        assert (await membridge(killed_cfg, "memory", "sync"))[0] == 0
        assert (await membridge(fresh_cfg, "memory", "sync"))[0] == 0
        assert await answers(killed_cfg) == await answers(fresh_cfg)


APPENDER = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from memory import Database, Turn
from memory.conversations.conversations import ConversationStore
store = ConversationStore(Database(Path(sys.argv[1])))
store.ensure_session("s", "alice")
n = int(sys.argv[2])
while True:
    n += 1
    [seq] = store.append_messages("s", [Turn("user", f"message {{n}}")])
    print(n, seq, flush=True)
"""


@pytest.mark.slow
async def test_killed_appends_lose_no_committed_message_and_duplicate_none(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    from memory import Database
    from memory.conversations.conversations import ConversationStore

    committed: list[tuple[int, int]] = []
    for _ in range(5):
        # resume after what is stored: a message committed but not yet printed when killed counts
        start = len(ConversationStore(Database(db)).context_messages("s")) if db.exists() else 0
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", APPENDER.format(root=str(ROOT)), str(db), str(start),
            stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        # Kill after a random number of appends the writer reported (a signal, not a time: a
        # loaded machine may take seconds to start Python), mid-append as likely as not.
        seen = b""
        for _ in range(random.randint(20, 200)):
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, "the writer stopped on its own"
            seen += line
        process.send_signal(signal.SIGKILL)
        rest, _ = await process.communicate()
        *complete, _partial = (seen + rest).decode().split("\n")  # a kill can cut the last line
        committed += [(int(n), int(seq)) for n, seq in (line.split() for line in complete)]
    stored = ConversationStore(Database(db)).context_messages("s")
    seqs = [m.seq for m in stored]
    assert seqs == list(range(1, len(seqs) + 1))  # contiguous, no duplicates
    texts = [m.turn.text for m in stored]
    assert len(texts) == len(set(texts))
    for n, seq in committed:  # every append the writer saw committed is there, at its seq
        assert stored[seq - 1].turn.text == f"message {n}"
    assert len(committed) > 50
