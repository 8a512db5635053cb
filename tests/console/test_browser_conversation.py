"""The conversation view in Debian's Chromium at 1400 and 360 px: real turns through the agent (the
fake LLM, the local model), each shown with the notes auto-recalled for it, in either language,
and why; a note's place opens the daily file at its line; nothing scrolls sideways on a phone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAI
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from support.bot import dm, make_services
from support.browser import (
    DESKTOP,
    PHONE,
    TIMEOUT_S,
    chromium,
    fits_the_screen,
    no_severe_errors,
    serve_console,
    shot,
    text_in,
)
from support.console_data import DEMO_DAYS, DEMO_MEMORY, TOKENS, days_ago, write

from bridge.wiring.app import Services
from memory import Turn

SCOPE = "telegram-4242"
TURNS = [
    ("When is my birthday?", "On May 3rd."),
    ("Did I book the flights to Porto?", "Yes, for June."),
    ("Good morning!", "Good morning! How can I help?"),
]
SIZES = pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "360px"])


@pytest.fixture
def talked(tmp_path: Path) -> Iterator[Services]:
    """A person's first days (tests/support/console_data.py) and two turns with the bot about them."""

    async def talk() -> Services:
        async with FakeOpenAI() as llm:
            services = make_services(tmp_path / "ws", llm.base_url, console=TOKENS, embedding={"provider": "local"})
            for ago, text in DEMO_DAYS.items():
                write(services.workspace.daily_dir(SCOPE) / f"{days_ago(ago)}.md", text)
            services.dreamer.memory_file.write(SCOPE, DEMO_MEMORY, "deep dream")
            for question, answer in TURNS:
                llm.reply(answer)
                await services.agent.handle(dm(question, user="4242"))
            return services

    services = asyncio.run(talk())
    yield services
    services.close()


def _turns(browser: WebDriver) -> list[tuple[str, str, list[str]]]:
    """Each turn card as (message, answer, its recalled notes' text), read as the page is now (a
    card with no notes would otherwise spend the implicit wait proving it)."""
    browser.implicitly_wait(0)
    try:
        return [(card.find_element(By.CSS_SELECTOR, ".person .words").text,
                 card.find_element(By.CSS_SELECTOR, ".bot .words").text,
                 [note.text for note in card.find_elements(By.CSS_SELECTOR, ".note-text")])
                for card in browser.find_elements(By.CSS_SELECTOR, "#conversation-turns .turn")]
    finally:
        browser.implicitly_wait(TIMEOUT_S)


@SIZES
def test_each_turn_shows_the_notes_recalled_for_it(tmp_path: Path, talked: Services, size: tuple[int, int]) -> None:
    with serve_console(talked) as url, chromium(tmp_path / "chromium", size) as browser:
        browser.get(f"{url}#token=read-tok")
        text_in(browser, "overview-figures", "latest turns")
        browser.find_element(By.LINK_TEXT, "latest turns").click()  # from the overview
        text_in(browser, "conversation-turns", "Yes, for June.")
        assert browser.current_url.endswith(f"#/scope/{SCOPE}/conversation")
        turns = _turns(browser)
        assert [(message, answer) for message, answer, _notes in turns] == list(reversed(TURNS))
        assert [notes for _message, _answer, notes in turns] == [
            [], ["- booked flights to Porto for June"],
            ["- my birthday is on May 3", "- 我的生日是五月三日"]]  # by meaning, in either language
        cards = browser.find_elements(By.CSS_SELECTOR, "#conversation-turns .turn")
        assert cards[0].find_element(By.CSS_SELECTOR, ".recall-none").text.startswith("Nothing recalled")
        birthday = cards[2]
        where = birthday.find_elements(By.CSS_SELECTOR, ".note-meta")[1]
        assert where.find_element(By.CSS_SELECTOR, ".where").text == f"{days_ago(2)} · memory/{days_ago(2)}.md:1"
        assert where.find_element(By.CSS_SELECTOR, ".why").text == "found by meaning"
        assert where.text.split("\n")[1].startswith("relevance 0.")
        width = fits_the_screen(browser)
        assert width["document"] == width["viewport"], width  # no sideways scrolling
        shot(browser, f"conversation-{size[0]}.png")

        where.find_element(By.CSS_SELECTOR, ".where").click()  # the note's place: the day, that line marked
        text_in(browser, "daily-title", f"Daily memory of {days_ago(2)}")
        assert browser.current_url.endswith(f"#/scope/{SCOPE}/daily/{days_ago(2)}?lines=1-1")
        assert browser.find_element(By.CSS_SELECTOR, "#daily-content .ln.marked").text == "- 我的生日是五月三日"
        browser.back()
        text_in(browser, "conversation-turns", "Yes, for June.")
        browser.find_element(By.CSS_SELECTOR, "#scope-tabs [data-pane='overview']").click()
        text_in(browser, "overview-figures", "latest turns")
        browser.find_element(By.CSS_SELECTOR, "#scope-tabs [data-pane='conversation']").click()  # from the menu
        text_in(browser, "conversation-turns", "On May 3rd.")
        assert browser.current_url.endswith(f"#/scope/{SCOPE}/conversation")
        no_severe_errors(browser)


def test_older_turns_come_a_page_at_a_time(tmp_path: Path, talked: Services) -> None:
    session = talked.agent.identify(dm("", user="4242")).session_id
    for number in range(20):  # stored as a turn is, but with no recall logged for them
        talked.conversations.append_messages(session, [Turn("user", f"note {number}"), Turn("assistant", "Noted.")])
    with serve_console(talked) as url, chromium(tmp_path / "chromium", PHONE) as browser:
        browser.get(f"{url}#/scope/{SCOPE}/conversation?token=read-tok")
        text_in(browser, "conversation-turns", "note 19")
        assert len(_turns(browser)) == 20
        assert browser.find_element(By.CSS_SELECTOR, ".turn .recall-none").text.startswith(
            "Not known: the recall log keeps a chat's last 50 turns")
        assert not browser.find_element(By.ID, "conversation-newer").is_displayed()
        browser.find_element(By.ID, "conversation-older").click()
        text_in(browser, "conversation-turns", "Yes, for June.")
        assert [message for message, _answer, _notes in _turns(browser)] == [question for question, _ in reversed(TURNS)]
        assert "?before=" in browser.current_url  # the page has an address
        assert not browser.find_element(By.ID, "conversation-older").is_displayed()
        browser.find_element(By.ID, "conversation-newer").click()
        text_in(browser, "conversation-turns", "note 19")
        assert browser.current_url.endswith(f"#/scope/{SCOPE}/conversation")
        width = fits_the_screen(browser)
        assert width["document"] == width["viewport"], width
        no_severe_errors(browser)
