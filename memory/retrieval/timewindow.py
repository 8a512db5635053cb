"""Time words in a question, resolved against today into a window of dates.

"What did I cook last week?" asks about the notes of one week, not about notes that contain the
words "last week". :func:`find_window` finds such phrases (English and Chinese: relative days,
weeks, months and years, weekdays, month names, "N days ago", and dates written out), resolves
them against ``today`` into an inclusive ``[start, end]`` range, and reports the matched spans so
the keyword side can leave the time words out. The first phrase that resolves wins; a question
with no time phrase has no window.

"Last week" and "上周" are the previous calendar week (Monday to Sunday), "last month" the previous
calendar month, "the week before last" and "上上周" the one before; where people are loose the window
is generous: "two months ago" covers that calendar month and half a month either side of the day two
months back (on 3 December: 18 September to 31 October), "3 days ago" that day ±1, "early May" all of
May, and a bare month name is its most recent occurrence that has begun. "May last year" and "去年5月"
are that month of the previous year. Seasons are not windows: a note written in the autumn that
says "last summer" is about the summer, so "summer" stays a keyword.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

_PRESENT_RE = re.compile(
    r"\b(?:now|nowadays|currently|current|these\s+days|at\s+the\s+moment|at\s+present|still|anymore|any\s+more|"
    r"latest|most\s+recent(?:ly)?)\b|现在|目前|如今|最近|当前|还在|还是|仍然|依然",
    re.IGNORECASE,
)


def asks_about_now(question: str) -> bool:
    """Whether ``question`` asks for the present state of something ("where do I live now?",
    "我现在用什么手机"): facts change, and then the newest note is the answer."""
    return _PRESENT_RE.search(question) is not None


@dataclass(frozen=True)
class TimeWindow:
    """An inclusive range of dates a question asks about, and the words that said so."""

    start: date
    end: date
    phrases: tuple[str, ...]

    def contains(self, day: date) -> bool:
        return self.start <= day <= self.end

    def describe(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


_MONTHS_EN = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS_EN.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS_EN["sept"] = 9
_WEEKDAYS_EN = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS_EN = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_YEAR_STEP_ZH = {"今": 0, "去": -1, "前": -2}  # 今年, 去年, 前年
_RELATIVE_STEP_ZH = {"这": 0, "这个": 0, "本": 0, "上": -1, "上个": -1, "上上": -2}  # 这周, 上个月, 上上周

_MONTH_RE = "|".join(sorted(_MONTHS_EN, key=len, reverse=True))
_WEEKDAY_RE = "|".join(_WEEKDAYS_EN)
_NUMBER_RE = r"\d{1,3}|" + "|".join(sorted(_NUMBERS_EN, key=len, reverse=True))
_ZH_NUM_RE = r"\d{1,3}|[一二两三四五六七八九十]{1,3}"


# ----------------------------------------------------------------- calendar
def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _shift_month(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _last_weekday(today: date, weekday: int) -> date:
    """The most recent ``weekday`` strictly before today (people say "on Tuesday" of the past)."""
    back = (today.weekday() - weekday) % 7 or 7
    return today - timedelta(days=back)


def _recent_month(today: date, month: int, year: int | None) -> tuple[date, date]:
    """A month named without a year is its latest occurrence that has begun."""
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return _month_span(year, month)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _zh_number(text: str) -> int:
    """A Chinese or Arabic numeral up to 99 (十二 = 12, 二十 = 20, 两 = 2)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    return _ZH_DIGITS.get(text, 0)


def _en_number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS_EN.get(text.lower(), 0)


# ------------------------------------------------------------------ units
def _ago(today: date, amount: int, unit: str) -> tuple[date, date] | None:
    """"N days/weeks/months/years ago": the day (±1), the week, the month or the year it names."""
    if amount <= 0:
        return None
    if unit == "day":
        day = today - timedelta(days=amount)
        return day - timedelta(days=1), min(today, day + timedelta(days=1))
    if unit == "week":
        start = _week_start(today - timedelta(weeks=amount))
        return start, start + timedelta(days=6)
    if unit == "month":  # the calendar month, widened to half a month either side of the day itself
        start, end = _month_span(*_shift_month(today, -amount))
        day = _same_day_months_back(today, amount)
        return min(start, day - timedelta(days=15)), min(today, max(end, day + timedelta(days=15)))
    return date(today.year - amount, 1, 1), date(today.year - amount, 12, 31)


def _same_day_months_back(today: date, amount: int) -> date:
    """Today's day of the month, ``amount`` months back (clamped to that month's length)."""
    year, month = _shift_month(today, -amount)
    return date(year, month, min(today.day, calendar.monthrange(year, month)[1]))


