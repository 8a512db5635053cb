"""The memory console in a real headless Chromium: sign in by link, read, revert, search, draw the graph.

Needs Debian's ``chromium`` and ``chromium-driver`` (scripts/test installs them because
tests/console/needs-chromium exists). Without them this test fails rather than skips: a console
nobody has seen working in a browser is not tested.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
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
                 "--disable-dev-shm-usage", "--window-size=1400,950", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: WebDriver, condition: object) -> object:
    return WebDriverWait(driver, TIMEOUT_S).until(condition)  # type: ignore[arg-type]


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
        assert cells[1:7] == [f"{result.score:.3f}", "—", f"{result.keyword_score:.3f}", f"{result.decay:.3f}",
                              result.source, f"{result.path}:{result.start_line}-{result.end_line}"]
        assert "Miso" in cells[7]
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
