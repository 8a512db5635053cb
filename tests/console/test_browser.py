"""The memory console in a real headless Chromium: sign in by link, read, revert, search, draw the graph.

Needs Debian's ``chromium`` and ``chromium-driver`` (scripts/test installs them because
tests/console/needs-chromium exists). Without them this test fails rather than skips: a console
nobody has seen working in a browser is not tested.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait
from support.bot import make_services

from bridge.app import Services
from bridge.console import create_app

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TIMEOUT_S = 10

V1 = b"- likes tea\n"
V2 = b"- likes tea\n- lives in Lisbon\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1",
                             console={"token": "read-tok", "admin_token": "admin-tok"})
    services.dreamer.memory_file.write("alice", V1, "hand edit")
    services.dreamer.memory_file.write("alice", V2, "deep dream")
    workspace = services.workspace
    _write(workspace.daily_dir("alice") / "2026-01-31.md", "- the cat is called Miso\n- Miso hates the vacuum\n")
    _write(workspace.dreams_dir("alice") / "2026-01-31.md", "## 03:00\nThe cat again.\n")
    _write(workspace.daily_dir("bob") / "2026-01-30.md", "- plays chess on Tuesdays\n")
    knowledge = workspace.knowledge_dir
    _write(knowledge / "tech" / "deploy.md", "# Deploying\nSee [[tech/servers]] and [[pets/cats]].\n")
    _write(knowledge / "tech" / "servers.md", "# Servers\nThe Porto box. Back to [deploy](deploy.md).\n")
    _write(knowledge / "pets" / "cats.md", "# Cats\nMiso is a cat.\n")
    _write(knowledge / "pets" / "dogs.md", "# Dogs\nSee [[cats]].\n")
    yield services
    services.close()


@pytest.fixture
def console_url(services: Services) -> Iterator[str]:
    """The console on a random port, served from a thread so Selenium's blocking calls cannot stall it."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(create_app(services))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, name="console", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT_S)
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not (os.access(path, os.X_OK) or shutil.which(path))]
    if missing:
        pytest.fail(f"the browser test needs {' and '.join(missing)}: apt-get install chromium chromium-driver "
                    "(scripts/test does it when run as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,900", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(TIMEOUT_S)
    # The console renders after its fetches answer: every find_element waits for its element (up to
    # TIMEOUT_S) instead of racing the page, which failed once under load right after a click.
    driver.implicitly_wait(TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: WebDriver, condition: object) -> object:
    return WebDriverWait(driver, TIMEOUT_S).until(condition)  # type: ignore[arg-type]


def _absent(driver: WebDriver, within: WebElement, css: str) -> bool:
    """Whether nothing under ``within`` matches ``css``, asked once (the implicit wait would spend
    TIMEOUT_S proving an absence)."""
    driver.implicitly_wait(0)
    try:
        return within.find_elements(By.CSS_SELECTOR, css) == []
    finally:
        driver.implicitly_wait(TIMEOUT_S)


def _text_in(driver: WebDriver, element_id: str, text: str) -> None:
    _wait(driver, ec.text_to_be_present_in_element((By.ID, element_id), text))


def _shot(driver: WebDriver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))


