"""The shop's records: items and stock, stock events, drafts and proposals (the agent's tools read and write these).

Every item read here carries `on_order` (what approved orders will bring, store/shared/orders.py) and `position` (on
hand plus on order): the stock position is what reorder decisions look at."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import faults, units
from ..clock import from_db, from_db_or_none, to_text
from ..errors import UnknownTarget
from ..order_records import Draft, ProposalState, RecordedProposal
from ..records import ItemSpec, LimitKind, Policy, PolicyRefusal
from ..shop_records import ShopItem, StockEvent, StockEventKind
from . import orders
from .connection import Connection, Row

# An applied setting (store/shared/sales.py, the owner's Apply) takes the place of the shop file's reorder point and
# target; the file's values are read beside it (`file_reorder_point`, `file_target`).
ITEM_COLUMNS = ("i.item, i.unit, i.on_hand, coalesce(s.reorder_point, i.reorder_point) AS reorder_point, "
                "coalesce(s.target, i.target) AS target, i.unit_cost_cents, i.max_order, i.pack, i.min_order, "
                "i.price_cents, i.reorder_point AS file_reorder_point, i.target AS file_target, "
                "s.decided_by AS applied_by, s.decided_at AS applied_at")


def _item(row: Row) -> ShopItem:
    return ShopItem(row["item"], row["unit"], int(row["on_hand"]), int(row["reorder_point"]), int(row["target"]),
                    int(row["unit_cost_cents"]), row["max_order"], row["pack"], row["min_order"], row["price_cents"],
                    int(row["file_reorder_point"]), int(row["file_target"]), row["applied_by"],
                    from_db_or_none(row["applied_at"]), row["open_proposal"], int(row["on_order"]))


_SELECT = (f"SELECT {ITEM_COLUMNS}, (SELECT p.proposal_id FROM proposals p WHERE p.item = i.item "
           "AND p.state IN ('proposed', 'awaiting_approval')) AS open_proposal, "
           "(SELECT coalesce(sum(o.quantity), 0) FROM orders o WHERE o.item = i.item AND o.state = 'on_order') "
           "AS on_order FROM items i LEFT JOIN item_settings s ON s.item = i.item ")


def list_items(conn: Connection) -> list[ShopItem]:
    return [_item(r) for r in conn.execute(_SELECT + "ORDER BY i.item").fetchall()]


def get_item(conn: Connection, item: str) -> ShopItem | None:
    row = conn.execute(_SELECT + "WHERE i.item = $1", (item,)).fetchone()
    return _item(row) if row else None


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM shop_meta WHERE key = $1", (key,)).fetchone()
    return row[0] if row else None


def seed(conn: Connection, specs: Sequence[ItemSpec], source: str, now: str) -> bool:
    """Seed items and stock from the shop file once; later edits of the file go through `sync`."""
    if get_meta(conn, "seeded_from") is not None:
        return False
    for spec in specs:
        _insert(conn, spec, now)
        conn.execute("INSERT INTO stock_events (item, kind, new_on_hand, source, created_at) "
                     "VALUES ($1, 'seed', $2, $3, $4)",
                     (spec.item, spec.on_hand, source, now))
    faults.reached("seed")
    conn.execute("INSERT INTO shop_meta (key, value) VALUES ('seeded_from', $1)", (source,))
    return True


def _insert(conn: Connection, spec: ItemSpec, now: str) -> None:
    conn.execute("INSERT INTO items (item, unit, on_hand, reorder_point, target, unit_cost_cents, max_order, "
                 "pack, min_order, price_cents, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                 (spec.item, spec.unit, spec.on_hand, spec.reorder_point, spec.target, spec.unit_cost_cents,
                  spec.max_order, spec.pack, spec.min_order, spec.price_cents, now))


def sync(conn: Connection, specs: Sequence[ItemSpec], source: str, now: str, *,
         reset_stock: bool = False) -> list[str]:
    """Apply an edited shop file explicitly: new items are added with their stock; existing items take the file's
    reorder point, target, cost, unit and limits; counted stock is kept unless `reset_stock`. Items missing from the
    file are reported, never deleted. A reorder point and target the owner applied stay in force (the file's value
    is kept beside them and said). Returns one line per change."""
    changes = []
    existing = {row["item"]: row for row in conn.execute("SELECT * FROM items").fetchall()}
    applied = {row["item"]: row for row in conn.execute("SELECT * FROM item_settings").fetchall()}
    for spec in specs:
        old = existing.get(spec.item)
        if old is None:
            _insert(conn, spec, now)
            conn.execute("INSERT INTO stock_events (item, kind, new_on_hand, source, created_at) "
                         "VALUES ($1, 'sync', $2, $3, $4)", (spec.item, spec.on_hand, source, now))
            changes.append(f"added {spec.item} ({spec.on_hand} {spec.unit} on hand)")
            continue
        for column in ("unit", "reorder_point", "target", "unit_cost_cents", "max_order", "pack", "min_order",
                       "price_cents"):
            new = getattr(spec, column)
            if old[column] != new:
                conn.execute(f"UPDATE items SET {column} = $1, updated_at = $2 WHERE item = $3", (new, now, spec.item))
                line = f"{spec.item}: {column} {old[column]} -> {new}"
                if column in ("reorder_point", "target") and spec.item in applied:
                    line += (f" in the file; the applied {applied[spec.item][column]} stays in force "
                             f"(`shopbot settings reset {spec.item}` returns to the file's)")
                changes.append(line)
        if reset_stock and old["on_hand"] != spec.on_hand:
            set_on_hand(conn, spec.item, spec.on_hand, "sync", source, None, now)
            changes.append(f"{spec.item}: on hand {old['on_hand']} -> {spec.on_hand} (reset from the file)")
    for name in sorted(set(existing) - {s.item for s in specs}):
        changes.append(f"{name}: not in the file any more (kept; stock records are never deleted silently)")
    conn.execute("INSERT INTO shop_meta (key, value) VALUES ('synced_from', $1) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (source,))
    return changes


def set_on_hand(conn: Connection, item: str, on_hand: int, kind: str, source: str | None,
                work_id: int | None, now: str) -> tuple[int, int]:
    row = conn.execute("SELECT on_hand FROM items WHERE item = $1", (item,)).fetchone()
    if row is None:
        raise UnknownTarget(f"unknown item {item!r}")
    conn.execute("UPDATE items SET on_hand = $1, updated_at = $2 WHERE item = $3", (on_hand, now, item))
    conn.execute("INSERT INTO stock_events (item, kind, old_on_hand, new_on_hand, source, work_id, created_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6, $7)", (item, kind, row[0], on_hand, source, work_id, now))
    return row[0], on_hand


def apply_counts(conn: Connection, counts: Mapping[str, int], source: str, work_id: int,
                 now: str) -> list[tuple[str, int, int]]:
    """A till count: stock set to the counted values, each recorded as a 'count' event, or as a 'restock' that
    receives the item's open order when the stock rose by at least its quantity (store/shared/orders.py). Returns
    (item, old, new)."""
    applied = []
    for item, value in sorted(counts.items()):
        old, new, _, _ = orders.count_stock(conn, item, value, source, work_id, now)
        applied.append((item, old, new))
    return applied


def stock_events(conn: Connection, item: str, limit: int = 100) -> list[StockEvent]:
    """The item's latest `limit` stock events, oldest first."""
    rows = conn.execute("SELECT event_id, item, kind, old_on_hand, new_on_hand, source, created_at FROM stock_events "
                        "WHERE item = $1 ORDER BY event_id DESC LIMIT $2", (item, limit)).fetchall()
    return [StockEvent(int(r["event_id"]), r["item"], StockEventKind(r["kind"]), r["old_on_hand"],
                       int(r["new_on_hand"]), r["source"], from_db(r["created_at"])) for r in reversed(rows)]