def _relative(today: date, unit: str, step: int) -> tuple[date, date]:
    """This (step 0: up to today) or the previous (step -1) calendar week, month or year."""
    if unit == "week":
        start = _week_start(today) + timedelta(weeks=step)
        return start, today if step == 0 else start + timedelta(days=6)
    if unit == "month":
        start, end = _month_span(*_shift_month(today, step))
        return start, today if step == 0 else end
    return date(today.year + step, 1, 1), today if step == 0 else date(today.year + step, 12, 31)


_UNIT_EN = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
            "year": "year", "years": "year"}
_UNIT_ZH = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "个星期": "week",
            "个礼拜": "week", "月": "month", "个月": "month", "年": "year"}

Resolver = Callable[[re.Match[str], date], "tuple[date, date] | None"]


def _iso(m: re.Match[str], today: date) -> tuple[date, date] | None:
    day = _safe_date(int(m["y"]), int(m["m"]), int(m["d"]))
    return (day, day) if day else None


def _en_month_day(m: re.Match[str], today: date) -> tuple[date, date] | None:
    month = _MONTHS_EN[m["mon"].lower()]
    year = int(m["y"]) if m["y"] else None
    if year is None:
        candidate = _safe_date(today.year, month, int(m["d"]))
        year = today.year if candidate is not None and candidate <= today else today.year - 1
    day = _safe_date(year, month, int(m["d"]))
    return (day, day) if day else None


def _en_month(m: re.Match[str], today: date) -> tuple[date, date] | None:
    month = _MONTHS_EN[m["mon"].lower()]
    return _recent_month(today, month, int(m["y"]) if m["y"] else None)


