"""Read-only views of the shop's records for the agent's questions: sales over a window, what is on order, recent
till counts, open proposals. All SQL of these views lives here; each function is one statement over committed rows.
"""
from __future__ import annotations

from ..clock import from_db, from_db_or_none
from ..shop_records import ActionState, ItemSales, OnOrder, TillCount
from .connection import Connection
from .producer_state import TILL_COUNT_COLUMNS, till_count

# Sales are the decreases between consecutive stock records of an item (seed, count, sync, ...: every row of
# stock_events, in event order); an increase is a restock and never a negative sale. A pair counts for the window
# when its later record falls inside it.
_SALES = """
WITH ev AS (
    SELECT item, event_id, created_at, new_on_hand,
           LAG(new_on_hand) OVER (PARTITION BY item ORDER BY event_id) AS prev
    FROM stock_events
    WHERE created_at <= $1 AND (CAST($2 AS text) IS NULL OR item = $2)
)
SELECT i.item, i.unit, i.on_hand,
       coalesce(sum(CASE WHEN ev.created_at > $3 AND ev.prev > ev.new_on_hand
                         THEN ev.prev - ev.new_on_hand END), 0) AS sold,
       coalesce(sum(CASE WHEN ev.created_at > $3 AND ev.prev < ev.new_on_hand
                         THEN ev.new_on_hand - ev.prev END), 0) AS restocked,
       coalesce(sum(CASE WHEN ev.created_at > $3 THEN 1 ELSE 0 END), 0) AS records,
       min(ev.created_at) AS first_record_at
FROM items i LEFT JOIN ev ON ev.item = i.item
WHERE CAST($2 AS text) IS NULL OR i.item = $2
GROUP BY i.item
ORDER BY i.item
"""


def sales(conn: Connection, since: str, until: str, item: str | None = None) -> list[ItemSales]:
    """Per item (one, or every item): units sold and restocked in (since, until], the number of stock records in
    it, and the item's first stock record at or before `until` (None when it has none): a window that starts before
    the item's first record is measured from that record. `since` and `until` are the store's UTC text; the first
    record's time is as the store reads it (store/clock.py `from_db`)."""
    rows = conn.execute(_SALES, (until, item, since)).fetchall()
    return [ItemSales(r["item"], r["unit"], int(r["on_hand"]), int(r["sold"]), int(r["restocked"]), int(r["records"]),
                      from_db_or_none(r["first_record_at"])) for r in rows]


def on_order(conn: Connection, item: str | None = None) -> list[OnOrder]:
    """The orders on order (store/shared/orders.py: from approval until received, not failed or voided), for the
    agent's tools: proposal, item, quantity, total, when approved, when due (approval plus the supplier's lead
    time), unit and the supplier action's state."""
    rows = conn.execute(
        "SELECT o.proposal_id, o.item, o.quantity, p.total_cents, o.approved_at AS decided_at, o.due_at, i.unit, "
        "a.state AS action_state FROM orders o JOIN proposals p ON p.proposal_id = o.proposal_id "
        "LEFT JOIN actions a ON a.proposal_id = o.proposal_id LEFT JOIN items i ON i.item = o.item "
        "WHERE o.state = 'on_order' AND (CAST($1 AS text) IS NULL OR o.item = $1) ORDER BY o.proposal_id",
        (item,)).fetchall()
    return [OnOrder(int(r["proposal_id"]), r["item"], r["unit"], int(r["quantity"]), int(r["total_cents"]),
                    from_db(r["decided_at"]), from_db(r["due_at"]),
                    None if r["action_state"] is None else ActionState(r["action_state"])) for r in rows]


def recent_counts(conn: Connection, item: str | None = None, limit: int = 10) -> list[TillCount]:
    """The latest till counts (stock events of kind `count`), newest first: item, the stock before and the count."""
    rows = conn.execute(
        f"SELECT {TILL_COUNT_COLUMNS} FROM stock_events e "
        "JOIN items i ON i.item = e.item WHERE e.kind = 'count' AND (CAST($1 AS text) IS NULL OR e.item = $1) "
        "ORDER BY e.event_id DESC LIMIT $2", (item, limit)).fetchall()
    return [till_count(r) for r in rows]
    return [dict(r) for r in rows]
