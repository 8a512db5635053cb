"""Forget and erase on the real stores: every byte under the workspace is read back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from datetime import date

import pytest
from support.forgetting import ForgetAt, occurrences, plant

from memory import DreamSettings, MemoryManager, Turn
from memory.consolidation.dream import DeepDream
from memory.consolidation.flush import Flusher, conversation_text
from memory.conversations.conversations import ConversationStore, FlushJob
from memory.files.memory_file import MemoryFile
from memory.privacy.forgetting import Forgetter, NothingToForget

ASCII = "Zorblaxquint"
CHINESE = "紫藤萝瀑布"


@pytest.fixture
def stack(make_manager: Callable[..., MemoryManager]) -> Iterator[tuple[MemoryManager, Forgetter]]:
    manager = make_manager()
    yield manager, Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager))


@pytest.mark.parametrize("token", [ASCII, CHINESE])
def test_forget_leaves_no_byte_of_the_text_anywhere(stack, token: str) -> None:
    manager, forgetter = stack
    plant(manager, forgetter, "alice", token)
    plant(manager, forgetter, "bob", token)
    root = manager.workspace.root
    assert manager.search(token, "alice")
    found = forgetter.find("alice", token.lower())
    assert found.counts() == {"memory files": 2, "dream diaries": 1, "file versions": 4,
                              "messages": 2, "session summaries": 1, "index": 2}
    assert "memory/dreams/2026-12-01.md:2" in {m.where for m in found.matches}
    assert occurrences(root, token)  # the dry run changed nothing

    forgetter.forget("alice", token.lower())

    left = occurrences(root, token)
    assert all(path.startswith("scopes/bob/") or path == "index.db" for path in left), left
    assert [r.text for r in manager.search(token, "alice") if token in r.text] == []
    assert forgetter.find("alice", token).matches == []
    assert manager.search(token, "bob")  # another scope keeps its own
    assert [r.text.strip() for r in manager.search("green tea", "alice")] == ["- likes green tea"]  # its line kept its place
    for version in forgetter.memory_file.versions("alice"):
        assert token.lower().encode() not in forgetter.memory_file.content("alice", version.id).lower()
    history = ConversationStore(manager.db).context_messages("alice|chat")
    assert history == []  # the turn with the token (and its tool steps) went whole; the first one was trimmed
    assert ConversationStore(manager.db).messages_between("alice|chat", 1, 9)[0].text == "hello there"
    forgetter.erase("bob")
    assert occurrences(root, token) == {}


def test_erase_removes_the_scope_and_leaves_others_byte_identical(stack) -> None:
    manager, forgetter = stack
    plant(manager, forgetter, "alice", ASCII)
    plant(manager, forgetter, "bob", CHINESE)
    bob_files = {p: p.read_bytes() for p in (manager.workspace.scopes_dir / "bob").rglob("*") if p.is_file()}
    bob_search = [(r.path, r.text) for r in manager.search(CHINESE, "bob")]
    bob_messages = ConversationStore(manager.db).messages_between("bob|chat", 1, 9)

    forgetter.erase("alice")

    assert not (manager.workspace.scopes_dir / "alice").exists()
    assert occurrences(manager.workspace.root, "alice") == {}  # no row, vector, path or session names it
    assert manager.storage.count_chunks("alice") == 0
    assert {p: p.read_bytes() for p in (manager.workspace.scopes_dir / "bob").rglob("*") if p.is_file()} == bob_files
    assert [(r.path, r.text) for r in manager.search(CHINESE, "bob")] == bob_search
    assert ConversationStore(manager.db).messages_between("bob|chat", 1, 9) == bob_messages
    assert forgetter.memory_file.versions("alice") == []


def test_expire_drops_old_daily_files_and_what_came_of_them(stack) -> None:
    manager, forgetter = stack
    ws = manager.workspace
    for day, text in (("2026-10-01", f"- old {ASCII} note"), ("2026-11-30", "- recent note")):
        forgetter.memory_file.write("alice", (text + "\n").encode(), "console edit", file=f"memory/{day}.md")
    (ws.dreams_dir("alice")).mkdir(parents=True)
    (ws.dreams_dir("alice") / "2026-10-01.md").write_text(f"dreamt of {ASCII}\n", encoding="utf-8")
    assert manager.indexer.sync("alice").ok

    assert forgetter.expire("alice", date(2026, 11, 1))
    assert not forgetter.expire("alice", date(2026, 11, 1))  # nothing older left: no job, no vacuum

    assert sorted(p.name for p in ws.daily_dir("alice").rglob("*.md")) == ["2026-11-30.md"]
    assert occurrences(ws.root, ASCII) == {}
    assert [r.text for r in manager.search("recent note", "alice")] == ["- recent note"]
    assert forgetter.memory_file.versions("alice", "memory/2026-10-01.md") == []
    assert len(forgetter.memory_file.versions("alice", "memory/2026-11-30.md")) == 1


def test_the_dry_run_passes_over_a_file_gone_since_it_was_listed(stack) -> None:
    # A writer's temp file (.MEMORY.md.*.tmp) is renamed into place while the lock-free dry run
    # lists the scope; a link to nothing is such an entry on a real disk: listed, then not there.
    manager, forgetter = stack
    forgetter.memory_file.write("alice", f"- {ASCII} lives here\n".encode(), "console edit")
    (manager.workspace.scope_dir("alice") / ".MEMORY.md.gone.tmp").symlink_to("nowhere")
    found = forgetter.find("alice", ASCII)
    assert [m.where for m in found.matches if m.place == "memory files"] == ["MEMORY.md:1"]


def test_a_blank_text_is_refused(stack) -> None:
    _manager, forgetter = stack
    with pytest.raises(NothingToForget):
        forgetter.find("alice", "  ")


def _trim_a_chat_holding_the_secret(store: ConversationStore) -> FlushJob:
    """Alice's chat: two exchanges, the first holding ASCII, both trimmed into one flush job for 2026-12-01."""
    session = store.ensure_session("alice|chat", "alice").id
    store.append_messages(session, [Turn("user", f"my {ASCII} is here"), Turn("assistant", "ok"),
                                    Turn("user", "I like tea"), Turn("assistant", "fine")])
    job = store.trim(session, 5, "trim", "2026-12-01")
    assert job is not None
    return job


