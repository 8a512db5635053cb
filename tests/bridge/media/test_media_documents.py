"""Documents: txt/md/csv/json/pdf/docx in a DM become a note of that scope's daily memory (found by
search there only), or a knowledge page by an admin; limits, unknown types, hostile names and zip
bombs are refused and do no harm."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.attachments import MemoryAttachment
from support.bot import dm, group
from support.documents import flate_bomb_pdf, tiny_docx, tiny_pdf, zip_bomb_docx
from support.media import stored, with_files

from bridge.media.intake import ADMINS_ONLY, FILES_IN_DM, PAGE_USAGE
from bridge.media.notes import SUMMARIZE

PDF = tiny_pdf("On-call rules: the pager rotates every Monday at 10:00", "Escalate to Priya after 15 minutes")
PDF_MIME = "application/pdf"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def summarising(request: dict) -> str | None:
    return "The team's on-call rules." if request["messages"][0]["content"] == SUMMARIZE else None


def today_file(bridge, scope: str = "telegram-42"):
    from datetime import datetime

    return bridge.services.workspace.daily_file(scope, datetime.now().strftime("%Y-%m-%d"))


async def test_a_pdf_in_a_dm_becomes_a_note_found_by_search_in_that_scope_only(running, fake_llm) -> None:
    bridge, channel = await running(admins=["telegram:1"])
    fake_llm.responder = summarising
    await channel.push(with_files("", MemoryAttachment("document", "on-call.pdf", PDF, PDF_MIME)))
    await channel.wait_sent(1)
    assert channel.texts() == ["Saved on-call.pdf to your memory (2 pages, 90 characters). The team's on-call rules."]
    note = today_file(bridge).read_text(encoding="utf-8")
    assert re.search(r"File: on-call\.pdf <!-- note:[0-9a-f]{16} -->\nSummary: The team's on-call rules\.\n\n"
                     r"On-call rules: the pager rotates", note)
    assert stored(bridge) == []  # a file with no caption is not a turn
    await channel.push(with_files("/memory search pager rotates Monday"))
    await channel.push(with_files("/memory search pager rotates Monday", user="43"))
    await channel.wait_sent(3)
    mine, theirs = channel.texts("42")[1], channel.texts("43")[0]
    assert "memory/" in mine and "the pager rotates every Monday at 10:00" in mine
    assert theirs == "Nothing in memory matches “pager rotates Monday”."


async def test_a_docx_with_a_question_is_saved_then_the_question_answered(running, fake_llm) -> None:
    bridge, channel = await running()
    fake_llm.responder = summarising
    docx = tiny_docx("Quarterly plan", "Ship the Lisbon office move by March")
    await channel.push(with_files("when is the move?", MemoryAttachment("document", "plan.docx", docx, DOCX_MIME)))
    await channel.wait_sent(1)
    assert "Ship the Lisbon office move by March" in today_file(bridge).read_text(encoding="utf-8")
    said = "[file plan.docx, saved to memory: The team's on-call rules.]\nwhen is the move?"
    assert stored(bridge)[0] == {"role": "user", "content": said} and channel.texts() == ["ok"]


async def test_without_an_llm_summary_the_note_starts_with_the_first_lines(running, fake_llm) -> None:
    bridge, channel = await running(llm={"base_url": fake_llm.base_url, "api_key": "test-key", "max_retries": 0})
    fake_llm.fail(500)
    text = "# Packing list\npassport, charger\n<!-- flush:1 -->\n"
    await channel.push(with_files("", MemoryAttachment("document", "list.md", text.encode(), "text/markdown")))
    await channel.wait_sent(1)
    assert channel.texts() == ["Saved list.md to your memory (49 characters). # Packing list passport, charger <!-- flush:1 -->"]
    note = today_file(bridge).read_text(encoding="utf-8")
    assert "\n\n\\# Packing list\npassport, charger\n&lt;!-- flush:1 -->\n" in note  # inert in the daily file
    assert note.count("<!--") == 1 and re.search(r"^## \d\d:\d\d File: list\.md <!-- note:[0-9a-f]{16} -->$", note, re.M)


async def test_an_admin_makes_a_file_a_knowledge_page(running, fake_llm) -> None:
    bridge, channel = await running(admins=["telegram:42"])
    await channel.push(with_files("/knowledge add ops/on-call", MemoryAttachment("document", "rules.pdf", PDF, PDF_MIME)))
    await channel.wait_sent(1)
    assert channel.texts() == ["Saved rules.pdf as the knowledge page knowledge/ops/on-call.md."]
    page = bridge.services.workspace.knowledge_dir / "ops" / "on-call.md"
    assert page.read_text(encoding="utf-8").startswith("# rules.pdf\n\nOn-call rules: the pager rotates")
    assert not today_file(bridge).exists() and fake_llm.requests == []


@pytest.mark.parametrize(("caption", "admins", "answer"), [
    ("/knowledge add ops/on-call", [], ADMINS_ONLY),
    ("/knowledge add", ["telegram:42"], PAGE_USAGE),
    ("/knowledge add a b", ["telegram:42"], PAGE_USAGE),
    ("/knowledge add ../etc", ["telegram:42"], "That page name doesn't work: page name '../etc' contains '..'; "
                                               "pages cannot leave knowledge/"),
])
async def test_knowledge_add_refusals(running, caption, admins, answer) -> None:
    bridge, channel = await running(admins=admins)
    await channel.push(with_files(caption, MemoryAttachment("document", "rules.pdf", PDF, PDF_MIME)))
    await channel.wait_sent(1)
    assert channel.texts() == [answer]
    assert not (bridge.services.workspace.knowledge_dir / "ops").exists()


async def test_a_file_in_a_group_is_refused(running, fake_llm) -> None:
    _, channel = await running()
    attachment = MemoryAttachment("document", "notes.txt", b"hello")
    await channel.push(replace(group("@bot"), attachments=(attachment,)))
    await channel.wait_sent(1)
    assert channel.texts() == [FILES_IN_DM] and attachment.reads == 0


@pytest.mark.parametrize(("attachment", "answer"), [
    (MemoryAttachment("document", "setup.exe", b"MZ\x90\x00", "application/x-msdownload"),
     "I can't read setup.exe: I read txt, md, csv, json, pdf and docx files only."),
    (MemoryAttachment("document", "big.pdf", b"", PDF_MIME, size=25_000_000),
     "big.pdf is 25 MB, over the limit of 20 MB, so it was not read."),
])
async def test_unknown_types_and_files_too_big_are_refused_before_download(running, fake_llm, attachment,
                                                                          answer) -> None:
    _, channel = await running()
    await channel.push(with_files("", attachment))
    await channel.wait_sent(1)
    assert channel.texts() == [answer] and attachment.reads == 0 and fake_llm.requests == []


@pytest.mark.parametrize(("limit", "size", "answer"), [
    (1_500_000, 1_700_000, "crates.txt is 1.7 MB, over the limit of 1.5 MB, so it was not read."),
    (2_000, 2_001, "crates.txt is 2,001 bytes, over the limit of 2,000 bytes, so it was not read."),
    (20_000, 25_000, "crates.txt is 25 KB, over the limit of 20 KB, so it was not read."),
])
async def test_a_size_refusal_never_contradicts_itself(running, fake_llm, limit: int, size: int, answer: str) -> None:
    """The size and the limit are said with the precision that tells them apart (#34.13)."""
    _, channel = await running(media={"max_bytes": limit})
    await channel.push(with_files("", MemoryAttachment("document", "crates.txt", b"", "text/plain", size=size)))
    await channel.wait_sent(1)
    assert channel.texts() == [answer]


@pytest.mark.parametrize(("name", "data", "limits", "answer"), [
    ("long.pdf", tiny_pdf("a", "b", "c"), {"max_pages": 2},
     "long.pdf has 3 pages, over the limit of 2 (media.max_pages), so it was not read."),
    ("long.txt", b"word " * 100, {"max_text_chars": 100},
     "long.txt holds 499 characters of text, over the limit of 100 (media.max_text_chars), so it was not saved."),
    ("scan.pdf", tiny_pdf(""), {}, "scan.pdf has no text I can read (a scanned PDF holds only pictures of pages)."),
    ("fake.pdf", b"%PDF-1.4 not really", {}, "I couldn't read fake.pdf: it is not a valid PDF file."),
    ("blob.txt", b"\x00\x01\x02binary", {}, "blob.txt is not a text file (it holds binary data)."),
    ("bomb.docx", zip_bomb_docx(50), {"max_bytes": 1_000_000},
     "bomb.docx would unpack to 50 MB in 2 parts, over the limit of 4 MB for a document, so it was not read."),
    ("bomb.pdf", flate_bomb_pdf(200), {},
     "bomb.pdf would unpack to more data than I read from one PDF (a compressed part of it is too large), "
     "so it was not read."),
])
async def test_documents_past_a_limit_or_unreadable_are_refused_and_nothing_is_saved(
        running, fake_llm, name, data, limits, answer) -> None:
    bridge, channel = await running(media=limits)
    await channel.push(with_files("", MemoryAttachment("document", name, data)))
    await channel.wait_sent(1)
    assert channel.texts() == [answer]
    assert not today_file(bridge).exists() and fake_llm.requests == []


async def test_a_hostile_name_touches_no_path(running, fake_llm, tmp_path) -> None:
    bridge, channel = await running(media={"keep": True})
    fake_llm.responder = summarising
    hostile = MemoryAttachment("document", "../../x.txt", b"the spare key is under the blue pot", "text/plain")
    await channel.push(with_files("", hostile))
    await channel.wait_sent(1)
    assert channel.texts()[0].startswith("Saved x.txt to your memory")
    assert [path for path in tmp_path.rglob("x.txt")] == []
    assert re.search(r"File: x\.txt <!-- note:[0-9a-f]{16} -->\n", today_file(bridge).read_text(encoding="utf-8"))
    [kept] = bridge.services.workspace.media_dir("telegram-42").iterdir()
    assert kept.read_bytes() == b"the spare key is under the blue pot" and kept.name != "x.txt"


async def test_a_document_delivered_again_to_a_fresh_process_saves_no_second_note(running, fake_llm) -> None:
    """One process confirms a captionless document to Telegram only after answering it; killed
    before that, the next process gets the same message again (it remembers no delivery keys in
    memory): the turn ledger in index.db says it was answered, so it is only confirmed."""
    message = with_files("", MemoryAttachment("document", "plan.md", b"Sow beans in May.\n", "text/markdown"))
    first, channel = await running()
    await channel.push(message)
    [(reply, _to)] = await channel.wait_sent(1)
    assert reply.text.startswith("Saved plan.md to your memory")
    _second, again = await running()
    await again.push(message)
    await again.push(dm("thanks"))  # the same chat: answered only after the redelivery is done with
    [(reply, _to)] = await again.wait_sent(1)
    assert reply.text == "ok" and again.accepted_keys[0] == message.dedupe_key
    assert today_file(first).read_text(encoding="utf-8").count("File: plan.md") == 1
