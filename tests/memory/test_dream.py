"""Deep Dream with a scripted model: what is written, what is refused, what can be undone."""

from __future__ import annotations

import asyncio
from datetime import date, datetime

import pytest
from support.files import write

from memory import DreamSettings
from memory.consolidation.dream import DeepDream, parse_dream_output
from memory.conversations.conversations import ConversationStore
from memory.files.memory_file import count_entries
from memory.privacy.forgetting import Forgetter

DAY = date(2026, 12, 2)


class ScriptedModel:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str]] = []  # (instructions, material) of each call

    async def __call__(self, instructions, material):
        self.calls.append((instructions, material))
        return self.answers.pop(0)


@pytest.fixture
def dreamer(make_manager):
    manager = make_manager(embedder=None)
    return DeepDream(manager, DreamSettings(), clock=lambda: datetime(2026, 12, 2, 23, 51))


def forgetter(dreamer: DeepDream) -> Forgetter:
    """The forget and erase of the dreamer's workspace, as an operator's command runs them."""
    manager = dreamer.manager
    return Forgetter(manager, ConversationStore(manager.db), dreamer.memory_file)


def entries(n: int, prefix: str = "fact") -> str:
    return "".join(f"- {prefix} {i}\n" for i in range(n))


async def test_no_daily_files_means_no_llm_call_and_memory_untouched(workspace, dreamer) -> None:
    path = write(workspace, "alice", "MEMORY.md", "- keep me\n")
    before = path.read_bytes()
    model = ScriptedModel()
    result = await dreamer.dream("alice", model, day=DAY)
    assert result.status == "skipped" and model.calls == []
    assert path.read_bytes() == before


async def test_a_dream_writes_memory_diary_and_diff(workspace, dreamer) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    write(workspace, "alice", "memory/2026-12-02.md", "- booked Osaka trip for 2026-12-20\n")
    model = ScriptedModel("```\n[MEMORY]\n- likes tea\n- trip to Osaka on 2026-12-20\n[DREAM]\nA calm day of planning.\n```")
    result = await dreamer.dream("alice", model, day=DAY)
    assert result.status == "written" and (result.entries_before, result.entries_after) == (1, 2)
    assert "+- trip to Osaka on 2026-12-20" in result.diff
    assert workspace.memory_file("alice").read_text() == "- likes tea\n- trip to Osaka on 2026-12-20\n"
    diary = workspace.dreams_dir("alice") / "2026-12-02.md"
    assert diary.read_text() == "## 23:51\nA calm day of planning.\n"
    prompt = model.calls[0][1]
    assert "- likes tea" in prompt and "### 2026-12-02\n- booked Osaka" in prompt


async def test_the_same_daily_content_is_dreamt_once_even_after_restart(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-12-02.md", "- learned to juggle\n")
    model = ScriptedModel("[MEMORY]\n- can juggle\n[DREAM]\nok", "[MEMORY]\n- can juggle well\n[DREAM]\nok")
    first = DeepDream(make_manager(embedder=None), DreamSettings())
    assert (await first.dream("alice", model, day=DAY)).status == "written"
    restarted = DeepDream(make_manager(embedder=None), DreamSettings())
    again = await restarted.dream("alice", model, day=DAY)
    assert again.status == "skipped" and len(model.calls) == 1
    forced = await restarted.dream("alice", model, day=DAY, force=True)
    assert forced.status == "written" and len(model.calls) == 2


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Sure! Here is the memory:\n- a\n- b", "no [MEMORY] section"),
        ("[MEMORY]\n" + entries(4) + "[DREAM]\nshort", "drops 16 of 20 entries"),
        ("[MEMORY]\n" + entries(51, "new") + "[DREAM]\nlong", "51 entries, over the limit of 50"),
    ],
)
async def test_bad_outputs_are_refused_and_memory_is_unchanged(workspace, dreamer, answer: str, why: str) -> None:
    path = write(workspace, "alice", "MEMORY.md", entries(20))
    write(workspace, "alice", "memory/2026-12-02.md", "- something happened\n")
    before = path.read_bytes()
    result = await dreamer.dream("alice", ScriptedModel(answer), day=DAY)
    assert result.status == "refused" and why in result.reason
    assert path.read_bytes() == before
    assert not (workspace.dreams_dir("alice") / "2026-12-02.md").exists()


