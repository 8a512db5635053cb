"""The usage book: one row per turn in ``index.db`` (with its model requests' latencies), kept ``usage.keep_days``.

Durable, so that what a person spent survives a restart (limits are per day, not per process), and
so that another process (``membridge usage``, the console's status page) reads the same figures as
the running bot. Tokens are the model's own ``usage`` figures; where a server sends none they are
estimated from the characters and the row says so (``estimated``).

Rows name a scope (whose budget the turn spent: a person's, or a group's), a channel and an outcome;
never a text. Each scope's day is also kept added up (``usage_daily``, in the same transaction), so
a limit check reads one row however busy the day was. :mod:`bridge.ops.metering` writes them; the
readers are here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta

from memory import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS usage_turns (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL, scope TEXT NOT NULL, channel TEXT NOT NULL,
    outcome TEXT NOT NULL, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    estimated INTEGER NOT NULL DEFAULT 0, request_ms TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS usage_turns_at ON usage_turns (at);
CREATE TABLE IF NOT EXISTS usage_daily (
    day TEXT NOT NULL, scope TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    turns INTEGER NOT NULL, refused INTEGER NOT NULL, estimated INTEGER NOT NULL, PRIMARY KEY (day, scope)
) WITHOUT ROWID;
"""
OUTCOMES = ("answered", "refused", "failed", "deduplicated")


@dataclass(frozen=True)
class TurnRecord:
    """One turn as the book keeps it; ``request_ms``: the latency of each of its model requests."""

    at: datetime
    scope: str
    channel: str
    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    request_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class UsageRow:
    """What one scope spent on one day."""

    day: str
    scope: str
    prompt_tokens: int
    completion_tokens: int
    turns: int
    refused: int
    estimated: bool

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "tokens": self.tokens}


class UsageBook:
    """Writes and reads the usage tables of one workspace's ``index.db``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)

    def record(self, turn: TurnRecord) -> None:
        stamp, day = turn.at.timestamp(), turn.at.date().isoformat()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO usage_turns (at, day, scope, channel, outcome, prompt_tokens, completion_tokens, estimated,"
                " request_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (stamp, day, turn.scope, turn.channel, turn.outcome, turn.prompt_tokens, turn.completion_tokens,
                 int(turn.estimated), " ".join(f"{ms:.1f}" for ms in turn.request_ms)))
            if turn.outcome != "deduplicated":  # a dropped redelivery is nobody's spending
                conn.execute(
                    "INSERT INTO usage_daily VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, scope) DO UPDATE SET"
                    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
                    " completion_tokens = completion_tokens + excluded.completion_tokens,"
                    " turns = turns + excluded.turns, refused = refused + excluded.refused,"
                    " estimated = max(estimated, excluded.estimated)",
                    (day, turn.scope, turn.prompt_tokens, turn.completion_tokens, int(turn.outcome == "answered"),
                     int(turn.outcome == "refused"), int(turn.estimated)))

    def spent(self, scope: str, day: date) -> tuple[int, int]:
        """(tokens, answered turns) of ``scope`` on ``day``: what limits are checked against."""
        rows = self.db.query("SELECT prompt_tokens + completion_tokens, turns FROM usage_daily WHERE day = ? AND scope = ?",
                             (day.isoformat(), scope))
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def report(self, first_day: date, last_day: date, scope: str | None = None, limit: int | None = None) -> list[UsageRow]:
        """Per scope and day from ``first_day`` to ``last_day``, the biggest spenders first within a day
        (newest day first)."""
        where, params = "day BETWEEN ? AND ?", [first_day.isoformat(), last_day.isoformat()]
        if scope is not None:
            where += " AND scope = ?"
            params.append(scope)
        sql = (f"SELECT day, scope, prompt_tokens, completion_tokens, turns, refused, estimated FROM usage_daily"
               f" WHERE {where} ORDER BY day DESC, prompt_tokens + completion_tokens DESC, scope")
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [UsageRow(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), bool(r[6]))
                for r in self.db.query(sql, params)]

    def outcomes_since(self, since: float) -> dict[str, int]:
        """Turns by outcome since ``since`` (every outcome present, 0 when none)."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for outcome, count in self.db.query("SELECT outcome, count(*) FROM usage_turns WHERE at >= ? GROUP BY outcome",
                                            (since,)):
            counts[str(outcome)] = int(count)
        return counts

    def hourly(self, since: float) -> dict[int, tuple[int, int]]:
        """(answered, failed) per hour since ``since``, keyed by the hour's index from ``since``."""
        rows = self.db.query(
            "SELECT CAST((at - ?) / 3600 AS INTEGER) AS hour, sum(outcome = 'answered'), sum(outcome = 'failed')"
            " FROM usage_turns WHERE at >= ? GROUP BY hour", (since, since))
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def request_latencies(self, since: float) -> list[float]:
        """Model request latencies (ms) of the turns since ``since``, in order."""
        rows = self.db.query("SELECT request_ms FROM usage_turns WHERE at >= ? AND request_ms != ''", (since,))
        return sorted(float(ms) for row in rows for ms in str(row[0]).split())

    def forget(self, scope: str, matches: Callable[[str], bool] | None) -> None:
        """A forget's or erase's reach into the book (``memory.ForgetElsewhere``): the book holds no
        text, so a forget leaves it; an erase (``matches`` None) takes every row of the scope."""
        if matches is None:
            with self.db.transaction() as conn:
                conn.execute("DELETE FROM usage_turns WHERE scope = ?", (scope,))
                conn.execute("DELETE FROM usage_daily WHERE scope = ?", (scope,))

    def prune(self, before: float) -> int:
        """Drop rows older than ``before``, and the days before its day (the nightly pass; the book
        must not grow forever)."""
        first_day = datetime.fromtimestamp(before).date().isoformat()
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM usage_turns WHERE at < ?", (before,)).rowcount
            conn.execute("DELETE FROM usage_daily WHERE day < ?", (first_day,))
        return int(deleted)