async def test_a_flush_in_flight_never_writes_back_what_a_forget_removed(stack) -> None:
    manager, forgetter = stack
    store = forgetter.conversations
    job = _trim_a_chat_holding_the_secret(store)
    asked, release, seen = asyncio.Event(), asyncio.Event(), []

    async def summarize(_job: FlushJob, messages: Sequence[Turn]) -> str:
        seen.append(conversation_text(messages))
        if len(seen) == 1:  # the model is "thinking" while the forget runs
            asked.set()
            await release.wait()
        return "\n".join(f"- {line}" for line in conversation_text(messages).splitlines())

    flush = asyncio.create_task(Flusher(store, manager).run_job(job, summarize))
    await asyncio.wait_for(asked.wait(), 30)
    await asyncio.to_thread(forgetter.forget, "alice", ASCII)
    release.set()
    await flush
    daily = manager.workspace.daily_file("alice", "2026-12-01").read_text(encoding="utf-8")
    assert ASCII not in daily and "- user: I like tea" in daily
    assert seen == [f"user: my {ASCII} is here\nassistant: ok\nuser: I like tea\nassistant: fine",
                    "user: I like tea\nassistant: fine"]


async def test_a_forget_arriving_as_a_flush_keeps_its_summary_takes_that_summary_too(stack) -> None:
    """The flush's daily block and the summary it keeps in the session are written under one lock:
    a forget that comes after the block was written finds (and removes) the summary as well."""
    manager, forgetter = stack
    store = forgetter.conversations
    job = _trim_a_chat_holding_the_secret(store)
    forget = ForgetAt(forgetter, "alice", ASCII)
    keep_summary = store.remember_summary
    store.remember_summary = lambda *args: (forget(), keep_summary(*args))[1]  # type: ignore[method-assign]

    async def summarize(_job: FlushJob, messages: Sequence[Turn]) -> str:
        return "\n".join(f"- {line}" for line in conversation_text(messages).splitlines())

    await Flusher(store, manager).run_job(job, summarize)
    forget.join()
    assert forgetter.find("alice", ASCII).matches == []
    assert store.get_session(job.session_id).summary == "- assistant: ok\n- user: I like tea\n- assistant: fine"


async def test_a_forget_arriving_as_a_dream_writes_its_diary_takes_the_diary_line_too(stack) -> None:
    """Deep Dream writes MEMORY.md and its diary under one lock: a forget that comes while the diary
    is being written removes the diary's line as well."""
    manager, forgetter = stack
    manager.append_daily("alice", f"- the {ASCII} box is in the attic\n- likes green tea")
    day = manager.workspace.daily_dir("alice")
    [daily] = day.glob("*.md")
    dreamer = DeepDream(manager, DreamSettings())
    forget = ForgetAt(forgetter, "alice", ASCII)
    write_diary = dreamer._write_diary
    dreamer._write_diary = lambda *args: (forget(), write_diary(*args))[1]  # type: ignore[method-assign]

    async def complete(instructions: str, material: str) -> str:
        return f"[MEMORY]\n- the {ASCII} box is in the attic\n- likes green tea\n[DREAM]\nNoticed the {ASCII} box."

    result = await dreamer.dream("alice", complete, force=True, day=date.fromisoformat(daily.stem))
    forget.join()
    assert result.status == "written"
    assert forgetter.find("alice", ASCII).matches == []
    assert forgetter.memory_file.read("alice") == b"- likes green tea\n"
