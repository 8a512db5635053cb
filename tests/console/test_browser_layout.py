"""The console as people use it, at 1400 px and on a 360 px phone, in Debian's Chromium: a search in
one language finds and marks the note in the other, every view fits the screen, every view has an
address (reload, back, a shared link), and a screenshot of each view (docs/console/ keeps them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from support.browser import (
    DESKTOP,
    PHONE,
    chromium,
    fits_the_screen,
    in_view,
    no_severe_errors,
    preview_line_edit,
    shot,
    text_in,
    visible,
    wait,
)
from support.console_data import days_ago

SCOPE = "telegram-4242"
SIZES = pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "360px"])


def _search(browser: WebDriver, query: str) -> list[tuple[str, str, list[str]]]:
    field = visible(browser, "#search-q")
    field.clear()
    field.send_keys(query)
    browser.find_element(By.CSS_SELECTOR, "#search-form button[type='submit']").click()
    text_in(browser, "search-status", f"for “{query}” in {SCOPE}")
    return _cards(browser)


def _cards(browser: WebDriver) -> list[tuple[str, str, list[str]]]:
    """Each result card as (where, its whole text, its marked lines)."""
    return [(card.find_element(By.CSS_SELECTOR, ".where").text, card.find_element(By.CSS_SELECTOR, ".passage").text,
             [mark.text for mark in card.find_elements(By.CSS_SELECTOR, "mark.ln")])
            for card in browser.find_elements(By.CSS_SELECTOR, "#search-results .result")]


def _marked(browser: WebDriver, text: str) -> bool:
    """Whether a result marks the line ``text`` where the screen shows it."""
    marks = [mark for mark in browser.find_elements(By.CSS_SELECTOR, "#search-results mark.ln") if mark.text == text]
    return bool(marks) and in_view(browser, marks[0])


def _fits(browser: WebDriver, what: str) -> None:
    width = fits_the_screen(browser)
    assert width["document"] == width["viewport"], (what, width)  # no sideways scrolling


@SIZES
def test_a_search_in_either_language_marks_the_note_and_keeps_its_address(
        tmp_path: Path, demo_url: str, size: tuple[int, int]) -> None:
    with chromium(tmp_path / "chromium", size) as browser:
        browser.get(f"{demo_url}#token=read-tok")
        text_in(browser, "scope-title", f"Scope {SCOPE}")
        assert browser.current_url.endswith(f"#/scope/{SCOPE}")
        browser.find_element(By.CSS_SELECTOR, ".tab[data-view='search']").click()

        english = _search(browser, "birthday")  # the word, and by meaning its Chinese twin
        assert browser.current_url.endswith(f"#/scope/{SCOPE}/search?q=birthday")
        assert _marked(browser, "- my birthday is on May 3"), english
        assert _marked(browser, "- 我的生日是五月三日"), english
        by_word = next(card for card in english if "bike lock" in card[1])
        assert by_word[2] == ["- my birthday is on May 3"]  # not the bike lock code above it
        _fits(browser, "search birthday")

        chinese = _search(browser, "生日")  # the translation
        assert _marked(browser, "- 我的生日是五月三日"), chinese
        assert any(where.startswith(f"Daily memory of {days_ago(3)}") for where, _text, _marks in chinese), chinese
        _fits(browser, "search 生日")

        browser.refresh()  # the address holds the search: the same results come back
        text_in(browser, "search-status", f"for “生日” in {SCOPE}")
        assert _cards(browser) == chinese
        browser.back()  # the previous search
        text_in(browser, "search-status", "for “birthday”")
        assert _cards(browser) == english
        browser.back()  # the search page as the tab opened it, empty (wait for the view to redraw)
        wait(browser, lambda driver: driver.find_element(By.ID, "search-q").get_attribute("value") == ""
             and not _cards(driver))
        browser.back()  # and the overview before it
        text_in(browser, "scope-title", f"Scope {SCOPE}")
        assert browser.find_element(By.ID, "pane-overview").is_displayed()
        no_severe_errors(browser)


def test_a_shared_link_to_a_page_opens_it_after_sign_in(tmp_path: Path, demo_url: str) -> None:
    with chromium(tmp_path / "chromium", PHONE) as browser:
        browser.get(f"{demo_url}#/knowledge/contacts/isp")
        visible(browser, "#token-input").send_keys("read-tok")
        browser.find_element(By.CSS_SELECTOR, "#login-form button[type='submit']").click()
        text_in(browser, "page-title", "Internet provider")
        assert browser.current_url.endswith("#/knowledge/contacts/isp")
        link = browser.find_element(By.CSS_SELECTOR, "#page-content a.page-link")
        assert link.text == "Home router"  # a [[link]] by the page's title
        link.click()
        text_in(browser, "page-title", "Home router")
        browser.back()
        text_in(browser, "page-title", "Internet provider")
        _fits(browser, "knowledge page")
        assert not browser.find_element(By.CSS_SELECTOR, ".page[data-path='knowledge/pets/miso.md']").is_displayed()
        Select(browser.find_element(By.ID, "page-pick")).select_by_value("knowledge/pets/miso.md")  # a phone's menu
        text_in(browser, "page-title", "Miso")
        assert browser.current_url.endswith("#/knowledge/pets/miso")
        no_severe_errors(browser)


# Each view, its address and what shows it is ready.
VIEWS = [
    ("overview", f"/scope/{SCOPE}", "overview-figures", "3 entries"),
    ("memory", f"/scope/{SCOPE}/memory/version/2", "version-changes", "changed entry 1"),
    ("daily", f"/scope/{SCOPE}/daily/{days_ago(3)}?lines=2-2", "daily-content", "birthday"),
    ("dreams", f"/scope/{SCOPE}/dreams", "dreams-content", "Merged the two tea notes"),
    ("search", f"/scope/{SCOPE}/search?q=birthday", "search-status", "for “birthday”"),
    ("knowledge", "/knowledge/contacts/isp", "page-content", "Fibra Porto"),
    ("graph", "/graph", "graph-status", "4 pages, 2 links"),
]


@SIZES
def test_every_view_fits_the_screen(tmp_path: Path, demo_url: str, size: tuple[int, int]) -> None:
    with chromium(tmp_path / "chromium", size) as browser:
        browser.get(f"{demo_url}#token=admin-tok")
        text_in(browser, "role", "admin")
        for name, address, ready, text in VIEWS:
            browser.get(f"{demo_url}#{address}")
            text_in(browser, ready, text)
            if name == "search":
                browser.find_element(By.CSS_SELECTOR, "#search-results details.why summary").click()
            _fits(browser, name)
            shot(browser, f"{name}-{size[0]}.png")
        browser.get(f"{demo_url}#/scope/{SCOPE}/memory")  # the editor with a change waiting to be saved
        visible(browser, "#memory-edit-start").click()
        preview_line_edit(browser, 3, "- lives in Porto since May 2026")
        text_in(browser, "memory-editor", "changed entry 3")
        cancel = browser.find_element(By.XPATH, "//li[@data-line='3']//button[text()='Cancel']")
        assert in_view(browser, cancel)  # the edited row keeps its buttons on screen
        _fits(browser, "editor")
        shot(browser, f"editor-{size[0]}.png")
        no_severe_errors(browser)
