"""What `/metrics` and the operator page read: counts by state, ages, the per-minute counters, the database size and
the turns that ended since a mark. Every function here is a read (run on the store's read path, a deferred
transaction: it never takes the write lock) and returns no user data: no chat or sender ids, no texts, no till-made
names; the only labels are states, kinds and counter kinds made by the code (anything else is reported as `other`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..clock import from_db, to_text
from ..records import DeliveryCounts, MetricsSnapshot, Stats, UnknownPart, WorkCounts
from ..shop_records import ActionState, EndedRun, OpenAction, OpsView, RunOutcome, SeriesPoint, StateTallies, Tally
from .connection import Connection
from .status import OLDEST_PENDING, failed_deliveries, failed_work

WORK_KINDS = ("agent", "control", "notice")
WORK_STATES = ("pending", "running", "finished", "failed")
DELIVERY_STATES = ("pending", "sending", "confirmed", "unknown", "failed", "denied")
ACTION_STATES = ("pending", "sending", "delivered", "failed", "unknown", "quarantined", "voided")
_CODE_LABEL = re.compile(r"[a-z][a-z0-9_]{0,39}")


def code_label(value: str) -> str:
    """A counter kind as a label only when it is shaped like a code-made name; anything else is `other`."""
    return value if _CODE_LABEL.fullmatch(value or "") else "other"


# table -> (id column, the grouping columns, the partial index of the open rows, what an open row is). The open rows
# are read through their partial index: a min() by rowid would walk every ended row before the first open one.
_TALLIED = {"work": ("work_id", "kind, state"), "deliveries": ("delivery_id", "state")}


@dataclass(frozen=True)
class Sizes:
    """The database's size in its own terms: SQLite's pages and WAL file; PostgreSQL's pg_database_size."""

    db_bytes: int
    free_bytes: int = 0
    wal_bytes: int = 0


def settled_ids(conn: Connection, settled_sql: Mapping[str, str]) -> dict[str, int | None]:
    """Each tallied table's highest settled id (DialectSQL.settled), in a transaction before the tally's read."""
    return {table: conn.execute(sql).fetchone()[0] for table, sql in settled_sql.items()}


def tallied(conn: Connection, table: str, tally: Tally, oldest_open_sql: Mapping[str, str],
            settled: Mapping[str, int | None] | None = None) -> dict[tuple[str, ...], int]:
    """Counts by state of every row of `table`, advancing `tally` to just below its oldest open row, and no further
    than its highest settled id where `settled` is given (PostgreSQL: None there keeps `tally` where it is)."""
    key, group = _TALLIED[table]
    oldest_open = conn.execute(oldest_open_sql[table]).fetchone()[0]
    frontier = oldest_open - 1 if oldest_open is not None else \
        conn.execute(f"SELECT coalesce(max({key}), 0) FROM {table}").fetchone()[0]
    if settled is not None:
        bound = settled.get(table)
        frontier = min(frontier, bound) if bound is not None else tally.upto
    if frontier > tally.upto:
        for *labels, n in conn.execute(f"SELECT {group}, count(*) FROM {table} WHERE {key} > $1 AND {key} <= $2 "
                                       f"GROUP BY {group}", (tally.upto, frontier)):
            tally.counts[tuple(labels)] = tally.counts.get(tuple(labels), 0) + n
        tally.upto = frontier
    counts = dict(tally.counts)
    for *labels, n in conn.execute(f"SELECT {group}, count(*) FROM {table} WHERE {key} > $1 GROUP BY {group}",
                                   (tally.upto,)):
        counts[tuple(labels)] = counts.get(tuple(labels), 0) + n
    return counts


def snapshot(conn: Connection, now: datetime, sizes: Sizes, window: Stats, tallies: StateTallies | None,
             oldest_open_sql: Mapping[str, str], settled: Mapping[str, int | None] | None = None) -> MetricsSnapshot:
    """Counts by state, the oldest pending age, the counters of the last complete minute, the database size, with
    C14's `window` read in the same snapshot.
    `tallies` (kept by the caller between scrapes) makes the work and delivery counts cost only the rows added or
    still open since the last scrape."""
    tallies = tallies if tallies is not None else {}
    work = {(k, s): 0 for k in WORK_KINDS for s in WORK_STATES}
    for (kind, state), n in tallied(conn, "work", tallies.setdefault("work", Tally()), oldest_open_sql,
                                    settled).items():
        work[(kind, state)] = n
    deliveries = dict.fromkeys(DELIVERY_STATES, 0)
    for (state,), n in tallied(conn, "deliveries", tallies.setdefault("deliveries", Tally()),
                                   oldest_open_sql, settled).items():
        deliveries[state] = n
    actions = dict.fromkeys(ACTION_STATES, 0)
    for state, n in conn.execute("SELECT state, count(*) FROM actions GROUP BY state"):
        actions[state] = n
    oldest = conn.execute(OLDEST_PENDING).fetchone()[0]
    last_minute = to_text(now - timedelta(minutes=1))[:16]
    counted: dict[str, int] = {}
    for kind, n in conn.execute("SELECT kind, sum(count) FROM counters WHERE minute = $1 GROUP BY kind",
                                (last_minute,)):
        label = code_label(kind)
        counted[label] = counted.get(label, 0) + n
    return MetricsSnapshot(
        work=work,
        deliveries=DeliveryCounts.of(deliveries),
        actions=actions,
        oldest_pending_seconds=max(0.0, (now - from_db(oldest)).total_seconds()) if oldest else 0.0,
        counted_last_minute=counted,
        db_bytes=sizes.db_bytes,
        db_free_bytes=sizes.free_bytes,
        wal_bytes=sizes.wal_bytes,
        stats=window,
    )


