"""Export and import of a scope: real files, real SQLite, real LanceDB, real zips on disk."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from memory import MemoryManager, Turn
from memory.conversations.conversations import ConversationStore
from memory.conversations.scope_conversations import ScopeConversations
from memory.files.memory_file import MemoryFile
from memory.privacy.archive import MAX_MEMBERS
from memory.privacy.portability import Portability, PortabilityError

SCOPE = "telegram-42"
TOKEN = "zebra-lantern-4711"


@pytest.fixture
def portability(make_manager: Callable[..., MemoryManager]) -> Portability:
    manager = make_manager()
    return Portability(manager, ConversationStore(manager.db), MemoryFile(manager), app_version="9.9.9")


def plant(portability: Portability, scope: str = SCOPE) -> None:
    """A scope with everything an export carries: MEMORY.md with versions, daily files (one in
    Chinese, one edited in the console: two versions), a dream diary, an odd file, two
    conversations (one with a pending flush job)."""
    manager = portability.manager
    portability.memory_file.write(scope, b"- likes green tea\n", "dream")
    portability.memory_file.write(scope, f"- likes green tea\n- bike lock code is {TOKEN}\n".encode(), "dream")
    daily = manager.workspace.daily_dir(scope)
    daily.mkdir(parents=True, exist_ok=True)
    (daily / "2026-11-30.md").write_bytes(f"- 10:00 parked the bike, code {TOKEN}\n".encode())
    portability.memory_file.write(scope, f"- 10:00 parked the blue bike, code {TOKEN}\n".encode(), "console edit",
                                  file="memory/2026-11-30.md")  # the file as found is kept as a version first
    (daily / "2026-12-01.md").write_bytes("- 她喜欢乌龙茶\r\n- no newline at the end".encode())
    (manager.workspace.dreams_dir(scope)).mkdir(parents=True)
    (manager.workspace.dreams_dir(scope) / "2026-12-01.md").write_bytes(b"## 23:51\nquiet day\n")
    (daily / "notes").mkdir()
    (daily / "notes" / "packing.md").write_bytes(b"- passport\n")
    (daily / ".2026-12-01.md.abc.tmp").write_bytes(b"a killed writer's leftover")
    store = portability.conversations
    for chat in ("telegram:::42:", "telegram:::42:7"):
        session = f"{scope}|{chat}"
        store.ensure_session(session, scope, "telegram")
        store.append_messages(session, [Turn("user", f"remember {TOKEN} for {chat}"),
                                        Turn("assistant", "Noted ✓")])
    store.trim(f"{scope}|telegram:::42:", 2, "budget", "2026-12-01")  # a pending job for seq 1


def export(portability: Portability, path: Path, scope: str = SCOPE) -> dict[str, bytes]:
    portability.export(scope, path)
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def scope_tree(portability: Portability, scope: str) -> dict[str, bytes]:
    base = portability.workspace.scope_dir(scope)
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_export_holds_every_kind_with_counts_and_hashes(portability: Portability, tmp_path: Path) -> None:
    plant(portability)
    members = export(portability, tmp_path / "out.zip")
    manifest = json.loads(members.pop("manifest.json"))
    assert manifest["scope"] == SCOPE and manifest["membridge_version"] == "9.9.9"
    assert manifest["format"] == "membridge-memory-export" and manifest["format_version"] == 4
    assert manifest["counts"] == {"memory_md": 1, "daily_files": 2, "dream_diaries": 1, "other_files": 1,
                                  "media_files": 0, "versions": 4, "sessions": 2, "messages": 4}
    assert manifest["files"] == {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                                 for name, data in members.items()}
    assert members["memory/2026-12-01.md"] == "- 她喜欢乌龙茶\r\n- no newline at the end".encode()
    assert members["memory/dreams/2026-12-01.md"] == b"## 23:51\nquiet day\n"
    assert not any(".tmp" in name for name in members)
    assert members["versions/000001.md"] == b"- likes green tea\n"
    assert TOKEN.encode() in members["versions/000002.md"]
    versions = [json.loads(line) for line in members["versions/versions.jsonl"].splitlines()]
    assert [(v["file"], v["path"], v["cause"]) for v in versions] == [
        ("versions/000001.md", "MEMORY.md", "dream"), ("versions/000002.md", "MEMORY.md", "dream"),
        ("versions/000003.md", "memory/2026-11-30.md", "as found on disk"),
        ("versions/000004.md", "memory/2026-11-30.md", "console edit")]
    assert members["versions/000003.md"] == f"- 10:00 parked the bike, code {TOKEN}\n".encode()
    assert members["versions/000004.md"] == members["memory/2026-11-30.md"]
    messages = [json.loads(line) for line in members["conversations/messages.jsonl"].splitlines()]
    assert [(m["chat"], m["seq"], m["role"]) for m in messages] == [
        ("telegram:::42:", 1, "user"), ("telegram:::42:", 2, "assistant"),
        ("telegram:::42:7", 1, "user"), ("telegram:::42:7", 2, "assistant")]
    assert {key: messages[1][key] for key in ("role", "text", "meta", "visible")} == {
        "role": "assistant", "text": "Noted ✓", "meta": {}, "visible": False}
    sessions = {s["chat"]: s for s in map(json.loads, members["conversations/sessions.jsonl"].splitlines())}
    assert sessions["telegram:::42:"]["summarized_seq"] == 0  # the pending job's turn is not in daily memory yet


def test_round_trip_is_byte_for_byte_and_search_finds_the_import(portability: Portability, tmp_path: Path) -> None:
    plant(portability)
    first = export(portability, tmp_path / "first.zip")
    report = portability.import_(tmp_path / "first.zip", "slack-T1-U9")
    assert report.counts["messages"] == 4 and report.counts["versions"] == 4 and report.chunks_indexed > 0
    second = export(portability, tmp_path / "second.zip", "slack-T1-U9")
    manifests = json.loads(first.pop("manifest.json")), json.loads(second.pop("manifest.json"))
    assert first == second
    assert manifests[0]["files"] == manifests[1]["files"] and manifests[1]["scope"] == "slack-T1-U9"
    original = scope_tree(portability, SCOPE)
    original.pop("memory/.2026-12-01.md.abc.tmp")
    assert scope_tree(portability, "slack-T1-U9") == original
    hits = portability.manager.search(TOKEN, "slack-T1-U9")
    assert {hit.path for hit in hits} >= {"MEMORY.md", "memory/2026-11-30.md"}
    assert portability.manager.search("乌龙茶", "slack-T1-U9")[0].path == "memory/2026-12-01.md"
    reverted, _ = portability.memory_file.revert("slack-T1-U9")
    assert portability.memory_file.read("slack-T1-U9") == b"- likes green tea\n" and reverted > 0
    day = "memory/2026-11-30.md"
    assert [v.cause for v in portability.memory_file.versions("slack-T1-U9", day)] == ["console edit", "as found on disk"]
    portability.memory_file.revert("slack-T1-U9", file=day)
    assert portability.memory_file.read("slack-T1-U9", day) == f"- 10:00 parked the bike, code {TOKEN}\n".encode()
    store = portability.conversations
    assert store.load_messages("slack-T1-U9|telegram:::42:7", 5)[0].text == f"remember {TOKEN} for telegram:::42:7"


def test_an_export_of_format_2_imports_its_messages_as_turns(portability: Portability, tmp_path: Path) -> None:
    """Formats 1 and 2 carried each message as the chat API's JSON object; an import reads it as a turn."""
    plant(portability)
    members = export(portability, tmp_path / "v3.zip")
    calls = [{"id": "c1", "type": "function", "function": {"name": "memory_write", "arguments": json.dumps({"t": "猫"})}}]
    old = [{**{k: v for k, v in record.items() if k not in ("text", "meta")},
           "message": {"role": record["role"], "content": record["text"]}}
          for record in map(json.loads, members["conversations/messages.jsonl"].splitlines())]
    old[1]["message"] = {"role": "assistant", "content": None, "tool_calls": calls}
    members["conversations/messages.jsonl"] = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in old)
    manifest = json.loads(members.pop("manifest.json"))
    manifest["format_version"] = 2
    manifest["files"] = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                         for name, data in members.items()}
    with zipfile.ZipFile(tmp_path / "v2.zip", "w") as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            archive.writestr(name, data)
    assert portability.import_(tmp_path / "v2.zip", "old").counts["messages"] == 4
    assert portability.conversations.messages_between("old|telegram:::42:", 1, 2) == [
        Turn("user", f"remember {TOKEN} for telegram:::42:"), Turn("assistant", "", {"tool_calls": json.dumps(calls)})]
    assert [kind for kind, _, _ in portability.conversations.find_text("old", lambda text: "猫" in text)] == ["message"]


