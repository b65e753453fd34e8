"""The shop's sales history: one record of units sold per item and shop-local day, and the owner's applied reorder
points and targets.

A day's record comes from one of two places, never both:
- an import (`sales_days`, written by `shopbot import-sales`), which takes the day's place whenever it exists;
- the till's counts (`stock_events`): the decreases between a till count (kind `count` or `restock`) and the stock
  record before it, counted on the count's day; increases are restocks and never negative sales, and a shop-file
  sync that lowers the stock is no sale. A day has a till record when a till count of the item falls on it and an
  earlier record exists to measure from.
A day is out of stock when the item stood at 0 on hand at any moment of it (it started at 0, or a record set it to 0):
its sales say how much there was, not how much was wanted, so suggestions leave it out.

Days are shop-local dates (the caller gives the shop's time zone); times are instants (store/clock.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..clock import from_db, to_text
from ..errors import UnknownTarget
from ..records import SaleLine, SalesImport
from ..shop_records import SalesDay, SaleSource
from .connection import Connection, Row

_TILL_KINDS = ("count", "restock")       # the till's counts (a restock is a count that received an order)


def _utc_start(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


def days(conn: Connection, first: date, last: date, timezone: str,
         item: str | None = None) -> list[SalesDay]:
    """Every (item, day) in [first, last] that has a record or was out of stock, ordered by item and day:
    item, day (ISO), quantity (None without a record), source ('import', 'till' or None), out_of_stock."""
    zone = ZoneInfo(timezone)
    start, end = _utc_start(first, zone), _utc_start(last + timedelta(days=1), zone)
    found: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(name: str, day: str) -> dict[str, Any]:
        return found.setdefault((name, day), {"item": name, "day": day, "quantity": None, "source": None,
                                              "out_of_stock": False})

    # The till: each item's records in the window, after its last record before the window (to measure from).
    rows = conn.execute(
        "SELECT e.item, e.kind, e.new_on_hand, e.created_at, e.event_id FROM stock_events e "
        "WHERE e.created_at < $1 AND (CAST($2 AS text) IS NULL OR e.item = $2) AND (e.created_at >= $3 OR "
        "e.event_id = (SELECT max(b.event_id) FROM stock_events b WHERE b.item = e.item AND b.created_at < $3)) "
        "ORDER BY e.item, e.event_id", (to_text(end), item, to_text(start))).fetchall()
    by_item: dict[str, list[tuple[datetime, Row]]] = {}
    for row in rows:
        by_item.setdefault(row["item"], []).append((from_db(row["created_at"]), row))
    for name, events in by_item.items():
        sold: dict[str, int] = {}
        counted: set[str] = set()
        prev: int | None = None
        for moment, event in events:
            if moment < start:
                prev = event["new_on_hand"]
                continue
            day = moment.astimezone(zone).date().isoformat()
            if prev is not None and event["kind"] in _TILL_KINDS:   # a sync or seed that lowers stock sold nothing
                if event["new_on_hand"] < prev:
                    sold[day] = sold.get(day, 0) + prev - event["new_on_hand"]
                counted.add(day)
            if event["new_on_hand"] == 0:
                entry(name, day)["out_of_stock"] = True
            prev = event["new_on_hand"]
        for day in counted:
            record = entry(name, day)
            record["quantity"], record["source"] = sold.get(day, 0), "till"
        # A day with no record of its own starts where the last record left the stock: at 0, it stood at 0.
        on_hand = next((e["new_on_hand"] for moment, e in events if moment < start), None)
        day_cursor = first
        window_events = [(moment, e) for moment, e in events if moment >= start]
        index = 0
        while day_cursor <= last:
            text = day_cursor.isoformat()
            if on_hand == 0:
                entry(name, text)["out_of_stock"] = True
            boundary = _utc_start(day_cursor + timedelta(days=1), zone)
            while index < len(window_events) and window_events[index][0] < boundary:
                on_hand = window_events[index][1]["new_on_hand"]
                index += 1
            day_cursor += timedelta(days=1)
    # Imports take the day's place.
    for row in conn.execute("SELECT item, day, quantity FROM sales_days WHERE day BETWEEN $1 AND $2 "
                            "AND (CAST($3 AS text) IS NULL OR item = $3)",
                            (first.isoformat(), last.isoformat(), item)).fetchall():
        record = entry(row["item"], row["day"])
        record["quantity"], record["source"] = row["quantity"], "import"
    return [SalesDay(f["item"], date.fromisoformat(f["day"]), f["quantity"],
                     None if f["source"] is None else SaleSource(f["source"]), f["out_of_stock"])
            for f in (found[key] for key in sorted(found))]


def import_lines(conn: Connection, lines: Sequence[SaleLine], timezone: str, source: str,
                 now: str) -> SalesImport:
    """All or nothing: every line's (item, day) is new (added), already recorded with the same quantity (unchanged),
    or recorded with another quantity (a conflict: a problem). With any problem nothing is written."""
    problems: list[tuple[int, str]] = []
    known = {r[0] for r in conn.execute("SELECT item FROM items").fetchall()}
    new: list[SaleLine] = []
    unchanged = 0
    recorded: dict[tuple[str, str], tuple[int, SaleSource]] = {}
    if lines:
        first = min(date.fromisoformat(x.day) for x in lines)
        last = max(date.fromisoformat(x.day) for x in lines)
        for row in days(conn, first, last, timezone):
            if row.source is not None and row.quantity is not None:
                recorded[(row.item, row.day.isoformat())] = (row.quantity, row.source)
    for line in lines:
        if line.item not in known:
            problems.append((line.line, f"unknown item {line.item!r}"))
            continue
        have = recorded.get((line.item, line.day))
        if have is None:
            new.append(line)
        elif have[0] == line.quantity:
            unchanged += 1
        else:
            where = "imported before" if have[1] is SaleSource.IMPORT else "counted by the till"
            problems.append((line.line, f"conflict: {line.item} on {line.day} is already recorded as {have[0]} "
                                        f"({where}), not {line.quantity}"))
    if problems:
        return SalesImport(0, 0, tuple(problems))
    conn.executemany("INSERT INTO sales_days (item, day, quantity, source, imported_at) VALUES ($1, $2, $3, $4, $5)",
                     [(x.item, x.day, x.quantity, source, now) for x in new])
    return SalesImport(len(new), unchanged)


# ---- the owner's applied values ------------------------------------------------------------------------------
def apply_setting(conn: Connection, item: str, reorder_point: int, target: int, by: str, now: str,
                  prompt: str | None = None) -> None:
    """The item's reorder point and target from now on (they take the place of the shop file's)."""
    if reorder_point < 0 or target < reorder_point:
        raise ValueError(f"a reorder point of {reorder_point} and a target of {target}: the target must be at least "
                         "the reorder point, and neither negative")
    if conn.execute("SELECT 1 FROM items WHERE item = $1", (item,)).fetchone() is None:
        raise UnknownTarget(f"unknown item {item!r}")
    conn.execute("INSERT INTO item_settings (item, reorder_point, target, decided_by, decided_at, prompt) "
                 "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (item) DO UPDATE SET "
                 "reorder_point = excluded.reorder_point, "
                 "target = excluded.target, decided_by = excluded.decided_by, decided_at = excluded.decided_at, "
                 "prompt = excluded.prompt", (item, reorder_point, target, by, now, prompt))


def applied(conn: Connection) -> list[Row]:
    """Every applied setting with the shop file's values beside it, by item (`shopbot status`)."""
    return conn.execute("SELECT s.item, s.reorder_point, s.target, i.reorder_point AS file_reorder_point, "
                        "i.target AS file_target, s.decided_by, s.decided_at FROM item_settings s "
                        "JOIN items i ON i.item = s.item ORDER BY s.item").fetchall()


def reset_setting(conn: Connection, item: str) -> bool:
    """Back to the shop file's values; False when the item had no applied values."""
    return conn.execute("DELETE FROM item_settings WHERE item = $1", (item,)).rowcount > 0