def _month_last_year(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _month_span(today.year - 1, _MONTHS_EN[(m["mon"] or m["mon2"]).lower()])


def _en_year(m: re.Match[str], today: date) -> tuple[date, date] | None:
    year = int(m["y"])
    return (date(year, 1, 1), date(year, 12, 31)) if 1900 < year <= today.year else None


def _en_ago(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _ago(today, _en_number(m["n"]), _UNIT_EN[m["unit"].lower()])


def _half_year_ago(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _ago(today, 6, "month")


def _en_relative(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _relative(today, _UNIT_EN[m["unit"].lower()], 0 if m["which"].lower() == "this" else -1)


def _en_before_last(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _relative(today, _UNIT_EN[m["unit"].lower()], -2)


def _en_weekday(m: re.Match[str], today: date) -> tuple[date, date] | None:
    day = _last_weekday(today, _WEEKDAYS_EN[m["wd"].lower()])
    return day, day


def _en_weekend(m: re.Match[str], today: date) -> tuple[date, date] | None:
    """"The weekend" is this one on a Saturday or Sunday, else the one just past; "last weekend" is
    the latest that has ended (on a Sunday, the one before this)."""
    saturday = today - timedelta(days=(today.weekday() - 5) % 7)  # the latest Saturday, today included
    if m["last"] and saturday + timedelta(days=1) >= today:  # this weekend has not ended yet
        saturday -= timedelta(weeks=1)
    return saturday, saturday + timedelta(days=1)


def _days_back(back: int) -> Resolver:
    def resolve(m: re.Match[str], today: date) -> tuple[date, date]:
        day = today - timedelta(days=back)
        return day, day
    return resolve


def _zh_full_date(m: re.Match[str], today: date) -> tuple[date, date] | None:
    month = _zh_number(m["m"])
    year = int(m["y"]) if m["y"] else today.year + _YEAR_STEP_ZH[m["rel"]] if m["rel"] else None
    if not 1 <= month <= 12:
        return None
    if m["d"] is None:
        return _recent_month(today, month, year)
    day_number = _zh_number(m["d"])
    if year is None:
        candidate = _safe_date(today.year, month, day_number)
        year = today.year if candidate is not None and candidate <= today else today.year - 1
    day = _safe_date(year, month, day_number)
    return (day, day) if day else None


def _zh_ago(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _ago(today, _zh_number(m["n"]), _UNIT_ZH[m["unit"]])


def _zh_relative(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _relative(today, _UNIT_ZH[m["unit"]], _RELATIVE_STEP_ZH[m["which"]])


def _zh_weekday(m: re.Match[str], today: date) -> tuple[date, date] | None:
    weekday = _ZH_WEEKDAYS[m["wd"]]
    day = _week_start(today) - timedelta(days=7 - weekday) if m["last"] else _last_weekday(today, weekday)
    return day, day


def _zh_year(m: re.Match[str], today: date) -> tuple[date, date] | None:
    return _relative(today, "year", _YEAR_STEP_ZH[m["which"]])


_I = re.IGNORECASE
#: Most specific first: a full date before its month, "two months ago" before "months".
_PATTERNS: tuple[tuple[re.Pattern[str], Resolver], ...] = (
    (re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b"), _iso),
    (re.compile(r"(?:(?P<y>(?:19|20)\d\d)\s*年\s*|(?P<rel>[今去前])年\s*)?(?P<m>\d{1,2}|十[一二]?|[一二三四五六七八九])\s*月"
                r"(?:\s*(?P<d>\d{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])\s*[日号])?"), _zh_full_date),
    (re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_RE})\.?(?:,?\s+(?P<y>(?:19|20)\d\d))?\b", _I),
     _en_month_day),
    (re.compile(rf"\b(?P<mon>{_MONTH_RE})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y>(?:19|20)\d\d))?\b", _I),
     _en_month_day),
    (re.compile(r"\bhalf\s+a\s+year\s+ago\b", _I), _half_year_ago),
    (re.compile(rf"\b(?P<n>{_NUMBER_RE})\s+(?P<unit>days?|weeks?|months?|years?)\s+ago\b", _I), _en_ago),
    (re.compile(r"\b(?:the\s+)?(?P<unit>week|month|year)\s+before\s+last\b", _I), _en_before_last),
    (re.compile(rf"\b(?:in\s+)?(?P<mon>{_MONTH_RE})\.?\s+(?:of\s+)?last\s+year\b|\blast\s+year\s+in\s+(?P<mon2>{_MONTH_RE})\b", _I),
     _month_last_year),
    (re.compile(r"\b(?P<which>last|past|previous|this)\s+(?P<unit>week|month|year)\b", _I), _en_relative),
    (re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b", _I), _days_back(2)),
    (re.compile(r"\b(?:yesterday|last\s+night)\b", _I), _days_back(1)),
    (re.compile(r"\b(?:today|tonight|this\s+morning)\b", _I), _days_back(0)),
    (re.compile(r"\b(?P<last>last\s+)?weekend\b", _I), _en_weekend),
    (re.compile(rf"\b(?:on\s+|last\s+)?(?P<wd>{_WEEKDAY_RE})\b", _I), _en_weekday),
    (re.compile(rf"\b(?:in|during|since|last|early|mid|late|(?:the\s+)?(?:beginning|start|middle|end)\s+of)[-\s]+(?P<mon>{_MONTH_RE})\.?(?:\s+(?P<y>(?:19|20)\d\d))?\b", _I), _en_month),
    (re.compile(rf"\b(?P<mon>{_MONTH_RE})\.?\s+(?P<y>(?:19|20)\d\d)\b", _I), _en_month),
    (re.compile(r"\b(?:in|during|early|mid|late)[-\s]+(?P<y>(?:19|20)\d\d)\b", _I), _en_year),
    (re.compile(r"半年(?:以)?前"), _half_year_ago),
    (re.compile(rf"(?P<n>{_ZH_NUM_RE})\s*(?P<unit>个月|个星期|个礼拜|星期|礼拜|天|日|周|月|年)(?:以)?前"), _zh_ago),
    (re.compile(r"(?P<which>上上|上个|这个|上|这|本)(?P<unit>个星期|个礼拜|星期|礼拜|周|个月|月)(?![一二三四五六日天])"), _zh_relative),
    (re.compile(r"(?P<last>上)?(?:个)?(?:星期|周|礼拜)(?P<wd>[一二三四五六日天])"), _zh_weekday),
    (re.compile(r"大前天"), _days_back(3)),
    (re.compile(r"前天"), _days_back(2)),
    (re.compile(r"昨天|昨晚|昨日"), _days_back(1)),
    (re.compile(r"今天|今晚|今日"), _days_back(0)),
    (re.compile(r"(?P<which>今|去|前)年"), _zh_year),
)


def find_window(question: str, today: date) -> TimeWindow | None:
    """The window of dates ``question`` asks about, or None when it names no time.

    Every matched phrase is reported (so all time words can be left out of the keyword query),
    but the first one that resolves, in the order of :data:`_PATTERNS`, sets the window.
    """
    window: tuple[date, date] | None = None
    phrases: list[str] = []
    taken: list[tuple[int, int]] = []
    for pattern, resolve in _PATTERNS:
        for match in pattern.finditer(question):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            span = resolve(match, today)
            if span is None or span[0] > today:
                continue
            taken.append(match.span())
            phrases.append(match.group(0))
            if window is None:
                window = (span[0], min(span[1], today))
    if window is None:
        return None
    return TimeWindow(window[0], window[1], tuple(phrases))