async def test_revert_restores_the_exact_previous_bytes(workspace, dreamer) -> None:
    original = "# Alice\n- likes tea  \n- 喜欢猫\n\n"
    path = write(workspace, "alice", "MEMORY.md", original)
    write(workspace, "alice", "memory/2026-12-02.md", "- switched to coffee\n")
    await dreamer.dream("alice", ScriptedModel("[MEMORY]\n- likes coffee\n- 喜欢猫\n[DREAM]\nx"), day=DAY)
    assert path.read_text() != original
    versions = dreamer.memory_file.versions("alice")
    assert [v.cause for v in versions] == ["deep dream", "as found on disk"]
    _new_version, diff = dreamer.memory_file.revert("alice")
    assert path.read_bytes() == original.encode()
    assert "-- likes coffee" in diff
    assert dreamer.memory_file.versions("alice")[0].cause == f"revert to version {versions[1].id}"
    dreamer.memory_file.revert("alice", versions[0].id)
    assert path.read_text() == "- likes coffee\n- 喜欢猫\n"


class HeldModel(ScriptedModel):
    """Answers only when the test lets it: other writers get the window a slow LLM gives them."""

    def __init__(self, *answers: str) -> None:
        super().__init__(*answers)
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, instructions, material):
        self.asked.set()
        await self.release.wait()
        return await super().__call__(instructions, material)


async def test_a_forget_while_the_model_answers_is_never_undone(workspace, dreamer) -> None:
    """Issue 15 #1: the dream wrote the MEMORY.md it had read before the LLM call, bringing a
    forgotten entry back. Now its write is a compare-and-swap; the dream is redone over the new file."""
    path = write(workspace, "alice", "MEMORY.md", "- likes tea\n- home address: 1 Elm St\n")
    write(workspace, "alice", "memory/2026-12-02.md", "- bought a bike\n")
    model = HeldModel("[MEMORY]\n- likes tea\n- home address: 1 Elm St\n- has a bike\n[DREAM]\nfirst",
                      "[MEMORY]\n- likes tea\n- has a bike\n[DREAM]\nsecond")
    dreaming = asyncio.create_task(dreamer.dream("alice", model, day=DAY))
    await model.asked.wait()
    found = await asyncio.to_thread(forgetter(dreamer).forget, "alice", "address")
    assert [match.text for match in found.matches if match.place == "memory files"] == ["- home address: 1 Elm St"]
    model.release.set()
    result = await dreaming
    assert result.status == "written" and path.read_text() == "- likes tea\n- has a bike\n"
    assert len(model.calls) == 2 and "1 Elm St" not in model.calls[1][1]
    newest = dreamer.memory_file.versions("alice")[0]
    assert dreamer.memory_file.content("alice", newest.id) == path.read_bytes()
    diary = workspace.dreams_dir("alice") / "2026-12-02.md"
    assert diary.read_text() == "## 23:51\nsecond\n"


async def test_a_forget_of_daily_memory_while_the_model_answers_is_never_written_back(workspace, dreamer) -> None:
    """The forget changes only the daily file the model is reading: the dream is redone over what is left."""
    path = write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    write(workspace, "alice", "memory/2026-12-02.md", "- bought a bike\n- door code 7431\n")
    model = HeldModel("[MEMORY]\n- likes tea\n- door code 7431\n[DREAM]\nfirst",
                      "[MEMORY]\n- likes tea\n- has a bike\n[DREAM]\nsecond")
    dreaming = asyncio.create_task(dreamer.dream("alice", model, day=DAY))
    await model.asked.wait()
    await asyncio.to_thread(forgetter(dreamer).forget, "alice", "door code")
    model.release.set()
    result = await dreaming
    assert result.status == "written" and path.read_text() == "- likes tea\n- has a bike\n"
    assert len(model.calls) == 2 and "7431" not in model.calls[1][1]
    assert all(b"7431" not in p.read_bytes() for p in workspace.root.rglob("*") if p.is_file())