def test_the_console_in_a_real_browser(browser: WebDriver, console_url: str, services: Services) -> None:
    browser.get(f"{console_url}#token=admin-tok")
    _text_in(browser, "role", "admin")
    assert "admin-tok" not in browser.current_url  # the link's token is dropped from the address bar

    # A scope: MEMORY.md, a version's diff, and a revert to it.
    _text_in(browser, "memory-content", "- lives in Lisbon")
    assert browser.find_element(By.CSS_SELECTOR, "#scope-list .scope.active .scope-name").text == "alice"
    browser.find_element(By.CSS_SELECTOR, "#versions tr[data-version='1']").click()
    _text_in(browser, "version-title", "Version 1")
    assert "+- likes tea" in browser.find_element(By.ID, "version-diff").text
    browser.find_element(By.ID, "revert-start").click()
    browser.find_element(By.ID, "revert-yes").click()
    _text_in(browser, "notice", "exact content of version 1")
    assert services.workspace.memory_file("alice").read_bytes() == V1
    _text_in(browser, "version-title", "revert to version 1")
    _shot(browser, "console-memory.png")
    browser.find_element(By.CSS_SELECTOR, "#scope-tabs [data-pane='daily']").click()
    _text_in(browser, "daily-content", "the cat is called Miso")
    browser.find_element(By.CSS_SELECTOR, "#scope-tabs [data-pane='dreams']").click()
    _text_in(browser, "dreams-content", "The cat again.")

    # Search: the result row shows each score beside the final one.
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='search']").click()
    _wait(browser, ec.element_to_be_clickable((By.ID, "search-q"))).send_keys("Miso")  # type: ignore[attr-defined]
    Select(browser.find_element(By.ID, "search-scope")).select_by_value("alice")
    browser.find_element(By.CSS_SELECTOR, "#search-form button[type='submit']").click()
    _text_in(browser, "search-status", "for “Miso” in alice")
    expected = services.memory.search("Miso", "alice", limit=20, min_score=0.0)
    rows = browser.find_elements(By.CSS_SELECTOR, "#search-results tbody tr")
    assert len(rows) == len(expected) == 2
    for row, result in zip(rows, expected, strict=True):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        assert cells[1:11] == [f"{result.score:.3f}", "—", f"{result.keyword_score:.3f}", f"{result.coverage:.3f}",
                               f"{result.relevance:.3f}", f"{result.recency:.3f}", f"{result.time_boost:.3f}",
                               f"{result.update_boost:.3f}", result.source, f"{result.path}:{result.start_line}-{result.end_line}"]
        assert "Miso" in cells[11]
    _shot(browser, "console-search.png")

    # The knowledge graph, drawn by the vendored Cytoscape.js.
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='graph']").click()
    _text_in(browser, "graph-status", "4 pages, 3 links")
    drawn = browser.execute_script(
        "const cy = window.consoleGraph; const box = document.getElementById('graph').getBoundingClientRect();"
        "return {nodes: cy.nodes().length, edges: cy.edges().length, canvases: document.querySelectorAll('#graph canvas').length,"
        " width: box.width, height: box.height,"
        " inside: cy.nodes().every(n => { const p = n.renderedPosition();"
        "   return p.x > 0 && p.y > 0 && p.x < box.width && p.y < box.height; })};")
    assert drawn["nodes"] == 4 and drawn["edges"] == 3 and drawn["canvases"] > 0, drawn
    assert drawn["width"] > 600 and drawn["height"] > 300 and drawn["inside"], drawn
    _shot(browser, "console.png")
    browser.execute_script("window.consoleGraph.$id('knowledge/pets/cats.md').emit('tap')")  # as a click would
    _text_in(browser, "page-content", "Miso is a cat.")
    assert browser.find_element(By.ID, "page-title").text == "Cats"
    _shot(browser, "console-knowledge.png")

    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]  # type: ignore[attr-defined]
    assert not errors, errors  # no script error, no Content-Security-Policy violation


def test_a_read_only_token_sees_no_revert_button(browser: WebDriver, console_url: str) -> None:
    browser.get(f"{console_url}#token=read-tok")
    _text_in(browser, "role", "read-only")
    _text_in(browser, "memory-content", "- lives in Lisbon")
    browser.find_element(By.CSS_SELECTOR, "#versions tr[data-version='1']").click()
    _text_in(browser, "version-title", "Version 1")
    assert not browser.find_element(By.ID, "revert-box").is_displayed()
    assert browser.find_element(By.ID, "read-only-note").is_displayed()


def test_a_wrong_token_leads_back_to_sign_in(browser: WebDriver, console_url: str) -> None:
    browser.get(console_url)
    _wait(browser, ec.visibility_of_element_located((By.ID, "token-input"))).send_keys("nope")  # type: ignore[attr-defined]
    browser.find_element(By.CSS_SELECTOR, "#login-form button[type='submit']").click()
    _text_in(browser, "login-error", "not accepted")
    browser.find_element(By.ID, "token-input").send_keys("read-tok")
    browser.find_element(By.CSS_SELECTOR, "#login-form button[type='submit']").click()
    _text_in(browser, "role", "read-only")
    assert browser.execute_script("return sessionStorage.getItem('membridge.console.token')") == "read-tok"