def ops_view(conn: Connection, now: datetime, tallies: StateTallies, oldest_open_sql: Mapping[str, str],
             settled: Mapping[str, int | None] | None = None) -> OpsView:
    """What the operator page shows beside the status counts, each read through an index (no full scan): unknown
    deliveries, the last failed work and failed or denied parts, open and quarantined actions, the counters of the
    last hour, the oldest pending age."""
    work: dict[str, int] = {}
    agent_work: dict[str, int] = {}
    for (kind, state), n in tallied(conn, "work", tallies.setdefault("work", Tally()), oldest_open_sql,
                                    settled).items():
        work[state] = work.get(state, 0) + n
        if kind == "agent":
            agent_work[state] = n
    deliveries = {state: n for (state,), n in tallied(conn, "deliveries", tallies.setdefault("deliveries", Tally()),
                                                      oldest_open_sql, settled).items()}
    oldest = conn.execute(OLDEST_PENDING).fetchone()[0]
    unknown = tuple(UnknownPart(r["report_id"], r["part"], r["parts"], r["chat_id"], r["reason"],
                                from_db(r["updated_at"])) for r in conn.execute(
        "SELECT report_id, part, parts, chat_id, reason, updated_at FROM deliveries "
        "WHERE state IN ('pending', 'sending', 'unknown') AND state = 'unknown' "   # the first term: deliveries_open
        "ORDER BY delivery_id LIMIT 100"))
    open_actions = tuple(OpenAction(r["action_id"], r["proposal_id"], ActionState(r["state"]), r["reason"], r["item"],
                                    r["quantity"], r["total_cents"]) for r in conn.execute(
        "SELECT a.action_id, a.proposal_id, a.state, a.reason, p.item, p.quantity, p.total_cents FROM actions a "
        "JOIN proposals p USING (proposal_id) WHERE a.state IN ('pending', 'sending', 'unknown', 'quarantined') "
        "ORDER BY a.action_id LIMIT 100"))
    counters: dict[str, int] = {}
    for kind, n in conn.execute("SELECT kind, sum(count) FROM counters WHERE minute >= $1 GROUP BY kind",
                                (to_text(now - timedelta(hours=1))[:16],)):
        counters[code_label(kind)] = counters.get(code_label(kind), 0) + n
    return OpsView(work=WorkCounts.of(work), agent_work=WorkCounts.of(agent_work),
                   deliveries=DeliveryCounts.of(deliveries),
                   oldest_pending_seconds=(now - from_db(oldest)).total_seconds() if oldest else None,
                   unknown=unknown, failed_work=failed_work(conn), failed_deliveries=failed_deliveries(conn),
                   open_actions=open_actions, counters_last_hour=counters)


def runs_ended_since(conn: Connection, mark: datetime, limit: int = 10_000) -> list[EndedRun]:
    """Runs that ended at or after `mark`, oldest end first. Uses the `runs_ended` index (migration 0011)."""
    return [EndedRun(r[0], RunOutcome(r[1]), from_db(r[2]), from_db(r[3]), int(r[4]), int(r[5]), int(r[6]))
            for r in conn.execute(
        "SELECT run_id, outcome, started_at, ended_at, model_calls, input_tokens, output_tokens FROM runs "
        "WHERE ended_at >= $1 ORDER BY ended_at LIMIT $2", (to_text(mark), limit)).fetchall()]


def window_series(conn: Connection, start: datetime, end: datetime, buckets: int) -> list[SeriesPoint]:
    """λ, W and L of agent work in `buckets` equal slices of [start, end] (the operator page's day chart)."""
    from .stats import window
    step = (end - start) / buckets
    series = []
    for i in range(buckets):
        s = window(conn, to_text(start + step * i), to_text(start + step * (i + 1)))
        series.append(SeriesPoint(start + step * i, s.lam, s.w, s.l))
    return series
