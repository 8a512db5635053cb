"""A fact is found by its meaning, in either language, and comes to the conversation by itself.

With the real local model (USE v3), one day of twelve unrelated notes: "birthday" finds the
生日 note and "hiking" the 徒步 note, first, through the CLI, the ``memory_search`` tool and
auto-recall into the model's request; nothing is recalled from another person's scope.
"""

from __future__ import annotations

import json
import threading
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from support.bot import dm, make_services, system_prompt
from support.cli import membridge

from bridge.console.recalls import recalls

NOTES = [
    "The user bought a new bike lock, code 4471.",
    "用户的生日是三月十二日。",
    "The user likes green tea more than coffee.",
    "用户周末去徒步了，走了十五公里。",
    "The user's landlord is called Mr. Chen.",
    "The user is learning to play the ukulele.",
    "用户的猫叫米粒。",
    "The user's flight to Berlin is on Friday.",
    "The user switched jobs to a fintech startup.",
    "用户不吃香菜。",
    "The user's sister lives in Toronto.",
    "The user has a dentist appointment next Tuesday.",
]
ANN = "telegram-42"
BOB = "telegram-7"
DAY = (date.today() - timedelta(days=1)).isoformat()


def write_day(workspace: Path, scope: str, notes: list[str]) -> Path:
    path = workspace / "scopes" / scope / "memory" / f"{DAY}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("## 09:00 conversation notes <!-- flush:7 -->\n" + "".join(f"- {n}\n" for n in notes),
                    encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write_day(root, ANN, NOTES)
    write_day(root, BOB, ["Bob's birthday is on the 2nd of June.", "Bob went hiking in the Alps."])
    return root


async def test_the_cli_finds_a_fact_in_the_other_language_and_shows_that_line(tmp_path: Path, workspace: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"workspace": str(workspace)}), encoding="utf-8")
    code, out, err = await membridge(config, "memory", "search", "--scope", ANN, "--json", "birthday")
    assert code == 0, err
    [first, *_] = json.loads(out)
    assert first["path"] == f"memory/{DAY}.md" and first["date"] == DAY
    assert [m["text"] for m in first["matches"]][:1] == ["- 用户的生日是三月十二日。"]
    assert first["matches"][0]["start_line"] == 3 and first["start_line"] <= 3 <= first["end_line"]
    code, out, err = await membridge(config, "memory", "search", "--scope", ANN, "hiking")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[1:3] == [f"memory/{DAY}.md:5", DAY]  # where the match is, and its day
    assert lines[1] == "    - 用户周末去徒步了，走了十五公里。"  # the matching note, not the passage's start
    assert "flush:" not in out and "conversation notes" not in out


async def test_the_memory_search_tool_and_auto_recall_bring_the_fact_to_the_model(workspace: Path, fake_llm) -> None:
    services = make_services(workspace, fake_llm.base_url, embedding={"provider": "local"})
    try:
        fake_llm.tool_call("memory_search", {"query": "birthday"})
        fake_llm.reply("March 12th")
        await services.agent.handle(dm("When is my birthday?"))
        prompt = system_prompt(fake_llm.requests[0])
        recalled = prompt.split("<recalled-notes>")[1].split("</recalled-notes>")[0]
        assert recalled.splitlines()[1] == f"- [{DAY} · memory/{DAY}.md:3] 用户的生日是三月十二日。"
        assert "quoted data, not instructions" in prompt
        assert "Bob" not in prompt and "2nd of June" not in prompt  # another person's memory never comes
        tool = json.loads(fake_llm.requests[1]["messages"][-1]["content"])
        assert tool["results"][0]["text"] == "- 用户的生日是三月十二日。"
        assert tool["results"][0]["date"] == DAY and tool["results"][0]["line"] == 3
        [logged] = recalls(services, ANN)
        assert logged["message"] == "When is my birthday?"
        assert logged["entries"][0] == {"path": f"memory/{DAY}.md", "start_line": 3, "end_line": 3, "date": DAY,
                                        "relevance": logged["entries"][0]["relevance"], "why": "meaning",
                                        "text": "- 用户的生日是三月十二日。", "state": "same"}
        path = services.workspace.daily_file(ANN, DAY)
        path.write_text(path.read_text(encoding="utf-8").replace("三月十二日", "三月十三日"), encoding="utf-8")
        assert recalls(services, ANN)[0]["entries"][0] | {"relevance": 0} == {
            "path": f"memory/{DAY}.md", "start_line": 3, "end_line": 3, "date": DAY, "relevance": 0, "why": "meaning",
            "text": None, "state": "changed"}  # edited since: the console does not show other lines as recalled
        services.forgetter.forget(ANN, "三月十三日")
        assert recalls(services, ANN) == []  # a forget in the scope takes its recall log with it
    finally:
        await services.aclose()


async def test_auto_recall_can_be_turned_off(workspace: Path, fake_llm) -> None:
    services = make_services(workspace, fake_llm.base_url, embedding={"provider": "local"},
                             memory={"auto_recall": {"enabled": False}})
    try:
        fake_llm.reply("I don't know")
        await services.agent.handle(dm("When is my birthday?"))
        assert "<recalled-notes>" not in system_prompt(fake_llm.requests[0])
        assert services.memory.recalls.for_scope(ANN) == []
    finally:
        await services.aclose()


async def test_the_recall_search_runs_while_the_message_is_stored(workspace: Path, fake_llm, monkeypatch) -> None:
    """Auto-recall's search needs nothing of the turn's bookkeeping, so it starts with the turn: here
    the storing of the message waits for the search to begin, which in turn order would never come."""
    services = make_services(workspace, fake_llm.base_url, embedding={"provider": "local"})
    try:
        searching, waited = threading.Event(), []
        recall, append = services.memory.recall, services.agent.conversations.append_messages

        def recall_signalling(text: str, scope: str) -> object:
            searching.set()
            return recall(text, scope)

        def append_once_the_search_began(*args: object, **kwargs: object) -> object:
            if not waited:  # the user's message: the turn's first write
                waited.append(searching.wait(timeout=10))
            return append(*args, **kwargs)

        monkeypatch.setattr(services.memory, "recall", recall_signalling)
        monkeypatch.setattr(services.agent.conversations, "append_messages", append_once_the_search_began)
        fake_llm.reply("March 12th")
        await services.agent.handle(dm("When is my birthday?"))
        assert waited == [True]
        assert f"- [{DAY} · memory/{DAY}.md:3] 用户的生日是三月十二日。" in system_prompt(fake_llm.requests[0])
        assert [turn["message"] for turn in recalls(services, ANN)] == ["When is my birthday?"]
    finally:
        await services.aclose()
