"""The nightly timer with an injected clock: a night runs in milliseconds."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from bridge.wiring.timer import DailyTimer
from memory import DreamSettings


class FakeNight:
    def __init__(self, start: datetime, last_run: date | None) -> None:
        self.now = start
        self.last_run = last_run
        self.runs: list[tuple[date, int, datetime]] = []

    async def job(self, day: date, lookback: int) -> None:
        self.runs.append((day, lookback, self.now))

    async def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def timer(self, **settings) -> DailyTimer:
        def set_last(day: date) -> None:
            self.last_run = day

        return DailyTimer(self.job, DreamSettings(**settings), get_last_run=lambda: self.last_run,
                          set_last_run=set_last, clock=lambda: self.now, sleep=self.sleep)


async def test_fires_once_a_day_inside_the_window() -> None:
    night = FakeNight(datetime(2026, 12, 1, 9, 0), last_run=date(2026, 11, 30))
    timer = night.timer(time="23:50", jitter_minutes=5)
    while night.now < datetime(2026, 12, 4, 12, 0):
        await timer.tick()
    assert [r[0] for r in night.runs] == [date(2026, 12, 1), date(2026, 12, 2), date(2026, 12, 3)]
    for day, lookback, at in night.runs:
        window_start = datetime(day.year, day.month, day.day, 23, 50)
        assert window_start <= at <= window_start + timedelta(minutes=5) and lookback == 1


async def test_a_restart_after_tonights_run_does_not_run_it_again() -> None:
    night = FakeNight(datetime(2026, 12, 1, 23, 58), last_run=date(2026, 12, 1))
    timer = night.timer()
    await timer.catch_up()
    await timer.tick()
    assert night.runs == []


async def test_a_missed_day_is_caught_up_at_start() -> None:
    night = FakeNight(datetime(2026, 12, 5, 8, 0), last_run=date(2026, 12, 1))
    timer = night.timer(lookback_days=1)
    await timer.catch_up()
    assert night.runs == [(date(2026, 12, 4), 3, datetime(2026, 12, 5, 8, 0))]
    assert night.last_run == date(2026, 12, 4)
    await timer.catch_up()
    assert len(night.runs) == 1


async def test_starting_after_tonights_window_runs_at_once() -> None:
    night = FakeNight(datetime(2026, 12, 1, 23, 59, 30), last_run=date(2026, 11, 30))
    await night.timer().tick()
    assert [r[0] for r in night.runs] == [date(2026, 12, 1)]


async def test_a_failing_night_is_logged_and_marked_run(caplog) -> None:
    night = FakeNight(datetime(2026, 12, 1, 23, 59), last_run=date(2026, 11, 30))

    async def boom(day: date, lookback: int) -> None:
        raise RuntimeError("LLM down")

    timer = night.timer()
    timer.job = boom
    await timer.tick()
    assert night.last_run == date(2026, 12, 1) and "nightly run for 2026-12-01 failed" in caplog.text