def record_draft(conn: Connection, run_id: str, item: str, quantity: int, now: str) -> Draft:
    spec = get_item(conn, item)
    if spec is None:
        raise UnknownTarget(f"unknown item {item!r}")
    cost = quantity * spec.unit_cost_cents
    draft_id = conn.execute(
        "INSERT INTO drafts (run_id, item, quantity, unit_cost_cents, cost_cents, created_at) "
        "VALUES ($1, $2, $3, $4, $5, $6) RETURNING draft_id",
        (run_id, item, quantity, spec.unit_cost_cents, cost, now)).fetchone()[0]
    return Draft(draft_id, item, quantity, cost, spec.unit)


def policy_reason(conn: Connection, spec: ShopItem, supplier: str, quantity: int,
                  policy: Policy | None) -> str | PolicyRefusal | None:
    """Why policy rejects a proposal before the owner sees it, or None: a quantity out of bounds, an open proposal for
    the item, the item already on order, a stock position at or above the reorder point (nothing to order), then the
    shop's supplier and spending limits. A spending limit's refusal is typed (its amounts, never a sentence with
    money in it: the store does not know how the shop writes money)."""
    item, total = spec.item, quantity * spec.unit_cost_cents
    if quantity <= 0:
        return f"quantity must be positive, got {quantity}"
    if spec.max_order is not None and quantity > spec.max_order:
        return f"{units.count(quantity, spec.unit)} is over the limit of {spec.max_order} per order for {item}"
    if spec.open_proposal is not None:
        return f"{item} already has an open proposal (#{spec.open_proposal})"
    open_orders = orders.open_orders(conn, item)
    if open_orders:
        return f"{item} is already {orders.describe(open_orders[0])}"
    if spec.position >= spec.reorder_point:
        return (f"{item} has {units.count(spec.on_hand, spec.unit)} on hand, at or above its reorder point of "
                f"{spec.reorder_point}: nothing to order")
    if policy is None:
        return None
    if supplier != policy.supplier:
        return f"unknown supplier {supplier!r} (the shop orders from {policy.supplier})"
    if policy.order_max_cents is not None and total > policy.order_max_cents:
        return PolicyRefusal(LimitKind.ORDER_LIMIT, total, policy.order_max_cents)
    if policy.day_max_cents is not None:
        approved = conn.execute("SELECT coalesce(sum(cents), 0) FROM spending WHERE day = $1 AND state = 'reserved'",
                                (policy.day,)).fetchone()[0]
        if approved + total > policy.day_max_cents:
            return PolicyRefusal(LimitKind.DAY_LIMIT, total, policy.day_max_cents, approved)
    return None


