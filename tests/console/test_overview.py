"""The console's landing page, a scope's overview: the same figures as ``membridge memory stats`` and
the commands that count each part on their own (history, knowledge list), on a workspace built
with the real commands (add, dream through the fake OpenAI server, knowledge add, sync)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

import yaml
from aiohttp.test_utils import TestClient, TestServer
from fakes.openai_server import FakeOpenAI
from support.bot import make_services
from support.cli import membridge

from bridge.config import load_config
from bridge.console import create_app
from bridge.wiring.app import Services

READ = {"Authorization": "Bearer read-tok"}
SCOPE = "terminal-alice"


def _config(tmp_path: Path, llm_url: str) -> Path:
    data = {"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
            "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 5},
            "channels": {"terminal": {"user": "alice"}}, "console": {"token": "read-tok"},
            "memory": {"dream": {"time": "21:30", "jitter_minutes": 5}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _day(days_ago: int) -> str:
    return (date.today() - timedelta(days=days_ago)).isoformat()


async def _json_of(config: Path, *args: str) -> object:
    code, out, err = await membridge(config, *args, "--json")
    assert code == 0, err
    return json.loads(out)


async def test_the_overview_equals_what_the_commands_report(tmp_path: Path) -> None:
    async with FakeOpenAI() as llm:
        config = _config(tmp_path, llm.base_url)
        daily = tmp_path / "ws" / "scopes" / SCOPE / "memory"
        daily.mkdir(parents=True)
        notes = {200: "- the old bike\n", 40: "- likes tea\n- walks the dog\n", 3: "- booked Porto\n",
                 1: "# Monday\n- lives in Porto\n- new flat\n  with a balcony\nplain line\n"}
        for days_ago, text in notes.items():
            (daily / f"{_day(days_ago)}.md").write_text(text, encoding="utf-8")
        assert (await membridge(config, "memory", "add", "the cat is called Miso"))[0] == 0  # today's file
        llm.reply("[MEMORY]\n- likes tea\n- lives in Porto\n- has a cat, Miso\n[DREAM]\nPorto and a cat.")
        assert (await membridge(config, "memory", "dream"))[0] == 0
        await membridge(config, "knowledge", "add", "tech/deploy", "# Deploying\nSteps.")
        await membridge(config, "knowledge", "add", "pets/cats", "# Cats\nMiso.")
        assert (await membridge(config, "memory", "sync"))[0] == 0

        stats = await _json_of(config, "memory", "stats")
        history = await _json_of(config, "memory", "history")
        pages = await _json_of(config, "knowledge", "list")
        services = Services(load_config(str(config)))
        try:
            async with TestClient(TestServer(create_app(services))) as client:
                response = await client.get(f"/api/scopes/{SCOPE}/overview", headers=READ)
                assert response.status == 200
                overview = await response.json()
                missing = await client.get("/api/scopes/nobody/overview", headers=READ)
                assert missing.status == 404 and SCOPE in (await missing.json())["error"]
        finally:
            services.close()

    assert overview == stats  # the console and `membridge memory stats` agree, figure by figure
    assert isinstance(history, list) and isinstance(pages, list) and isinstance(stats, dict)
    assert stats["memory_entries"] == history[0]["entries"] == 3  # what `memory history` counts
    assert stats["knowledge_pages"] == len(pages) == 2  # what `knowledge list` lists
    assert {key: stats[key] for key in ("scope", "days", "notes", "first_day", "last_day", "dream_diaries", "embedding")} == {
        "scope": SCOPE, "days": 5, "notes": 7, "first_day": _day(200), "last_day": _day(0), "dream_diaries": 1,
        "embedding": {"provider": "none", "model": None}}
    per_day = {item["date"]: item["notes"] for item in stats["notes_per_day"]}
    assert len(per_day) == 91 and min(per_day) == _day(90) and max(per_day) == _day(0)
    assert {day: count for day, count in per_day.items() if count} == {_day(40): 2, _day(3): 1, _day(1): 2, _day(0): 1}
    for key in ("last_sync", "last_dream"):  # this very run, with its offset
        assert abs(datetime.fromisoformat(stats[key]).timestamp() - datetime.now().timestamp()) < 120, stats
    next_dream = datetime.fromisoformat(stats["next_dream"]).astimezone()
    assert next_dream.tzinfo is not None and (21, 30) <= (next_dream.hour, next_dream.minute) <= (21, 35)


async def test_stats_as_text(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    await membridge(config, "memory", "add", "one note")
    code, out, err = await membridge(config, "memory", "stats")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:4] == [f"scope           {SCOPE}", "MEMORY.md       0 entries",
                         f"daily memory    1 note on 1 day ({_day(0)} to {_day(0)})", "last 91 days    1 note"]
    assert "last Deep Dream never" in lines and "embeddings      none" in lines
    code, out, err = await membridge(config, "memory", "stats", "--scope", "nobody")
    assert code == 1 and "unknown scope 'nobody'" in err


async def test_without_deep_dream_there_is_no_next_one(tmp_path: Path) -> None:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={"token": "read-tok"},
                             memory={"dream": {"enabled": False}})
    services.memory.append_daily(SCOPE, "- a note")
    try:
        async with TestClient(TestServer(create_app(services))) as client:
            overview = await (await client.get(f"/api/scopes/{SCOPE}/overview", headers=READ)).json()
    finally:
        services.close()
    assert (overview["next_dream"], overview["last_dream"], overview["last_sync"]) == (None, None, None)
    assert (overview["days"], overview["notes"], overview["memory_entries"]) == (1, 1, 0)
