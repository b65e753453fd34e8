"""Read-only views of the shop's records for the agent's questions: sales over a window, what is on order, recent
till counts, open proposals. All SQL of these views lives here; each function is one statement over committed rows.
"""
from __future__ import annotations

from typing import Any

from .connection import Connection

# Sales are the decreases between consecutive stock records of an item (seed, count, sync, ...: every row of
# stock_events, in event order); an increase is a restock and never a negative sale. A pair counts for the window
# when its later record falls inside it.
_SALES = """
WITH ev AS (
    SELECT item, event_id, created_at, new_on_hand,
           LAG(new_on_hand) OVER (PARTITION BY item ORDER BY event_id) AS prev
    FROM stock_events
    WHERE created_at <= :until AND (:item IS NULL OR item = :item)
)
SELECT i.item, i.unit, i.on_hand,
       coalesce(sum(CASE WHEN ev.created_at > :since AND ev.prev > ev.new_on_hand
                         THEN ev.prev - ev.new_on_hand END), 0) AS sold,
       coalesce(sum(CASE WHEN ev.created_at > :since AND ev.prev < ev.new_on_hand
                         THEN ev.new_on_hand - ev.prev END), 0) AS restocked,
       coalesce(sum(CASE WHEN ev.created_at > :since THEN 1 ELSE 0 END), 0) AS records,
       min(ev.created_at) AS first_record_at
FROM items i LEFT JOIN ev ON ev.item = i.item
WHERE :item IS NULL OR i.item = :item
GROUP BY i.item
ORDER BY i.item
"""


def sales(conn: Connection, since: str, until: str, item: str | None = None) -> list[dict[str, Any]]:
    """Per item (one, or every item): units sold and restocked in (since, until], the number of stock records in
    it, and the item's first stock record at or before `until` (None when it has none): a window that starts before
    the item's first record is measured from that record. Times are the store's UTC text (lexical order is time
    order)."""
    rows = conn.execute(_SALES, {"since": since, "until": until, "item": item}).fetchall()
    return [{"item": r["item"], "unit": r["unit"], "on_hand": r["on_hand"], "sold": r["sold"],
             "restocked": r["restocked"], "records": r["records"], "first_record_at": r["first_record_at"]}
            for r in rows]


def on_order(conn: Connection, item: str | None = None) -> list[dict[str, Any]]:
    """The orders on order (store/shared/orders.py: from approval until received, not failed or voided), for the
    agent's tools: proposal, item, quantity, total, when approved, when due (approval plus the supplier's lead
    time), unit and the supplier action's state."""
    rows = conn.execute(
        "SELECT o.proposal_id, o.item, o.quantity, p.total_cents, o.approved_at AS decided_at, o.due_at, i.unit, "
        "a.state AS action_state FROM orders o JOIN proposals p ON p.proposal_id = o.proposal_id "
        "LEFT JOIN actions a ON a.proposal_id = o.proposal_id LEFT JOIN items i ON i.item = o.item "
        "WHERE o.state = 'on_order' AND (:item IS NULL OR o.item = :item) ORDER BY o.proposal_id",
        {"item": item}).fetchall()
    return [dict(r) for r in rows]


def recent_counts(conn: Connection, item: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
    """The latest till counts (stock events of kind `count`), newest first: item, the stock before and the count."""
    rows = conn.execute(
        "SELECT e.item, e.old_on_hand, e.new_on_hand, e.source, e.created_at, i.unit FROM stock_events e "
        "JOIN items i ON i.item = e.item WHERE e.kind = 'count' AND (:item IS NULL OR e.item = :item) "
        "ORDER BY e.event_id DESC LIMIT :limit", {"item": item, "limit": limit}).fetchall()
    return [dict(r) for r in rows]