def record_proposal(conn: Connection, run_id: str, supplier: str, item: str, quantity: int,
                    now: str, policy: Policy | None = None) -> RecordedProposal:
    """C11: a typed proposal, costs from the catalog; never contacts anyone. Policy code validates it before the owner
    sees it: an invalid one is recorded as rejected by policy with the reason, and never sent."""
    spec = get_item(conn, item)
    if spec is None:
        raise UnknownTarget(f"unknown item {item!r}")
    unit_cost = spec.unit_cost_cents
    verdict = policy_reason(conn, spec, supplier, quantity, policy)
    refusal = verdict if isinstance(verdict, PolicyRefusal) else None
    reason = verdict if isinstance(verdict, str) else None
    state = ProposalState.REJECTED_BY_POLICY if verdict else ProposalState.PROPOSED
    expires = to_text(policy.expires_at) if policy is not None and policy.expires_at is not None else None
    proposal_id = conn.execute(
        "INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, reason, "
        "refusal, refusal_limit_cents, refusal_spent_cents, created_at, updated_at, expires_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING proposal_id",
        (run_id, supplier, item, quantity, unit_cost, quantity * unit_cost, state.value, reason,
         refusal.kind.value if refusal else None, refusal.limit_cents if refusal else None,
         refusal.spent_cents if refusal else None, now, now, expires)).fetchone()[0]
    return RecordedProposal(proposal_id, item, quantity, quantity * unit_cost, spec.unit, state, reason, refusal)


def activate_proposals(conn: Connection, run_id: str, report_id: str, now: str) -> int:
    """In the finish transaction: the run's proposals become visible and approvable (C11)."""
    conn.execute("UPDATE proposals SET report_id = $1 WHERE run_id = $2", (report_id, run_id))
    return conn.execute("UPDATE proposals SET state = 'awaiting_approval', updated_at = $1 "
                        "WHERE run_id = $2 AND state = 'proposed'", (now, run_id)).rowcount


def void_proposals(conn: Connection, run_id: str, now: str) -> int:
    """A proposal whose turn did not finish is void: never shown, never approvable (C11)."""
    return conn.execute("UPDATE proposals SET state = 'void', reason = 'its turn did not finish', updated_at = $1 "
                        "WHERE run_id = $2 AND state = 'proposed'", (now, run_id)).rowcount
