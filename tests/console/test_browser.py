"""The memory console in a real headless Chromium: sign in by link, read, revert, edit, search, the graph.

Needs Debian's ``chromium`` and ``chromium-driver`` (scripts/test installs them because
tests/console/needs-chromium exists). Without them this test fails rather than skips: a console
nobody has seen working in a browser is not tested. The phone-sized checks, addresses and
screenshots are in test_browser_layout.py.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select
from support.browser import absent, no_severe_errors, preview_line_edit, shot, text_in, visible, wait
from support.console_data import V1, V2, write

from bridge.wiring.app import Services


def _open(browser: WebDriver, url: str, token: str, address: str = "") -> None:
    browser.get(f"{url}#{address}{'&' if '?' in address else '?'}token={token}" if address else f"{url}#token={token}")
    text_in(browser, "role", "admin" if token == "admin-tok" else "read-only")


def _pane(browser: WebDriver, pane: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f"#scope-tabs [data-pane='{pane}']").click()


def test_the_console_in_a_real_browser(browser: WebDriver, console_url: str, services: Services) -> None:
    _open(browser, console_url, "admin-tok")
    assert "admin-tok" not in browser.current_url  # the link's token is dropped from the address bar
    assert browser.current_url.endswith("#/scope/alice")  # the most recently active scope's overview
    text_in(browser, "overview-figures", "2 entries")

    # MEMORY.md, a version's changes in plain words, and a revert to it.
    _pane(browser, "memory")
    text_in(browser, "memory-content", "- lives in Lisbon")
    assert browser.current_url.endswith("#/scope/alice/memory")
    browser.find_element(By.CSS_SELECTOR, "#versions .version[data-version='2']").click()
    text_in(browser, "version-title", "Version 2, Deep Dream of")
    assert browser.find_element(By.ID, "version-changes").text == "added entry 2: lives in Lisbon"
    assert "+- lives in Lisbon" in browser.find_element(By.ID, "version-diff").get_attribute("textContent")
    assert not browser.find_element(By.ID, "version-diff").is_displayed()  # the raw diff is one click away
    browser.find_element(By.CSS_SELECTOR, "#version-box details.raw summary").click()
    assert browser.find_element(By.ID, "version-diff").is_displayed()
    browser.find_element(By.CSS_SELECTOR, "#versions .version[data-version='1']").click()
    text_in(browser, "version-title", "Version 1, hand edit: the first recorded version")
    assert browser.current_url.endswith("#/scope/alice/memory/version/1")
    browser.find_element(By.ID, "revert-start").click()
    browser.find_element(By.ID, "revert-yes").click()
    text_in(browser, "notice", "exact content of version 1")
    assert services.workspace.memory_file("alice").read_bytes() == V1
    text_in(browser, "version-title", "Version 3, reverted to version 1")
    assert browser.current_url.endswith("#/scope/alice/memory/version/3")
    assert browser.find_element(By.ID, "version-changes").text == "removed entry 2: lives in Lisbon"
    _pane(browser, "daily")
    text_in(browser, "daily-content", "the cat is called Miso")
    _pane(browser, "dreams")
    text_in(browser, "dreams-content", "The cat again.")

    # Search: a card per result, the matching line marked, its score explained on demand.
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='search']").click()
    wait(browser, ec.element_to_be_clickable((By.ID, "search-q"))).send_keys("Miso")
    Select(browser.find_element(By.ID, "search-scope")).select_by_value("alice")
    browser.find_element(By.CSS_SELECTOR, "#search-form button[type='submit']").click()
    text_in(browser, "search-status", "for “Miso” in alice")
    assert browser.current_url.endswith("#/scope/alice/search?q=Miso")
    expected = services.memory.search("Miso", "alice", limit=20)
    cards = browser.find_elements(By.CSS_SELECTOR, "#search-results .result")
    assert len(cards) == len(expected) == 2
    for card, result in zip(cards, expected, strict=True):
        assert card.find_element(By.CSS_SELECTOR, ".score").text == f"score {result.score:.3f}"
        assert all("Miso" in mark.text for mark in card.find_elements(By.CSS_SELECTOR, "mark.ln"))
        card.find_element(By.CSS_SELECTOR, "details.why summary").click()
        why = card.find_element(By.CSS_SELECTOR, "details.why").text
        assert f"Keywords {result.keyword_score:.3f}" in why and f"= score {result.score:.3f}" in why
        assert "Meaning" not in why and "Named time" not in why  # nothing scored them: not shown
    daily = cards[0] if expected[0].path.startswith("memory/") else cards[1]
    assert [mark.text for mark in daily.find_elements(By.CSS_SELECTOR, "mark.ln")] == [
        "- the cat is called Miso", "- Miso hates the vacuum"]
    daily.find_element(By.CSS_SELECTOR, "a.where").click()  # opens the file at those lines
    text_in(browser, "daily-title", "Daily memory of 2026-01-31")
    marked = browser.find_elements(By.CSS_SELECTOR, "#daily-content .ln.marked")
    assert [line.text for line in marked] == ["- the cat is called Miso", "- Miso hates the vacuum"]

    # The knowledge graph, drawn by the vendored Cytoscape.js.
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='graph']").click()
    text_in(browser, "graph-status", "4 pages, 3 links")
    drawn = browser.execute_script(
        "const cy = window.consoleGraph; const box = document.getElementById('graph').getBoundingClientRect();"
        "return {nodes: cy.nodes().length, edges: cy.edges().length, canvases: document.querySelectorAll('#graph canvas').length,"
        " width: box.width, height: box.height,"
        " inside: cy.nodes().every(n => { const p = n.renderedPosition();"
        "   return p.x > 0 && p.y > 0 && p.x < box.width && p.y < box.height; })};")
    assert drawn["nodes"] == 4 and drawn["edges"] == 3 and drawn["canvases"] > 0, drawn
    assert drawn["width"] > 600 and drawn["height"] > 300 and drawn["inside"], drawn
    browser.execute_script("window.consoleGraph.$id('knowledge/pets/cats.md').emit('tap')")  # as a click would
    text_in(browser, "page-content", "Miso is a cat.")
    assert browser.find_element(By.ID, "page-title").text == "Cats"
    assert browser.current_url.endswith("#/knowledge/pets/cats")
    no_severe_errors(browser)


def test_a_read_only_token_sees_no_revert_button(browser: WebDriver, console_url: str) -> None:
    _open(browser, console_url, "read-tok", "/scope/alice/memory/version/1")
    text_in(browser, "version-title", "Version 1")
    assert browser.current_url.endswith("#/scope/alice/memory/version/1")  # the token left the address
    assert not browser.find_element(By.ID, "revert-box").is_displayed()
    assert browser.find_element(By.ID, "read-only-note").is_displayed()
    assert not browser.find_element(By.ID, "memory-edit-start").is_displayed()


def test_a_wrong_token_leads_back_to_sign_in(browser: WebDriver, console_url: str) -> None:
    browser.get(console_url)
    visible(browser, "#token-input").send_keys("nope")
    browser.find_element(By.CSS_SELECTOR, "#login-form button[type='submit']").click()
    text_in(browser, "login-error", "not accepted")
    browser.find_element(By.ID, "token-input").send_keys("read-tok")
    browser.find_element(By.CSS_SELECTOR, "#login-form button[type='submit']").click()
    text_in(browser, "role", "read-only")
    assert browser.execute_script("return sessionStorage.getItem('membridge.console.token')") == "read-tok"


def _age(path: Path, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))


def test_it_opens_on_the_most_recent_scope_with_times_in_their_zone(browser: WebDriver, console_url: str,
                                                                    services: Services) -> None:
    workspace = services.workspace
    write(workspace.daily_dir("aaron") / "2026-01-02.md", "- an old note\n")  # first by name, long idle
    _age(workspace.daily_dir("aaron") / "2026-01-02.md", 30)
    _age(workspace.daily_dir("bob") / "2026-01-30.md", 10)
    _open(browser, console_url, "read-tok")
    text_in(browser, "scope-title", "Scope alice")
    assert browser.find_element(By.CSS_SELECTOR, "#scope-list .scope.active .scope-name").text == "alice"
    _pane(browser, "memory")
    text_in(browser, "memory-content", "- lives in Lisbon")
    zone = browser.execute_script(
        "return new Intl.DateTimeFormat('en-GB', {timeZoneName: 'short'}).formatToParts(new Date())"
        ".find(p => p.type === 'timeZoneName').value")
    dates = [node.text for node in browser.find_elements(By.CSS_SELECTOR, "#versions .version-when")]
    assert len(dates) == 2 and all(re.fullmatch(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d {zone}", d) for d in dates), dates
    activity = browser.find_element(By.CSS_SELECTOR, "#scope-list [data-scope='aaron'] .scope-when").text
    assert re.fullmatch(rf"last activity \d{{4}}-\d\d-\d\d \d\d:\d\d {zone}", activity), activity


def test_an_admin_edits_memory_line_by_line(browser: WebDriver, console_url: str, services: Services) -> None:
    path = services.workspace.memory_file("alice")
    _open(browser, console_url, "admin-tok", "/scope/alice/memory/version/1")
    text_in(browser, "version-title", "Version 1")
    browser.find_element(By.ID, "revert-start").click()
    assert browser.find_element(By.ID, "revert-confirm").is_displayed()
    browser.find_element(By.ID, "memory-edit-start").click()
    assert not browser.find_element(By.ID, "revert-confirm").is_displayed()  # one pending confirmation at a time
    preview_line_edit(browser, 2, "- lives in Porto")
    text_in(browser, "memory-editor", "changed entry 2: lives in Lisbon → lives in Porto")
    save = browser.find_element(By.XPATH, "//button[text()='Save this change']")
    assert "save" in save.get_attribute("class").split()  # green: it saves what was shown
    assert path.read_bytes() == V2  # a preview writes nothing
    browser.find_element(By.ID, "revert-start").click()  # asking for a revert closes the pending change
    assert not save.is_displayed()
    browser.find_element(By.ID, "revert-no").click()
    browser.find_element(By.XPATH, "//div[@id='memory-editor']//button[text()='Preview']").click()
    visible(browser, "#memory-editor .change button.save").click()  # the new preview's (the old one is hidden)
    text_in(browser, "notice", "Saved: MEMORY.md is now version 3.")
    assert path.read_bytes() == b"- likes tea\n- lives in Porto\n"
    assert services.dreamer.memory_file.versions("alice")[0].cause == "console: edit line 2"

    services.dreamer.memory_file.write("alice", b"- likes coffee\n", "deep dream")  # someone else, meanwhile
    browser.find_element(By.XPATH, "//li[@data-line='1']//button[text()='Delete…']").click()
    text_in(browser, "notice", "has changed since you opened it")
    assert path.read_bytes() == b"- likes coffee\n"

    _pane(browser, "daily")
    text_in(browser, "daily-content", "the cat is called Miso")
    browser.find_element(By.ID, "daily-edit-start").click()
    visible(browser, "#daily-editor .add-line input").send_keys("Miso likes the balcony")
    browser.find_element(By.CSS_SELECTOR, "#daily-editor .add-line button").click()
    text_in(browser, "daily-editor", "added entry 3: Miso likes the balcony")
    browser.find_element(By.XPATH, "//button[text()='Save this change']").click()
    text_in(browser, "notice", "Saved: memory/2026-01-31.md is now version 6.")
    daily = services.workspace.daily_dir("alice") / "2026-01-31.md"
    assert daily.read_text() == "- the cat is called Miso\n- Miso hates the vacuum\n- Miso likes the balcony\n"

    # The daily edit is listed as a version, with the file as it was before it: undo it.
    browser.find_element(By.ID, "daily-editor").find_element(By.XPATH, ".//button[text()='Done']").click()
    browser.find_element(By.CSS_SELECTOR, "#daily-versions .version[data-version='5']").click()
    text_in(browser, "daily-version-title", "Version 5, found changed on disk")
    browser.find_element(By.CSS_SELECTOR, "#daily-versions .version[data-version='6']").click()
    text_in(browser, "daily-version-title",
            "Version 6, edited in the console by an admin (added a line at the end): what changed since version 5")
    assert browser.find_element(By.ID, "daily-version-changes").text == "added entry 3: Miso likes the balcony"
    browser.find_element(By.CSS_SELECTOR, "#daily-versions .version[data-version='5']").click()
    text_in(browser, "daily-version-title", "Version 5")
    browser.find_element(By.ID, "daily-revert-start").click()
    browser.find_element(By.ID, "daily-revert-yes").click()
    text_in(browser, "notice", "memory/2026-01-31.md of alice now has the exact content of version 5 (saved as version 7)")
    text_in(browser, "daily-version-title", "Version 7, reverted to version 5")
    assert daily.read_text() == "- the cat is called Miso\n- Miso hates the vacuum\n"
    assert "balcony" not in browser.find_element(By.ID, "daily-content").text
    no_severe_errors(browser, expected="status of 409 (Conflict)")


HOSTILE = """# Hostile page
<script>window.pwned = 1</script> <img src="x" onerror="window.pwned = 1">
[a trap](javascript:window.pwned=1) and [[tech/servers|the servers page]] and [[nowhere]].
"""


def test_knowledge_pages_render_safely_and_their_links_navigate(browser: WebDriver, console_url: str,
                                                                services: Services) -> None:
    write(services.workspace.knowledge_dir / "tech" / "hostile.md", HOSTILE)
    _open(browser, console_url, "read-tok")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='knowledge']").click()
    wait(browser, ec.element_to_be_clickable((By.CSS_SELECTOR, ".page[data-path='knowledge/tech/deploy.md']"))).click()
    text_in(browser, "page-title", "Deploying")
    heading = browser.find_element(By.CSS_SELECTOR, "#page-content h1")  # markdown, rendered (shown as the title)
    assert heading.get_attribute("textContent") == "Deploying" and not heading.is_displayed()
    browser.find_element(By.LINK_TEXT, "Servers").click()  # a [[link]] reads as the page's title, and navigates
    text_in(browser, "page-title", "Servers")
    browser.find_element(By.LINK_TEXT, "deploy").click()  # and so does a relative [text](page.md)
    text_in(browser, "page-title", "Deploying")
    browser.back()
    text_in(browser, "page-title", "Servers")

    browser.find_element(By.CSS_SELECTOR, ".page[data-path='knowledge/tech/hostile.md']").click()
    text_in(browser, "page-content", "<script>window.pwned = 1</script>")  # shown as text
    content = browser.find_element(By.ID, "page-content")
    assert absent(browser, content, "script, img, [onerror]")
    assert "[a trap](javascript:window.pwned=1)" in content.text
    assert browser.execute_script("return window.pwned") is None
    assert content.find_element(By.CSS_SELECTOR, ".dead-link").text == "nowhere"
    content.find_element(By.LINK_TEXT, "the servers page").click()
    text_in(browser, "page-title", "Servers")
    no_severe_errors(browser)


def test_graph_labels_stay_smaller_than_the_picture(browser: WebDriver, console_url: str) -> None:
    _open(browser, console_url, "read-tok", "/graph")
    text_in(browser, "graph-status", "4 pages, 3 links")
    sizes = browser.execute_script(
        "const cy = window.consoleGraph; const n = cy.nodes()[0];"
        "return {zoom: cy.zoom(), font: parseFloat(n.renderedStyle('font-size')), node: n.renderedWidth()};")
    assert sizes["zoom"] <= 1.6 and 8 <= sizes["font"] <= 18 and sizes["font"] < sizes["node"], sizes


def test_an_unknown_address_says_so(browser: WebDriver, console_url: str) -> None:
    _open(browser, console_url, "read-tok", "/nowhere")
    text_in(browser, "notice", "There is no page at #/nowhere")
    browser.get(f"{console_url}#/scope/carol")
    text_in(browser, "notice", "unknown scope 'carol' (known scopes: alice, bob)")
    no_severe_errors(browser, expected="404 (Not Found)")


def test_another_script_can_add_a_view(browser: WebDriver, console_url: str) -> None:
    """The status page (another script) registers itself; the router gives it #/status and a section."""
    _open(browser, console_url, "read-tok")
    text_in(browser, "scope-title", "Scope alice")
    browser.execute_script(
        "window.consoleViews.status = async (route, section) => {"
        "  const scopes = await window.membridge.api('/api/scopes');"
        "  section.textContent = `status: ${scopes.length} scopes, ${route.params.get('detail')}`; };")
    browser.get(f"{console_url}#/status?detail=full")
    text_in(browser, "view-status", "status: 2 scopes, full")
    assert not browser.find_element(By.ID, "view-scope").is_displayed()
    browser.back()
    text_in(browser, "scope-title", "Scope alice")
    assert not browser.find_element(By.ID, "view-status").is_displayed()
    no_severe_errors(browser)


