"""The usage book: one row per turn in ``index.db`` (with its model requests' latencies), kept ``usage.keep_days``.

Durable, so that what a person spent survives a restart (limits are per day, not per process), and
so that another process (``membridge usage``, the console's status page) reads the same figures as
the running bot. Tokens are the model's own ``usage`` figures; where a server sends none they are
estimated from the characters and the row says so (``estimated``).

Rows name a scope (whose budget the turn spent: a person's, or a group's), a channel, an outcome and
a kind: ``chat`` for a turn, or the memory upkeep done for the scope (``flush``, ``daily_summary``,
``dream``: a model request that summarised its conversation or its daily memory); never a text.
Each scope's day is also kept added up per kind (``usage_daily``, in the same transaction), so a
limit check reads one row however busy the day was. Limits count ``chat`` only: nobody is refused
because the nightly pass ran. :mod:`bridge.ops.metering` writes the rows; the readers are here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta

from memory import Database

_DAILY = """CREATE TABLE IF NOT EXISTS usage_daily (
    day TEXT NOT NULL, scope TEXT NOT NULL, kind TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, turns INTEGER NOT NULL, refused INTEGER NOT NULL, estimated INTEGER NOT NULL,
    PRIMARY KEY (day, scope, kind)
) WITHOUT ROWID;"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS usage_turns (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL, scope TEXT NOT NULL, channel TEXT NOT NULL,
    outcome TEXT NOT NULL, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    estimated INTEGER NOT NULL DEFAULT 0, request_ms TEXT NOT NULL DEFAULT '', kind TEXT NOT NULL DEFAULT 'chat'
);
CREATE INDEX IF NOT EXISTS usage_turns_at ON usage_turns (at);
""" + _DAILY
OUTCOMES = ("answered", "refused", "failed", "deduplicated")
CHAT, FLUSH, DAILY_SUMMARY, DREAM = "chat", "flush", "daily_summary", "dream"
#: What a row is, as ``membridge usage`` and ``/usage`` name it: a turn, or memory upkeep for the scope.
KINDS = {CHAT: "chat", FLUSH: "flush", DAILY_SUMMARY: "daily summary", DREAM: "dream"}
_KIND_ORDER = "CASE kind " + " ".join(f"WHEN '{kind}' THEN {n}" for n, kind in enumerate(KINDS)) + " END"


@dataclass(frozen=True)
class TurnRecord:
    """One turn (or one upkeep request, ``kind``) as the book keeps it; ``request_ms``: the latency of
    each of its model requests."""

    at: datetime
    scope: str
    channel: str
    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    request_ms: tuple[float, ...] = ()
    kind: str = CHAT


@dataclass(frozen=True)
class UsageRow:
    """What one scope spent on one day for one kind (``turns``: answered messages, or for an upkeep
    kind its model requests)."""

    day: str
    scope: str
    kind: str
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


@dataclass(frozen=True)
class Spender:
    """One scope's day, every kind added up: ``upkeep_tokens`` is the part that was memory upkeep."""

    scope: str
    prompt_tokens: int
    completion_tokens: int
    turns: int
    upkeep_tokens: int
    estimated: bool

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageBook:
    """Writes and reads the usage tables of one workspace's ``index.db``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)
        self._migrate_kinds()

    def _migrate_kinds(self) -> None:
        """Give a book written before upkeep was charged its ``kind`` columns: its rows are turns."""
        if "kind" in {str(column[1]) for column in self.db.query("PRAGMA table_info(usage_daily)")}:
            return  # the usual case: no write lock taken at start
        with self.db.transaction() as conn:
            if "kind" in {str(column[1]) for column in conn.execute("PRAGMA table_info(usage_daily)").fetchall()}:
                return  # another process migrated it meanwhile
            conn.execute("ALTER TABLE usage_daily RENAME TO usage_daily_old")
            conn.execute(_DAILY)
            conn.execute("INSERT INTO usage_daily SELECT day, scope, 'chat', prompt_tokens, completion_tokens, turns,"
                         " refused, estimated FROM usage_daily_old")
            conn.execute("DROP TABLE usage_daily_old")
            conn.execute("ALTER TABLE usage_turns ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat'")

    def record(self, turn: TurnRecord) -> None:
        stamp, day = turn.at.timestamp(), turn.at.date().isoformat()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO usage_turns (at, day, scope, channel, outcome, prompt_tokens, completion_tokens, estimated,"
                " request_ms, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (stamp, day, turn.scope, turn.channel, turn.outcome, turn.prompt_tokens, turn.completion_tokens,
                 int(turn.estimated), " ".join(f"{ms:.1f}" for ms in turn.request_ms), turn.kind))
            if turn.outcome != "deduplicated":  # a dropped redelivery is nobody's spending
                conn.execute(
                    "INSERT INTO usage_daily VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, scope, kind) DO UPDATE SET"
                    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
                    " completion_tokens = completion_tokens + excluded.completion_tokens,"
                    " turns = turns + excluded.turns, refused = refused + excluded.refused,"
                    " estimated = max(estimated, excluded.estimated)",
                    (day, turn.scope, turn.kind, turn.prompt_tokens, turn.completion_tokens,
                     int(turn.outcome == "answered"), int(turn.outcome == "refused"), int(turn.estimated)))

    def spent(self, scope: str, day: date) -> tuple[int, int]:
        """(tokens, answered turns) of ``scope``'s chat on ``day``: what limits are checked against."""
        rows = self.db.query("SELECT prompt_tokens + completion_tokens, turns FROM usage_daily"
                             " WHERE day = ? AND scope = ? AND kind = 'chat'", (day.isoformat(), scope))
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def report(self, first_day: date, last_day: date, scope: str | None = None) -> list[UsageRow]:
        """Per scope, day and kind from ``first_day`` to ``last_day``: newest day first, the biggest
        spenders first within a day, a scope's kinds in the order of :data:`KINDS`."""
        where, params = "day BETWEEN ? AND ?", [first_day.isoformat(), last_day.isoformat()]
        if scope is not None:
            where += " AND scope = ?"
            params.append(scope)
        rows = self.db.query(
            "SELECT day, scope, kind, prompt_tokens, completion_tokens, turns, refused, estimated FROM usage_daily"
            f" WHERE {where} ORDER BY day DESC, sum(prompt_tokens + completion_tokens) OVER (PARTITION BY day, scope)"
            f" DESC, scope, {_KIND_ORDER}", params)
        return [UsageRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]), bool(r[7]))
                for r in rows]

    def top(self, day: date, limit: int) -> list[Spender]:
        """The ``limit`` scopes that spent the most on ``day``, every kind counted."""
        rows = self.db.query(
            "SELECT scope, sum(prompt_tokens), sum(completion_tokens), sum(CASE WHEN kind = 'chat' THEN turns END),"
            " sum(CASE WHEN kind != 'chat' THEN prompt_tokens + completion_tokens END), max(estimated)"
            " FROM usage_daily WHERE day = ? GROUP BY scope ORDER BY sum(prompt_tokens + completion_tokens) DESC, scope"
            " LIMIT ?", (day.isoformat(), limit))
        return [Spender(str(r[0]), int(r[1]), int(r[2]), int(r[3] or 0), int(r[4] or 0), bool(r[5])) for r in rows]

    def outcomes_since(self, since: float) -> dict[str, int]:
        """Turns by outcome since ``since`` (every outcome present, 0 when none)."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for outcome, count in self.db.query("SELECT outcome, count(*) FROM usage_turns WHERE at >= ? AND kind = 'chat'"
                                            " GROUP BY outcome", (since,)):
            counts[str(outcome)] = int(count)
        return counts

    def hourly(self, since: float) -> dict[int, tuple[int, int]]:
        """(answered, failed) turns per hour since ``since``, keyed by the hour's index from ``since``."""
        rows = self.db.query(
            "SELECT CAST((at - ?) / 3600 AS INTEGER) AS hour, sum(outcome = 'answered'), sum(outcome = 'failed')"
            " FROM usage_turns WHERE at >= ? AND kind = 'chat' GROUP BY hour", (since, since))
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def request_latencies(self, since: float) -> list[float]:
        """Model request latencies (ms) since ``since``, turns' and upkeep's, in order."""
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
    """``/usage``: what this chat's scope spent today and this week (its memory upkeep apart: limits
    do not count it), its limits, and for an admin the day's top spenders."""
    rows = book.report(*days_back(today, 1), scope=scope)
    mine = next((row for row in rows if row.kind == CHAT), UsageRow(today.isoformat(), scope, CHAT, 0, 0, 0, 0, False))
    week = [row for row in book.report(*days_back(today, 7), scope=scope) if row.kind == CHAT]
    lines = [f"Today: {_spend(mine.turns, mine.tokens, mine.estimated)}"
             f" ({mine.prompt_tokens:,} prompt + {mine.completion_tokens:,} answer)."
             + (f" {mine.refused} refused over the limit." if mine.refused else ""),
             f"Last 7 days: {_spend(sum(r.turns for r in week), sum(r.tokens for r in week), any(r.estimated for r in week))}."]
    upkeep = [row for row in rows if row.kind != CHAT]
    if upkeep:
        each = ", ".join(f"{KINDS.get(row.kind, row.kind)} {row.tokens:,}" for row in upkeep)
        lines.append(f"Memory upkeep today: {_tokens(sum(r.tokens for r in upkeep), any(r.estimated for r in upkeep))}"
                     f" ({each}); not counted against the daily limit.")
    tokens, turns = limits
    if not is_admin and (tokens or turns):
        parts = [f"{turns:,} messages" if turns else "", f"{tokens:,} tokens" if tokens else ""]
        lines.append("Daily limit: " + " and ".join(part for part in parts if part) + "; it resets at midnight.")
    if is_admin:
        leaders = book.top(today, top)
        lines.append("Top today:" if leaders else "Nobody has used the model today.")
        lines += [f"{n}. {row.scope}: {_spend(row.turns, row.tokens, row.estimated)}"
                  + (f" ({row.upkeep_tokens:,} of them memory upkeep)" if row.upkeep_tokens else "")
                  for n, row in enumerate(leaders, 1)]
    return "\n".join(lines)


def _spend(turns: int, tokens: int, estimated: bool) -> str:
    return f"{turns:,} message{'' if turns == 1 else 's'}, {_tokens(tokens, estimated)}"


def _tokens(tokens: int, estimated: bool) -> str:
    return f"{'~' if estimated else ''}{tokens:,} tokens"
