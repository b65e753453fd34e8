"""On order (docs/contracts.md, Words): an approved supplier order counts from its approval until it is received.

An item's stock position is on hand plus on order; nothing proposes an item whose position is at or above its
reorder point, and no item gets a second proposal while it is on order (C11, one open proposal per item).

An order row is written in the approval's transaction (`create`). It leaves `on_order` exactly once:
- `received`: the owner's Received (`receive`: a stock event of kind 'received' adds the ordered quantity), or a
  till count that shows the stock rose by at least the ordered amount (`receive_by_count`: that count is recorded
  as a stock event of kind 'restock', never as negative sales);
- `not_arrived`: the owner's Not arrived, after the supplier's lead time passed (`not_arrived`);
- `cancelled`: its action failed or was voided (`cancel_for_action`): a failed or refused order is not on order.

Functions run inside their caller's transaction; the schema's triggers refuse any change of a settled order and any
new proposal for an item that is on order.
"""
from __future__ import annotations

from datetime import timedelta

from .. import units
from ..clock import from_db, from_db_or_none, from_text, to_text
from ..errors import IllegalTransition, UnknownTarget
from ..order_records import Order, OrderState, ReceivedOrder
from ..shop_records import ActionState
from .connection import Connection, Row

DEFAULT_LEAD_TIME_DAYS = 3

_COLUMNS = ("SELECT o.proposal_id, o.item, o.quantity, o.state, o.approved_at, o.due_at, o.settled_at, o.settled_by, "
            "o.event_id, o.card_chat, o.card_message, i.unit, a.action_id, a.state AS action_state, a.receipt, "
            "a.reason AS action_reason")
_FROM = "FROM orders o JOIN items i USING (item) LEFT JOIN actions a USING (proposal_id) "
_SELECT = f"{_COLUMNS} {_FROM}"


def describe(order: Order) -> str:
    """`on order: 6 tubs, order #2, confirmed by the supplier (their id SUP-1)`."""
    return f"on order: {units.count(order.quantity, order.unit)}, order #{order.proposal_id}, {order.status}"


def _order(row: Row) -> Order:
    action_state = row["action_state"]
    return Order(row["proposal_id"], row["item"], row["quantity"], row["unit"], OrderState(row["state"]),
                 from_db(row["approved_at"]), from_db(row["due_at"]), from_db_or_none(row["settled_at"]),
                 row["settled_by"], row["event_id"], row["card_chat"], row["card_message"], row["action_id"],
                 ActionState(action_state) if action_state is not None else None, row["receipt"],
                 row["action_reason"])


def create(conn: Connection, proposal_id: int, item: str, quantity: int, now: str,
           lead_time_days: int = DEFAULT_LEAD_TIME_DAYS) -> None:
    """In the approval's transaction: the approved proposal's order is on order from now, due after the lead time."""
    due = to_text(from_text(now) + timedelta(days=lead_time_days))
    conn.execute("INSERT INTO orders (proposal_id, item, quantity, approved_at, due_at, updated_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6)", (proposal_id, item, quantity, now, due, now))


def set_card(conn: Connection, proposal_id: int, chat_id: int, message_id: int, now: str) -> None:
    """The message the order was approved on (its card), edited as the order moves on. Settled orders keep theirs."""
    conn.execute("UPDATE orders SET card_chat = $1, card_message = $2, updated_at = $3 "
                 "WHERE proposal_id = $4 AND state = 'on_order'", (chat_id, message_id, now, proposal_id))


def get(conn: Connection, proposal_id: int) -> Order | None:
    """One order (any state) with its action's state and the supplier's receipt, or None."""
    row = conn.execute(_SELECT + "WHERE o.proposal_id = $1", (proposal_id,)).fetchone()
    return _order(row) if row else None


def open_orders(conn: Connection, item: str | None = None) -> list[Order]:
    """Orders on order (all, or one item's), oldest first."""
    where, args = ("WHERE o.state = 'on_order' AND o.item = $1 ", (item,)) if item else ("WHERE o.state = 'on_order' ",
                                                                                          ())
    return [_order(r) for r in conn.execute(_SELECT + where + "ORDER BY o.proposal_id", args).fetchall()]


def overdue(conn: Connection, now: str) -> list[Order]:
    """Orders still on order whose lead time has passed (`due_at <= now`), oldest first."""
    return [_order(r) for r in conn.execute(_SELECT + "WHERE o.state = 'on_order' AND o.due_at <= $1 "
                                          "ORDER BY o.proposal_id", (now,)).fetchall()]


def _settle(conn: Connection, proposal_id: int, state: str, by: str, now: str,
            event_id: int | None = None) -> None:
    cursor = conn.execute("UPDATE orders SET state = $1, settled_at = $2, settled_by = $3, event_id = $4, "
                          "updated_at = $5 WHERE proposal_id = $6 AND state = 'on_order'",
                          (state, now, by, event_id, now, proposal_id))
    if cursor.rowcount != 1:
        raise IllegalTransition(f"order #{proposal_id} is not on order; it cannot become {state.replace('_', ' ')}")