# ------------------------------------------------------------ reads well
PHONE = (390, 844)
HOSTILE = """# Hostile page
<script>window.pwned = 1</script> <img src="x" onerror="window.pwned = 1">
[a trap](javascript:window.pwned=1) and [[tech/servers|the servers page]] and [[nowhere]].
"""


def _age(path: Path, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))


def _no_severe_errors(driver: WebDriver, expected: str = "") -> None:
    """No script error, no Content-Security-Policy violation (``expected``: a refusal the test provoked)."""
    errors = [entry for entry in driver.get_log("browser")  # type: ignore[attr-defined]
              if entry["level"] == "SEVERE" and not (expected and expected in entry["message"])]
    assert not errors, errors


def test_it_opens_on_the_most_recent_scope_with_iso_dates(browser: WebDriver, console_url: str,
                                                         services: Services) -> None:
    workspace = services.workspace
    _write(workspace.daily_dir("aaron") / "2026-01-02.md", "- an old note\n")  # first by name, long idle
    _age(workspace.daily_dir("aaron") / "2026-01-02.md", 30)
    _age(workspace.daily_dir("bob") / "2026-01-30.md", 10)
    browser.get(f"{console_url}#token=read-tok")
    _text_in(browser, "memory-content", "- lives in Lisbon")
    assert browser.find_element(By.CSS_SELECTOR, "#scope-list .scope.active .scope-name").text == "alice"
    dates = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#versions tbody td:nth-child(2)")]
    assert len(dates) == 2 and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", date) for date in dates), dates
    activity = browser.find_element(By.CSS_SELECTOR, "#scope-list [data-scope='aaron'] .scope-when").text
    assert re.fullmatch(r"last activity \d{4}-\d\d-\d\d \d\d:\d\d", activity), activity


def test_an_admin_edits_memory_line_by_line(browser: WebDriver, console_url: str, services: Services) -> None:
    path = services.workspace.memory_file("alice")
    browser.get(f"{console_url}#token=admin-tok")
    _text_in(browser, "memory-content", "- lives in Lisbon")
    browser.find_element(By.ID, "memory-edit-start").click()
    line = _wait(browser, ec.visibility_of_element_located((By.CSS_SELECTOR, "#memory-editor li[data-line='2']")))
    line.find_element(By.XPATH, ".//button[text()='Edit']").click()  # type: ignore[attr-defined]
    field = browser.find_element(By.CSS_SELECTOR, "#memory-editor li[data-line='2'] input")
    field.clear()
    field.send_keys("- lives in Porto")
    browser.find_element(By.XPATH, "//div[@id='memory-editor']//button[text()='Preview']").click()
    _text_in(browser, "memory-editor", "+- lives in Porto")
    assert "-- lives in Lisbon" in browser.find_element(By.CSS_SELECTOR, "#memory-editor .change pre.diff").text
    assert path.read_bytes() == V2  # a preview writes nothing
    _shot(browser, "console-edit.png")
    browser.find_element(By.XPATH, "//button[text()='Save this change']").click()
    _text_in(browser, "notice", "Saved: MEMORY.md is now version 3.")
    assert path.read_bytes() == b"- likes tea\n- lives in Porto\n"
    assert services.dreamer.memory_file.versions("alice")[0].cause == "console: edit line 2"

    services.dreamer.memory_file.write("alice", b"- likes coffee\n", "deep dream")  # someone else, meanwhile
    browser.find_element(By.XPATH, "//li[@data-line='1']//button[text()='Delete…']").click()
    _text_in(browser, "notice", "has changed since you opened it")
    assert path.read_bytes() == b"- likes coffee\n"

    browser.find_element(By.CSS_SELECTOR, "#scope-tabs [data-pane='daily']").click()
    _text_in(browser, "daily-content", "the cat is called Miso")
    browser.find_element(By.ID, "daily-edit-start").click()
    adding = _wait(browser, ec.visibility_of_element_located((By.CSS_SELECTOR, "#daily-editor .add-line input")))
    adding.send_keys("Miso likes the balcony")  # type: ignore[attr-defined]
    browser.find_element(By.CSS_SELECTOR, "#daily-editor .add-line button").click()
    _text_in(browser, "daily-editor", "+- Miso likes the balcony")
    browser.find_element(By.XPATH, "//button[text()='Save this change']").click()
    _text_in(browser, "notice", "Saved: memory/2026-01-31.md is now version 6.")
    daily = services.workspace.daily_dir("alice") / "2026-01-31.md"
    assert daily.read_text() == "- the cat is called Miso\n- Miso hates the vacuum\n- Miso likes the balcony\n"

    # The daily edit is listed as a version, with the file as it was before it: undo it.
    browser.find_element(By.ID, "daily-editor").find_element(By.XPATH, ".//button[text()='Done']").click()
    browser.find_element(By.CSS_SELECTOR, "#daily-versions tr[data-version='5']").click()
    _text_in(browser, "daily-version-title", "Version 5 (as found on disk)")
    browser.find_element(By.CSS_SELECTOR, "#daily-versions tr[data-version='6']").click()
    _text_in(browser, "daily-version-title", "Version 6 (console: add at the end): changes since version 5")
    assert "+- Miso likes the balcony" in browser.find_element(By.ID, "daily-version-diff").text
    browser.find_element(By.CSS_SELECTOR, "#daily-versions tr[data-version='5']").click()
    _text_in(browser, "daily-version-title", "Version 5")
    browser.find_element(By.ID, "daily-revert-start").click()
    browser.find_element(By.ID, "daily-revert-yes").click()
    _text_in(browser, "notice", "memory/2026-01-31.md of alice now has the exact content of version 5 (saved as version 7)")
    _text_in(browser, "daily-version-title", "Version 7 (revert to version 5)")
    assert daily.read_text() == "- the cat is called Miso\n- Miso hates the vacuum\n"
    assert "balcony" not in browser.find_element(By.ID, "daily-content").text
    _shot(browser, "console-daily-versions.png")
    _no_severe_errors(browser, expected="status of 409 (Conflict)")