def days_back(today: date, days: int) -> tuple[date, date]:
    """The ``days`` days ending with ``today``."""
    return today - timedelta(days=days - 1), today


def percentile(ordered: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile of an ordered list (None when empty)."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * share // 1))
    return ordered[int(rank) - 1]


def chat_summary(book: UsageBook, scope: str, *, is_admin: bool, today: date, limits: tuple[int | None, int | None],
                 top: int = 10) -> str:
    """``/usage``: what this chat's scope spent today and this week, its limits, and for an admin the
    day's top spenders."""
    [mine] = book.report(*days_back(today, 1), scope=scope) or [UsageRow(today.isoformat(), scope, 0, 0, 0, 0, False)]
    week = book.report(*days_back(today, 7), scope=scope)
    lines = [f"Today: {_spend(mine.turns, mine.tokens, mine.estimated)}"
             f" ({mine.prompt_tokens:,} prompt + {mine.completion_tokens:,} answer)."
             + (f" {mine.refused} refused over the limit." if mine.refused else ""),
             f"Last 7 days: {_spend(sum(r.turns for r in week), sum(r.tokens for r in week), any(r.estimated for r in week))}."]
    tokens, turns = limits
    if not is_admin and (tokens or turns):
        parts = [f"{turns:,} messages" if turns else "", f"{tokens:,} tokens" if tokens else ""]
        lines.append("Daily limit: " + " and ".join(part for part in parts if part) + "; it resets at midnight.")
    if is_admin:
        leaders = book.report(*days_back(today, 1), limit=top)
        lines.append("Top today:" if leaders else "Nobody has used the model today.")
        lines += [f"{n}. {row.scope}: {_spend(row.turns, row.tokens, row.estimated)}" for n, row in enumerate(leaders, 1)]
    return "\n".join(lines)


def _spend(turns: int, tokens: int, estimated: bool) -> str:
    return f"{turns:,} message{'' if turns == 1 else 's'}, {'~' if estimated else ''}{tokens:,} tokens"