def _stock_event(conn: Connection, item: str, kind: str, old: int, new: int, source: str | None,
                 work_id: int | None, now: str) -> int:
    conn.execute("UPDATE items SET on_hand = $1, updated_at = $2 WHERE item = $3", (new, now, item))
    return int(conn.execute("INSERT INTO stock_events (item, kind, old_on_hand, new_on_hand, source, work_id, "
                            "created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING event_id",
                            (item, kind, old, new, source, work_id, now)).fetchone()[0])


def _on_order(conn: Connection, proposal_id: int) -> Order:
    """The order, which must be on order: UnknownTarget or IllegalTransition otherwise."""
    order = get(conn, proposal_id)
    if order is None:
        raise UnknownTarget(f"no order #{proposal_id}")
    if order.state is not OrderState.ON_ORDER:
        raise IllegalTransition(f"order #{proposal_id} is {order.state.replace('_', ' ')}, not on order")
    return order


def _settled(conn: Connection, proposal_id: int) -> Order:
    order = get(conn, proposal_id)
    assert order is not None, "an order settled in this transaction is there"
    return order


def receive(conn: Connection, proposal_id: int, by: str, now: str, counted: int | None = None) -> ReceivedOrder:
    """The owner's Received: without `counted` the ordered quantity is added to the stock; with it (the owner counted
    the stock after the delivery) the stock is set to `counted`. Either way one stock event of kind 'received', and
    the order is settled as received. Raises UnknownTarget for no such order, IllegalTransition when it is not on
    order, ValueError for a negative count (nothing changes). Returns the order as it is now, with the stock before
    and after."""
    if counted is not None and (isinstance(counted, bool) or not isinstance(counted, int) or counted < 0):
        raise ValueError(f"a count is a whole number of 0 or more, got {counted!r}")
    order = _on_order(conn, proposal_id)
    old = conn.execute("SELECT on_hand FROM items WHERE item = $1", (order.item,)).fetchone()[0]
    new = old + order.quantity if counted is None else counted
    event_id = _stock_event(conn, order.item, "received", old, new, by, None, now)
    _settle(conn, proposal_id, "received", by, now, event_id)
    return ReceivedOrder(_settled(conn, proposal_id), old, new, by)


def not_arrived(conn: Connection, proposal_id: int, by: str, now: str) -> Order:
    """The owner's Not arrived: the order no longer counts as on order (so the item may be proposed again); the stock
    is unchanged. Raises like `receive`."""
    _on_order(conn, proposal_id)
    _settle(conn, proposal_id, "not_arrived", by, now)
    return _settled(conn, proposal_id)


def cancel_for_action(conn: Connection, action_id: int, reason: str, now: str) -> int:
    """The action failed or was voided: its order is not on order any more. Returns the orders cancelled (0 or 1)."""
    return conn.execute("UPDATE orders SET state = 'cancelled', settled_at = $1, settled_by = $2, updated_at = $3 "
                        "WHERE state = 'on_order' AND proposal_id = (SELECT proposal_id FROM actions "
                        "WHERE action_id = $4)", (now, f"system:{reason}", now, action_id)).rowcount


def count_stock(conn: Connection, item: str, counted: int, source: str, work_id: int | None,
                now: str) -> tuple[int, int, str, int | None]:
    """A till count of one item. When the stock rose by at least the quantity of the item's open order (oldest
    first), the count is recorded as a 'restock' and that order is received by it; otherwise as a 'count'.
    Returns (old, new, kind, the order received or None)."""
    row = conn.execute("SELECT on_hand FROM items WHERE item = $1", (item,)).fetchone()
    if row is None:
        raise UnknownTarget(f"unknown item {item!r}")
    old = row[0]
    receipt = next((o for o in open_orders(conn, item) if counted - old >= o.quantity), None)
    kind = "restock" if receipt else "count"
    event_id = _stock_event(conn, item, kind, old, counted, source, work_id, now)
    if receipt:
        _settle(conn, receipt.proposal_id, "received", source, now, event_id)
    return old, counted, kind, receipt.proposal_id if receipt else None


def on_order_quantity(conn: Connection, item: str) -> int:
    """How much of `item` is on order (0 when nothing is)."""
    return conn.execute("SELECT coalesce(sum(quantity), 0) FROM orders WHERE item = $1 AND state = 'on_order'",
                        (item,)).fetchone()[0]


def restocked_after(conn: Connection, event_id: int) -> list[ReceivedOrder]:
    """Orders received by a till count (a 'restock' stock event) after `event_id`, in event order, each with the
    stock before and after and the count's source."""
    rows = conn.execute(
        f"{_COLUMNS}, e.old_on_hand, e.new_on_hand, e.source AS count_source {_FROM}"
        "JOIN stock_events e ON e.event_id = o.event_id WHERE o.state = 'received' AND e.kind = 'restock' "
          "AND o.event_id > $1 ORDER BY o.event_id", (event_id,)).fetchall()
    return [ReceivedOrder(_order(r), r["old_on_hand"], r["new_on_hand"], r["count_source"]) for r in rows]