async def test_an_erase_while_the_model_answers_is_not_undone_by_the_dreams_retry(workspace, dreamer) -> None:
    """#34.14: the erase empties the window; the retry must not dream over nothing and write a
    MEMORY.md (and the folder) of the erased scope again."""
    write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    write(workspace, "alice", "memory/2026-12-02.md", "- bought a bike\n")
    model = HeldModel("[MEMORY]\n- likes tea\n- has a bike\n[DREAM]\nfirst",
                      "[MEMORY]\n- (nothing known)\n[DREAM]\nsecond")
    dreaming = asyncio.create_task(dreamer.dream("alice", model, day=DAY))
    await model.asked.wait()
    await asyncio.to_thread(forgetter(dreamer).erase, "alice")
    model.release.set()
    result = await dreaming
    assert result.status == "skipped" and len(model.calls) == 1
    assert not workspace.scope_dir("alice").exists() and dreamer.memory_file.version_count("alice") == 0
    assert dreamer.manager.db.query("SELECT count(*) FROM dream_state")[0][0] == 0


async def test_a_dream_over_a_file_that_keeps_changing_is_refused(workspace, dreamer) -> None:
    path = write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    write(workspace, "alice", "memory/2026-12-02.md", "- bought a bike\n")
    calls: list[int] = []

    async def answer_while_someone_edits(instructions, material):
        calls.append(1)
        await asyncio.to_thread(dreamer.memory_file.write, "alice", f"- hand edit {len(calls)}\n".encode(), "edit")
        return "[MEMORY]\n- likes tea\n- has a bike\n[DREAM]\nx"

    result = await dreamer.dream("alice", answer_while_someone_edits, day=DAY)
    assert result.status == "refused" and "kept changing" in result.reason
    assert path.read_text() == "- hand edit 2\n" and len(calls) == 2
    assert not (workspace.dreams_dir("alice") / "2026-12-02.md").exists()
    again = await dreamer.dream("alice", ScriptedModel("[MEMORY]\n- hand edit 2\n- has a bike\n[DREAM]\ny"), day=DAY)
    assert again.status == "written"  # a refused dream is not marked done: the next one runs


def test_parser_handles_order_fences_and_chatter() -> None:
    parsed = parse_dream_output("Here you go!\n**[DREAM]**\nnice day\n## [MEMORY]\n- a\n- b\n```")
    assert parsed.memory == "- a\n- b" and parsed.dream == "nice day"
    assert count_entries("- a\n* b\n1. c\ntext\n-\n") == 3


async def test_notes_appended_while_the_model_answers_do_not_stop_the_dream(workspace, dreamer) -> None:
    """A busy scope gets notes appended all the time (flushes, another process): the dream's input only
    grew, so its answer stands; the new notes are the next dream's (a changed or removed line still redoes it)."""
    write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    daily = write(workspace, "alice", "memory/2026-12-02.md", "- bought a bike\n")
    model = HeldModel("[MEMORY]\n- likes tea\n- has a bike\n[DREAM]\nfirst",
                      "[MEMORY]\n- likes tea\n- has a bike\n- bikes to work\n[DREAM]\nsecond")
    dreaming = asyncio.create_task(dreamer.dream("alice", model, day=DAY))
    await model.asked.wait()
    await asyncio.to_thread(dreamer.manager.append_daily, "alice", "- rides it to work", when=datetime(2026, 12, 2, 23, 0))
    model.release.set()
    result = await dreaming
    assert result.status == "written" and len(model.calls) == 1
    assert workspace.memory_file("alice").read_text() == "- likes tea\n- has a bike\n"
    assert "- rides it to work" in daily.read_text()
    again = await dreamer.dream("alice", model, day=DAY)  # the appended note is new input: not a repeat
    assert again.status == "written" and "rides it to work" in model.calls[1][1]