def test_a_format_1_export_still_imports_its_versions_as_memory_mds(portability: Portability, tmp_path: Path) -> None:
    """Format 1 (before daily-file versions) had no ``path`` on a version line: all were MEMORY.md's."""
    portability.memory_file.write(SCOPE, b"- one\n", "dream")
    portability.memory_file.write(SCOPE, b"- one\n- two\n", "dream")
    members = export(portability, tmp_path / "new.zip")
    manifest = json.loads(members.pop("manifest.json"))
    lines = [json.loads(line) for line in members["versions/versions.jsonl"].splitlines()]
    members["versions/versions.jsonl"] = b"".join(
        json.dumps({k: v for k, v in line.items() if k != "path"}).encode() + b"\n" for line in lines)
    manifest.update(format_version=1, files={name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                                             for name, data in members.items()})
    with zipfile.ZipFile(tmp_path / "old.zip", "w") as archive:
        for name, data in {**members, "manifest.json": json.dumps(manifest).encode()}.items():
            archive.writestr(name, data)
    assert portability.import_(tmp_path / "old.zip", "telegram-7").counts["versions"] == 2
    assert [v.cause for v in portability.memory_file.versions("telegram-7")] == ["dream", "dream"]
    assert portability.memory_file.content("telegram-7", portability.memory_file.versions("telegram-7")[1].id) == (
        b"- one\n")


