"""The producers' own records: schedule cursors, missed occurrences, the stock watcher's episodes, read marks, and
what the till reads back.

A producer reaches them through `tx.producers` inside `Store.atomic`, together with `tx.admit`, so its progress
commits with the work it admits (C2). The store offers the reads outside a producer's transaction.
"""
from __future__ import annotations

from datetime import datetime

from ..clock import from_db, from_db_or_none, to_text
from ..records import Missed, MissedReason, WorkState
from ..shop_records import StockLevel, TillCount, WorkReport, WorkWithReport
from .connection import Connection, Row


# ---- the clock producer --------------------------------------------------------------------------------------
def get_cursor(conn: Connection, schedule: str) -> tuple[str | None, str | None]:
    """(cursor, key refused for capacity) of a schedule; (None, None) for a schedule never seen."""
    row = conn.execute("SELECT cursor, refused_key FROM schedule_cursors WHERE schedule = $1", (schedule,)).fetchone()
    return (row["cursor"], row["refused_key"]) if row else (None, None)


def set_cursor(conn: Connection, schedule: str, cursor: str, refused_key: str | None, now: str) -> None:
    conn.execute(
        "INSERT INTO schedule_cursors (schedule, cursor, refused_key, updated_at) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (schedule) DO UPDATE SET cursor = excluded.cursor, refused_key = excluded.refused_key, "
        "updated_at = excluded.updated_at", (schedule, cursor, refused_key, now))


def record_missed(conn: Connection, schedule: str, key: str, reason: str, fire_time: str | None,
                  now: str) -> bool:
    """Record an occurrence that was not admitted; False when it was recorded before (the key decides)."""
    return conn.execute(
        "INSERT INTO missed_occurrences (schedule, key, reason, fire_time, recorded_at) VALUES ($1, $2, $3, $4, $5) "
        "ON CONFLICT (schedule, key) DO NOTHING", (schedule, key, reason, fire_time, now)).rowcount == 1


def missed_occurrences(conn: Connection, limit: int = 20) -> list[Missed]:
    """The most recently recorded missed occurrences, newest first (`shopbot status`)."""
    return [Missed(r["schedule"], r["key"], MissedReason(r["reason"]), from_db_or_none(r["fire_time"]),
                   from_db(r["recorded_at"])) for r in conn.execute(
        "SELECT schedule, key, reason, fire_time, recorded_at FROM missed_occurrences "
        "ORDER BY recorded_at DESC, schedule, key DESC LIMIT $1", (limit,)).fetchall()]


# ---- the stock watcher ---------------------------------------------------------------------------------------
def stock_levels(conn: Connection) -> list[StockLevel]:
    """Every item with its stock, what is on order, reorder point and watch state (armed, episode)."""
    return [StockLevel(r["item"], r["unit"], int(r["on_hand"]), int(r["on_order"]), int(r["reorder_point"]),
                       bool(r["armed"]), int(r["episode"])) for r in conn.execute(
        "SELECT i.item, i.unit, i.on_hand, coalesce(s.reorder_point, i.reorder_point) AS reorder_point, "
        "coalesce(w.armed, 1) AS armed, "
        "coalesce(w.episode, 1) AS episode, "
        "(SELECT coalesce(sum(o.quantity), 0) FROM orders o WHERE o.item = i.item AND o.state = 'on_order') "
        "AS on_order FROM items i LEFT JOIN stock_watch w USING (item) "
        "LEFT JOIN item_settings s ON s.item = i.item "     # an applied reorder point counts at once
        "ORDER BY i.item").fetchall()]


def set_watch(conn: Connection, item: str, armed: bool, episode: int, now: str) -> None:
    conn.execute(
        "INSERT INTO stock_watch (item, armed, episode, updated_at) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (item) DO UPDATE SET armed = excluded.armed, episode = excluded.episode, "
        "updated_at = excluded.updated_at", (item, int(armed), episode, now))


def get_mark(conn: Connection, name: str) -> int:
    row = conn.execute("SELECT value FROM producer_marks WHERE name = $1", (name,)).fetchone()
    return row[0] if row else 0


def set_mark(conn: Connection, name: str, value: int) -> None:
    conn.execute("INSERT INTO producer_marks (name, value) VALUES ($1, $2) "
                 "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, value))


TILL_COUNT_COLUMNS = "e.event_id, e.item, i.unit, e.old_on_hand, e.new_on_hand, e.source, e.created_at"


def till_count(row: Row) -> TillCount:
    return TillCount(int(row["event_id"]), row["item"], row["unit"], row["old_on_hand"], int(row["new_on_hand"]),
                     row["source"], from_db(row["created_at"]))


def count_events_after(conn: Connection, event_id: int) -> list[TillCount]:
    """Stock set by till counts after `event_id`, oldest first: the old (expected) and new (counted) figures."""
    return [till_count(r) for r in conn.execute(
        f"SELECT {TILL_COUNT_COLUMNS} FROM stock_events e "
        "JOIN items i USING (item) WHERE e.kind = 'count' AND e.event_id > $1 ORDER BY e.event_id",
        (event_id,)).fetchall()]


# ---- the till ------------------------------------------------------------------------------------------------
def item_names(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT item FROM items ORDER BY item")]


def work_with_report(conn: Connection, source: str) -> WorkWithReport | None:
    """A work item by its source identity, with its newest report (None until it has one)."""
    row = conn.execute("SELECT work_id, state FROM work WHERE source = $1", (source,)).fetchone()
    if row is None:
        return None
    report = conn.execute(
        "SELECT r.report_id, r.body, r.is_error FROM report_items i JOIN reports r USING (report_id) "
        "WHERE i.work_id = $1 ORDER BY r.generation DESC LIMIT 1", (row["work_id"],)).fetchone()
    return WorkWithReport(int(row["work_id"]), WorkState(row["state"]),
                          WorkReport(report["report_id"], report["body"], bool(report["is_error"]))
                          if report else None)


class ProducerState:
    """The producers' records inside one open transaction, without the connection: `Transaction.producers`. A
    PostgreSQL store offers the same methods."""

    def __init__(self, conn: Connection, now: str) -> None:
        self._conn = conn
        self._now = now

    def get_cursor(self, schedule: str) -> tuple[datetime | None, str | None]:
        """The schedule's cursor (the last fire time dealt with) and the key refused for capacity at it, if any."""
        cursor, refused = get_cursor(self._conn, schedule)
        return from_db_or_none(cursor), refused

    def set_cursor(self, schedule: str, cursor: datetime, refused_key: str | None) -> None:
        set_cursor(self._conn, schedule, to_text(cursor), refused_key, self._now)

    def record_missed(self, schedule: str, key: str, reason: MissedReason, fire_time: datetime | None) -> bool:
        """Record a missed occurrence once; False when it was recorded before. A reason outside `MissedReason` is
        refused (ValueError) before anything is written."""
        return record_missed(self._conn, schedule, key, MissedReason(reason).value,
                             to_text(fire_time) if fire_time else None, self._now)

    def stock_levels(self) -> list[StockLevel]:
        return stock_levels(self._conn)

    def set_watch(self, item: str, armed: bool, episode: int) -> None:
        set_watch(self._conn, item, armed, episode, self._now)

    def get_mark(self, name: str) -> int:
        return get_mark(self._conn, name)

    def set_mark(self, name: str, value: int) -> None:
        set_mark(self._conn, name, value)

    def count_events_after(self, event_id: int) -> list[TillCount]:
        return count_events_after(self._conn, event_id)