def test_empty_parts_say_how_they_get_filled(browser: WebDriver, console_url: str) -> None:
    """bob has a day of notes and nothing else yet: each empty part says who fills it, and links there."""
    _open(browser, console_url, "read-tok", "/scope/bob")
    text_in(browser, "overview-hints", "MEMORY.md is empty: Deep Dream fills it each night from the daily notes")
    hints = browser.find_element(By.ID, "overview-hints")
    assert "No dream diaries yet: Deep Dream writes one each night it changes MEMORY.md" in hints.text
    hints.find_element(By.LINK_TEXT, "1 day of notes waits for it").click()
    text_in(browser, "daily-content", "plays chess on Tuesdays")
    assert browser.current_url.endswith("#/scope/bob/daily")
    _pane(browser, "memory")
    text_in(browser, "memory-empty", "MEMORY.md is empty. Deep Dream fills it each night from the daily notes (next at ")
    assert "1 note from 1 day of daily memory waits for it." in browser.find_element(By.ID, "memory-empty").text
    assert not browser.find_element(By.ID, "memory-content").is_displayed()
    _pane(browser, "dreams")
    text_in(browser, "dreams-empty", "No dream diaries yet. Deep Dream writes one each night it changes MEMORY.md")
    assert not browser.find_element(By.ID, "dreams-content").is_displayed()  # no blank grey box
    no_severe_errors(browser)


