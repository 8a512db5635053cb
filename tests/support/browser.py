"""Driving the memory console in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``).

Each helper waits on what the page shows (an element, a text), never on a sleep: the console renders
after its fetches answer.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from bridge.console import create_app
from bridge.wiring.app import Services

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
TIMEOUT_S = 10
DESKTOP = (1400, 900)
PHONE = (360, 780)


@contextmanager
def serve_console(services: Services) -> Iterator[str]:
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


@contextmanager
def chromium(profile: Path, size: tuple[int, int] = DESKTOP) -> Iterator[WebDriver]:
    """A headless Chromium whose page (the viewport) is ``size`` CSS pixels."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not (os.access(path, os.X_OK) or shutil.which(path))]
    if missing:
        pytest.fail(f"the browser test needs {' and '.join(missing)}: apt-get install chromium chromium-driver "
                    "(scripts/test does it when run as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(TIMEOUT_S)
    # The console renders after its fetches answer: every find_element waits for its element (up to
    # TIMEOUT_S) instead of racing the page.
    driver.implicitly_wait(TIMEOUT_S)
    try:
        set_viewport(driver, *size)
        yield driver
    finally:
        driver.quit()


def set_viewport(driver: WebDriver, width: int, height: int) -> None:
    """Make the page itself ``width`` × ``height`` (a phone's screen, say), whatever the window chrome."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # type: ignore[attr-defined]
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def wait(driver: WebDriver, condition: Any) -> Any:
    return WebDriverWait(driver, TIMEOUT_S).until(condition)


def text_in(driver: WebDriver, element_id: str, text: str) -> None:
    wait(driver, ec.text_to_be_present_in_element((By.ID, element_id), text))


def visible(driver: WebDriver, css: str) -> WebElement:
    return wait(driver, ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def absent(driver: WebDriver, within: WebElement | WebDriver, css: str) -> bool:
    """Whether nothing under ``within`` matches ``css``, asked once (the implicit wait would spend
    TIMEOUT_S proving an absence)."""
    driver.implicitly_wait(0)
    try:
        return within.find_elements(By.CSS_SELECTOR, css) == []
    finally:
        driver.implicitly_wait(TIMEOUT_S)


def preview_line_edit(driver: WebDriver, line: int, text: str) -> None:
    """In the open MEMORY.md editor: change line ``line`` to ``text`` and ask for the preview."""
    row = visible(driver, f"#memory-editor li[data-line='{line}']")
    row.find_element(By.XPATH, ".//button[text()='Edit']").click()
    field = driver.find_element(By.CSS_SELECTOR, f"#memory-editor li[data-line='{line}'] input")
    field.clear()
    field.send_keys(text)
    driver.find_element(By.XPATH, "//div[@id='memory-editor']//button[text()='Preview']").click()


def fits_the_screen(driver: WebDriver) -> dict[str, Any]:
    """The page's width against the viewport's, and the first elements reaching past it."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "const root = document.documentElement; const wide = [...document.querySelectorAll('body *')]"
        ".filter(e => e.getBoundingClientRect().right > root.clientWidth + 1 && e.getClientRects().length)"
        ".map(e => e.id || e.className || e.tagName);"
        "return {document: root.scrollWidth, viewport: window.innerWidth, wide: wide.slice(0, 5)};")


def in_view(driver: WebDriver, element: WebElement) -> bool:
    """Whether ``element`` is shown and lies across the screen's width (scrolled to, if needed)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    box = driver.execute_script("const r = arguments[0].getBoundingClientRect();"
                                "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,"
                                " width: window.innerWidth, height: window.innerHeight};", element)
    return bool(element.is_displayed() and box["left"] >= 0 and box["right"] <= box["width"]
                and box["bottom"] > 0 and box["top"] < box["height"])


def shot(driver: WebDriver, name: str, *, whole: bool = True) -> Path:
    """A screenshot in tests/artifacts/console/ (the page's whole height with ``whole``, up to 2,600 px)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    width = driver.execute_script("return window.innerWidth")
    height = driver.execute_script("return window.innerHeight")
    if whole:
        full = driver.execute_script("return document.documentElement.scrollHeight")
        set_viewport(driver, width, min(max(full, height), 2600))
    try:
        driver.save_screenshot(str(path))
    finally:
        set_viewport(driver, width, height)
    return path


def no_severe_errors(driver: WebDriver, expected: str = "") -> None:
    """No script error, no Content-Security-Policy violation (``expected``: a refusal the test provoked)."""
    errors = [entry for entry in driver.get_log("browser")  # type: ignore[attr-defined]
              if entry["level"] == "SEVERE" and not (expected and expected in entry["message"])]
    assert not errors, errors