def test_knowledge_pages_render_safely_and_their_links_navigate(browser: WebDriver, console_url: str,
                                                                services: Services) -> None:
    _write(services.workspace.knowledge_dir / "tech" / "hostile.md", HOSTILE)
    browser.get(f"{console_url}#token=read-tok")
    _text_in(browser, "role", "read-only")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='knowledge']").click()
    # the page list arrives by a fetch after the click: wait for it (it failed once under load)
    _wait(browser, ec.element_to_be_clickable((By.CSS_SELECTOR, ".page[data-path='knowledge/tech/deploy.md']"))).click()  # type: ignore[attr-defined]
    _text_in(browser, "page-title", "Deploying")
    heading = browser.find_element(By.CSS_SELECTOR, "#page-content h1")  # markdown, rendered (shown as the title)
    assert heading.get_attribute("textContent") == "Deploying" and not heading.is_displayed()
    browser.find_element(By.LINK_TEXT, "tech/servers").click()  # a [[link]] navigates
    _text_in(browser, "page-title", "Servers")
    browser.find_element(By.LINK_TEXT, "deploy").click()  # and so does a relative [text](page.md)
    _text_in(browser, "page-title", "Deploying")

    browser.find_element(By.CSS_SELECTOR, ".page[data-path='knowledge/tech/hostile.md']").click()
    _text_in(browser, "page-content", "<script>window.pwned = 1</script>")  # shown as text
    content = browser.find_element(By.ID, "page-content")
    assert _absent(browser, content, "script, img, [onerror]")
    assert "[a trap](javascript:window.pwned=1)" in content.text
    assert browser.execute_script("return window.pwned") is None
    assert content.find_element(By.CSS_SELECTOR, ".dead-link").text == "nowhere"
    _shot(browser, "console-knowledge-page.png")
    content.find_element(By.LINK_TEXT, "the servers page").click()
    _text_in(browser, "page-title", "Servers")
    _no_severe_errors(browser)