def test_a_long_passage_is_folded_around_its_match(browser: WebDriver, console_url: str, services: Services) -> None:
    lines = [f"- errand number {n}: buy stamps" for n in range(1, 21)]
    lines[14] = "- the spare key is under the blue flowerpot"
    write(services.workspace.daily_dir("alice") / "2026-01-29.md", "\n".join(lines) + "\n")
    _open(browser, console_url, "read-tok", "/scope/alice/search?q=flowerpot")
    text_in(browser, "search-status", "1 result for “flowerpot”")
    card = browser.find_element(By.CSS_SELECTOR, "#search-results .result")
    marked = card.find_element(By.CSS_SELECTOR, "mark.ln")
    assert marked.text == lines[14] and marked.get_attribute("data-line") == "15" and marked.is_displayed()
    shown = [line.text for line in card.find_elements(By.CSS_SELECTOR, ".ln") if line.is_displayed()]
    assert shown == lines[12:20]  # eight lines, from two before the match
    card.find_element(By.XPATH, ".//button[text()='Show all 20 lines']").click()
    assert [line.text for line in card.find_elements(By.CSS_SELECTOR, ".ln") if line.is_displayed()] == lines
    assert card.find_element(By.CSS_SELECTOR, "a.where").text == "Daily memory of 2026-01-29, lines 1–20"