def test_import_refuses_a_scope_that_is_not_empty_and_names_what_is_there(portability: Portability,
                                                                          tmp_path: Path) -> None:
    plant(portability)
    export(portability, tmp_path / "out.zip")
    portability.manager.append_daily("other", "- already here")
    before = scope_tree(portability, "other")
    with pytest.raises(PortabilityError, match=r"scope 'other' is not empty: it has 1 file\(s\) under memory/.*new --scope"):
        portability.import_(tmp_path / "out.zip", "other")
    with pytest.raises(PortabilityError, match=r"MEMORY.md, 4 file\(s\) under memory/, 4 file version\(s\), "
                                               r"2 conversation\(s\) with 4 message\(s\)"):
        portability.import_(tmp_path / "out.zip", SCOPE)
    assert scope_tree(portability, "other") == before


def test_export_of_an_unknown_scope_or_to_an_unwritable_place_fails_clearly(portability: Portability,
                                                                           tmp_path: Path) -> None:
    plant(portability)
    with pytest.raises(PortabilityError, match=r"unknown scope 'nobody'.*known scopes: telegram-42"):
        portability.export("nobody", tmp_path / "x.zip")
    with pytest.raises(PortabilityError, match=r"the folder .*missing does not exist"):
        portability.export(SCOPE, tmp_path / "missing" / "x.zip")
    with pytest.raises(PortabilityError, match="is a folder"):
        portability.export(SCOPE, tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        with pytest.raises(PortabilityError, match="no permission to create files in"):
            portability.export(SCOPE, locked / "x.zip")
    finally:
        locked.chmod(stat.S_IRWXU)
    assert not list(tmp_path.glob("*.zip"))


def test_a_failing_export_leaves_no_zip_and_keeps_an_old_one_whole(portability: Portability, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    plant(portability)
    target = tmp_path / "out.zip"
    target.write_bytes(b"the previous export")

    def broken(self: object) -> object:
        yield {"chat": "x"}
        raise OSError("disk full")

    monkeypatch.setattr("memory.conversations.scope_conversations.ScopeConversations.messages", broken)
    with pytest.raises(OSError, match="disk full"):
        portability.export(SCOPE, target)
    assert target.read_bytes() == b"the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zip", "ws"]


def _rewrite(source: Path, target: Path, change: Callable[[zipfile.ZipFile], None]) -> Path:
    """A copy of an export zip with ``change`` applied to the new zip after its members are copied."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            new.writestr(info, old.read(info))
        change(new)
    return target


def test_import_refuses_unsafe_zips_before_writing_anything(portability: Portability, tmp_path: Path) -> None:
    plant(portability)
    good = tmp_path / "good.zip"
    portability.export(SCOPE, good)

    def add(name: str, data: bytes = b"x", mode: int = 0o100644) -> Callable[[zipfile.ZipFile], None]:
        def change(archive: zipfile.ZipFile) -> None:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            archive.writestr(info, data)
        return change

    cases = {
        "absolute": (add("/etc/cron.d/evil"), "absolute or non-portable path"),
        "dotdot": (add("memory/../../evil.md"), r"'\.\.', '\.' or empty path part"),
        "backslash": (add("memory\\..\\evil.md"), "absolute or non-portable path"),
        "symlink": (add("memory/link.md", b"/etc/passwd", 0o120777), "is a symbolic link"),
        "stranger": (add("index.db"), "is not part of a memory export"),
        "unlisted": (add("memory/2026-12-09.md"), r"do not match manifest.json \(not in manifest.json: memory/2026-12-09.md"),
    }
    for label, (change, message) in cases.items():
        with pytest.raises(PortabilityError, match=message):
            portability.import_(_rewrite(good, tmp_path / f"{label}.zip", change), f"new-{label}")
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", b"{}")
        archive.writestr("memory/bomb.md", b"\0" * (8 << 20))
    with pytest.raises(PortabilityError, match=r"member 'memory/bomb.md' inflates .* times \(a zip bomb\?\)"):
        portability.import_(bomb, "new-bomb")
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as archive:
        for number in range(MAX_MEMBERS + 1):
            archive.writestr(f"memory/{number}.md", b"")
    with pytest.raises(PortabilityError, match=f"more than the {MAX_MEMBERS:,} an export can have"):
        portability.import_(many, "new-many")
    assert portability.workspace.list_scopes() == [SCOPE]
    assert not [p for p in portability.workspace.root.iterdir() if p.name.startswith(".import-")]


def test_import_refuses_a_member_that_does_not_match_its_hash_and_leaves_the_scope_empty(
        portability: Portability, tmp_path: Path) -> None:
    plant(portability)
    good = tmp_path / "good.zip"
    portability.export(SCOPE, good)
    for member in ("memory/2026-11-30.md", "versions/000002.md", "conversations/messages.jsonl"):
        tampered = tmp_path / "tampered.zip"
        with zipfile.ZipFile(good) as old, zipfile.ZipFile(tampered, "w") as new:
            for info in old.infolist():
                data = old.read(info)
                new.writestr(info, data.replace(TOKEN.encode(), b"changed-after-export") if info.filename == member else data)
        with pytest.raises(PortabilityError, match=f"member '{member}' does not match its size and SHA-256"):
            portability.import_(tampered, "victim")
        assert portability.contents("victim") == []
    assert not [p for p in portability.workspace.root.iterdir() if p.name.startswith(".import-")]


def test_import_of_something_that_is_not_an_export(portability: Portability, tmp_path: Path) -> None:
    with pytest.raises(PortabilityError, match="does not exist"):
        portability.import_(tmp_path / "nope.zip", "x")
    (tmp_path / "text.zip").write_text("hello")
    with pytest.raises(PortabilityError, match="is not a zip file"):
        portability.import_(tmp_path / "text.zip", "x")
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as archive:
        archive.writestr("MEMORY.md", b"- hi\n")
    with pytest.raises(PortabilityError, match=r"it has no manifest\.json"):
        portability.import_(tmp_path / "plain.zip", "x")
    with zipfile.ZipFile(tmp_path / "future.zip", "w") as archive:
        archive.writestr("manifest.json", json.dumps({"format": "membridge-memory-export", "format_version": 99,
                                                      "files": {}}))
    with pytest.raises(PortabilityError, match="export format 99, newer than this membridge reads"):
        portability.import_(tmp_path / "future.zip", "x")


def test_export_to_outbox_clears_stale_exports(portability: Portability) -> None:
    plant(portability)
    outbox = portability.workspace.exports_dir
    outbox.mkdir()
    stale, fresh = outbox / "old.zip", outbox / "sending.zip"
    stale.write_bytes(b"old")
    fresh.write_bytes(b"in flight")
    os.utime(stale, (0, 0))
    report = portability.export_to_outbox(SCOPE)
    assert report.path.parent == outbox and zipfile.is_zipfile(report.path)
    assert sorted(p.name for p in outbox.iterdir()) == sorted([fresh.name, report.path.name])


def _with_messages(source: Path, target: Path, messages: bytes) -> Path:
    """A copy of an export whose messages.jsonl is ``messages``, its manifest line made to match."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        manifest = json.loads(old.read("manifest.json"))
        manifest["files"]["conversations/messages.jsonl"] = {"size": len(messages),
                                                             "sha256": hashlib.sha256(messages).hexdigest()}
        for info in old.infolist():
            if info.filename not in ("manifest.json", "conversations/messages.jsonl"):
                new.writestr(info, old.read(info))
        new.writestr("conversations/messages.jsonl", messages)
        new.writestr("manifest.json", json.dumps(manifest))
    return target


def test_a_long_jsonl_line_is_read_whole_across_pieces_and_an_endless_one_refused(portability: Portability,
                                                                                  tmp_path: Path) -> None:
    """#34.12: lines are read in linear time (a line spanning many 1 MiB pieces comes back whole)
    and bounded (a crafted line of tens of MiB is refused, naming the line and the limit)."""
    plant(portability)
    good = tmp_path / "good.zip"
    portability.export(SCOPE, good)
    long_text = os.urandom(3 << 19).hex()  # 3 MiB of text: spans four pieces
    record = {"chat": "telegram:::42:", "seq": 1, "role": "user", "visible": True, "created_at": 1.0,
              "text": long_text, "meta": {}}
    line = json.dumps(record).encode() + b"\n"
    portability.import_(_with_messages(good, tmp_path / "long.zip", line), "long")
    [message] = ScopeConversations(portability.conversations, "long").messages()
    assert message["text"] == long_text

    endless = json.dumps({**record, "seq": 2, "text": os.urandom(20 << 20).hex()}).encode() + b"\n"
    with pytest.raises(PortabilityError, match=r"line 2 of conversations/messages\.jsonl is longer than "
                                               r"16,777,216 bytes"):
        portability.import_(_with_messages(good, tmp_path / "endless.zip", line + endless), "endless")
    assert portability.contents("endless") == []


def test_a_file_outside_the_layout_is_not_exported_so_the_export_still_imports(portability: Portability,
                                                                                tmp_path: Path) -> None:
    plant(portability)
    stray = portability.workspace.scope_dir(SCOPE) / "notes.txt"
    stray.write_bytes(b"put here by hand")
    members = export(portability, tmp_path / "out.zip")
    assert "notes.txt" not in members
    portability.import_(tmp_path / "out.zip", "copy")
    assert scope_tree(portability, "copy") == {name: data for name, data in scope_tree(portability, SCOPE).items()
                                               if name not in ("notes.txt", "memory/.2026-12-01.md.abc.tmp")}