def test_graph_labels_stay_smaller_than_the_picture(browser: WebDriver, console_url: str) -> None:
    browser.get(f"{console_url}#token=read-tok")
    _text_in(browser, "role", "read-only")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='graph']").click()
    _text_in(browser, "graph-status", "4 pages, 3 links")
    sizes = browser.execute_script(
        "const cy = window.consoleGraph; const n = cy.nodes()[0];"
        "return {zoom: cy.zoom(), font: parseFloat(n.renderedStyle('font-size')), node: n.renderedWidth()};")
    assert sizes["zoom"] <= 1.6 and 8 <= sizes["font"] <= 18 and sizes["font"] < sizes["node"], sizes


@pytest.mark.parametrize("size", [(1400, 900), PHONE], ids=["desktop", "phone"])
def test_screenshots_at_desktop_and_phone_sizes(browser: WebDriver, console_url: str, size: tuple[int, int]) -> None:
    browser.set_window_size(*size)
    browser.get(f"{console_url}#token=admin-tok")
    _text_in(browser, "memory-content", "- lives in Lisbon")
    name = "desktop" if size != PHONE else "phone"
    for view, ready in (("scopes", None), ("search", None), ("knowledge", "page-content"), ("graph", "graph-status")):
        browser.find_element(By.CSS_SELECTOR, f".tab[data-view='{view}']").click()
        if ready:
            _wait(browser, lambda driver, element=ready: driver.find_element(By.ID, element).text.strip())
        overflow = browser.execute_script(
            "const root = document.documentElement; const wide = [...document.querySelectorAll('body *')]"
            ".filter(e => e.getBoundingClientRect().right > root.clientWidth + 1).map(e => e.id || e.className);"
            "return {overflow: root.scrollWidth - root.clientWidth, wide: wide.slice(0, 5)};")
        assert overflow["overflow"] <= 0, (view, overflow)  # nothing wider than the screen
        _shot(browser, f"console-{name}-{view}.png")
    _no_severe_errors(browser)


def test_the_status_page_draws_the_bots_records_as_charts(browser: WebDriver, console_url: str,
                                                          services: Services) -> None:
    from datetime import datetime, timedelta

    from bridge.usage import TurnRecord

    now = datetime.now()
    for minutes, scope, outcome, tokens in [(5, "telegram-1", "answered", (900, 100)), (6, "telegram-1", "answered", (300, 50)),
                                            (7, "slack-T1-U2", "answered", (200, 20)), (8, "slack-T1-U2", "failed", (0, 0))]:
        services.usage.record(TurnRecord(now - timedelta(minutes=minutes), scope, "telegram", outcome, *tokens,
                                         request_ms=(250.0,) if outcome == "answered" else ()))
    browser.get(f"{console_url}#token=read-tok")
    _text_in(browser, "role", "read-only")
    browser.find_element(By.ID, "status-tab").click()
    assert browser.current_url.endswith("#/status")
    section = browser.find_element(By.ID, "view-status")
    top = section.find_element(By.CSS_SELECTOR, "rect[data-scope='telegram-1']")
    assert top.find_element(By.TAG_NAME, "title").get_attribute("textContent") == (
        "telegram-1: 1,200 prompt + 150 completion tokens, 2 turns")
    widths = {part: float(section.find_element(By.CSS_SELECTOR, f"rect[data-part='{part}']").get_attribute("width"))
              for part in ("answered", "failed", "refused")}
    assert widths == {"answered": 240.0, "failed": 80.0, "refused": 0.0}  # 3 of 4 turns, 1 of 4, none
    assert "4 turns" in section.text and "p50 250 ms · p95 250 ms" in section.text
    assert "0 pending" in section.text and "last success never" in section.text
    assert browser.find_element(By.ID, "view-scopes").is_displayed() is False
    assert browser.find_element(By.ID, "notice").get_attribute("textContent") == ""  # no error on the page
    _shot(browser, "console-status.png")
    browser.find_element(By.CSS_SELECTOR, ".tab[data-view='search']").click()  # another tab hides the status
    _wait(browser, ec.invisibility_of_element_located((By.ID, "view-status")))
    assert not browser.current_url.endswith("#/status")
    browser.find_element(By.ID, "status-tab").click()  # and the link opens it again
    _wait(browser, ec.visibility_of_element_located((By.ID, "view-status")))