def test_the_status_page_draws_the_bots_records_as_charts(browser: WebDriver, console_url: str,
                                                          services: Services) -> None:
    from datetime import datetime, timedelta

    from bridge.ops.usage import TurnRecord

    now = datetime.now()
    for minutes, scope, outcome, tokens in [(5, "telegram-1", "answered", (900, 100)), (6, "telegram-1", "answered", (300, 50)),
                                            (7, "slack-T1-U2", "answered", (200, 20)), (8, "slack-T1-U2", "failed", (0, 0))]:
        services.usage.record(TurnRecord(now - timedelta(minutes=minutes), scope, "telegram", outcome, *tokens,
                                         request_ms=(250.0,) if outcome == "answered" else ()))
    services.usage.record(TurnRecord(now - timedelta(minutes=4), "telegram-1", "", "answered", 40, 10,
                                     request_ms=(250.0,), kind="dream"))  # memory upkeep: tokens, no turn
    _open(browser, console_url, "read-tok")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='status']").click()
    text_in(browser, "view-status", "4 turns")
    assert browser.current_url.endswith("#/status")
    section = browser.find_element(By.ID, "view-status")
    top = section.find_element(By.CSS_SELECTOR, "rect[data-scope='telegram-1']")
    assert top.find_element(By.TAG_NAME, "title").get_attribute("textContent") == (
        "telegram-1: 1,240 prompt + 160 completion tokens (50 of them memory upkeep), 2 turns")
    assert "50 of these tokens were memory upkeep (flush, daily summary, dream)" in section.text
    widths = {part: float(section.find_element(By.CSS_SELECTOR, f"rect[data-part='{part}']").get_attribute("width"))
              for part in ("answered", "failed", "refused")}
    assert widths == {"answered": 240.0, "failed": 80.0, "refused": 0.0}  # 3 of 4 turns, 1 of 4, none
    assert "p50 250 ms · p95 250 ms" in section.text
    assert "0 pending" in section.text and "last success never" in section.text
    assert not browser.find_element(By.ID, "view-scope").is_displayed()
    shot(browser, "console-status.png")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='search']").click()  # another tab hides the status
    wait(browser, ec.invisibility_of_element_located((By.ID, "view-status")))
    browser.back()  # and the back button shows it again
    wait(browser, ec.visibility_of_element_located((By.ID, "view-status")))
    no_severe_errors(browser)
