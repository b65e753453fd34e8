"""Approvals and the action outbox (C11): the owner's decision, the spending reservation and the action row commit
together; the action relay moves actions like deliveries; unknown and quarantined actions move only by a recorded
decision (a reconciliation with the supplier, or the owner's or operator's word)."""
from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

from .. import redaction
from ..clock import from_db_or_none, from_text, to_text
from ..errors import IllegalTransition, UnknownTarget
from ..order_records import ActionView, Proposal, ProposalState
from ..records import Action, Decision, DecisionKind
from ..shop_records import ActionState
from . import orders, proposals
from .connection import Connection, Row
from .moves import move


def reserved_on(conn: Connection, day: str) -> int:
    return conn.execute("SELECT coalesce(sum(cents), 0) FROM spending WHERE day = $1 AND state = 'reserved'",
                        (day,)).fetchone()[0]


def _what(p: Proposal) -> dict[str, Any]:
    """What a proposal orders, for the decision's wording."""
    return {"item": p.item, "quantity": p.quantity, "unit": p.unit, "total_cents": p.total_cents}


def _awaiting(conn: Connection, proposal_id: int) -> Proposal | Decision:
    """The proposal awaiting approval, or the decision already made when it no longer awaits (not found, or decided
    before): the shared start of approve and reject."""
    p = proposals.get(conn, proposal_id)
    if p is None:
        return Decision(DecisionKind.NOT_FOUND, proposal_id)
    if p.state is not ProposalState.AWAITING_APPROVAL:
        return Decision(DecisionKind.NOT_AWAITING, proposal_id, state=p.state, **_what(p))
    return p


def approve(conn: Connection, proposal_id: int, by: str, now: str, day: str, day_max_cents: int | None,
            supplier_destination: str, lead_time_days: int = orders.DEFAULT_LEAD_TIME_DAYS) -> Decision:
    """One transaction: the proposal's state change, the spending reservation, the action row with a random
    128-bit idempotency key, and the order, on order from now and due after the supplier's lead time. A proposal
    that no longer awaits approval changes nothing and says so."""
    p = _awaiting(conn, proposal_id)
    if isinstance(p, Decision):
        return p
    what = _what(p)
    if p.expires_at is not None and p.expires_at <= from_text(now):
        _decide(conn, proposal_id, "expired", "system:expiry", now)
        return Decision(DecisionKind.EXPIRED, proposal_id, **what)
    reserved = reserved_on(conn, day) if day_max_cents is not None else 0
    if day_max_cents is not None and reserved + p.total_cents > day_max_cents:
        return Decision(DecisionKind.OVER_DAY_LIMIT, proposal_id, day_max_cents=day_max_cents,
                        reserved_cents=reserved, **what)
    _decide(conn, proposal_id, "approved", by, now)
    conn.execute("INSERT INTO spending (proposal_id, day, cents, state, updated_at) "
                 "VALUES ($1, $2, $3, 'reserved', $4)",
                 (proposal_id, day, p.total_cents, now))
    payload = {"supplier": p.supplier, "reference": f"proposal-{proposal_id}",
               "lines": [{"item": p.item, "quantity": p.quantity}]}
    action_id = conn.execute(
        "INSERT INTO actions (proposal_id, idempotency_key, destination, payload, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6) RETURNING action_id",
        (proposal_id, secrets.token_hex(16), supplier_destination, json.dumps(payload, sort_keys=True), now,
         now)).fetchone()[0]
    orders.create(conn, proposal_id, p.item, p.quantity, now, lead_time_days)
    return Decision(DecisionKind.APPROVED, proposal_id, action_id, **what)


def reject(conn: Connection, proposal_id: int, by: str, now: str) -> Decision:
    p = _awaiting(conn, proposal_id)
    if isinstance(p, Decision):
        return p
    _decide(conn, proposal_id, "rejected", by, now)
    return Decision(DecisionKind.REJECTED, proposal_id, **_what(p))


def _decide(conn: Connection, proposal_id: int, state: str, by: str, now: str) -> None:
    conn.execute("UPDATE proposals SET state = $1, decided_at = $2, decided_by = $3, updated_at = $4 "
                 "WHERE proposal_id = $5", (state, now, by, now, proposal_id))


def expiring(conn: Connection, now: str) -> bool:
    """Whether any proposal awaiting approval is due to expire (a read: the action relay asks every second)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM proposals WHERE state = 'awaiting_approval' "
                        "AND expires_at <= $1)", (now,)).fetchone()[0] == 1


def expire(conn: Connection, now: str) -> list[int]:
    rows = conn.execute("SELECT proposal_id FROM proposals WHERE state = 'awaiting_approval' AND expires_at <= $1",
                        (now,)).fetchall()
    for (proposal_id,) in rows:
        _decide(conn, proposal_id, "expired", "system:expiry", now)
    return [r[0] for r in rows]


def _action(row: Row) -> Action:
    return Action(row["action_id"], row["proposal_id"], row["idempotency_key"], row["destination"], row["payload"],
                  ActionState(row["state"]), row["attempts"])


def due(conn: Connection, now: str, limit: int = 10) -> list[Action]:
    rows = conn.execute("SELECT * FROM actions WHERE state = 'pending' AND (not_before IS NULL OR not_before <= $1) "
                        "ORDER BY action_id LIMIT $2", (now, limit)).fetchall()
    return [_action(r) for r in rows]


def unknown(conn: Connection) -> list[Action]:
    return [_action(r) for r in conn.execute("SELECT * FROM actions WHERE state = 'unknown' ORDER BY action_id")]


def next_wake(conn: Connection) -> datetime | None:
    return from_db_or_none(conn.execute(
        "SELECT min(not_before) FROM actions WHERE state = 'pending' AND not_before IS NOT NULL").fetchone()[0])


def _move(conn: Connection, action_id: int, expect: str, new: str, now: str, **columns: object) -> None:
    move(conn, "actions", "action_id", action_id, expect, new, now, **columns)


def _release_spending(conn: Connection, action_id: int, now: str) -> None:
    """A failed or voided action: its spending is released and its order is not on order any more."""
    orders.cancel_for_action(conn, action_id, "its order was not placed", now)
    conn.execute("UPDATE spending SET state = 'released', updated_at = $1 WHERE state = 'reserved' AND proposal_id = "
                 "(SELECT proposal_id FROM actions WHERE action_id = $2)", (now, action_id))


def mark_sending(conn: Connection, action_id: int, now: str) -> None:
    conn.execute("UPDATE actions SET attempts = attempts + 1 WHERE action_id = $1", (action_id,))
    _move(conn, action_id, "pending", "sending", now)


def mark_delivered(conn: Connection, action_id: int, receipt: str, now: str) -> None:
    _move(conn, action_id, "sending", "delivered", now, receipt=receipt, reason=None)


def mark_not_sent(conn: Connection, action_id: int, not_before: datetime | None, reason: str, now: str) -> None:
    _move(conn, action_id, "sending", "pending", now, not_before=to_text(not_before) if not_before else None,
          reason=reason)


def mark_failed(conn: Connection, action_id: int, reason: str, now: str) -> None:
    """A definite refusal: failed and visible; its spending reservation is released in the same transaction."""
    _move(conn, action_id, "sending", "failed", now, reason=reason)
    _release_spending(conn, action_id, now)


def mark_unknown(conn: Connection, action_id: int, reason: str, now: str) -> None:
    _move(conn, action_id, "sending", "unknown", now, reason=reason)


def quarantine(conn: Connection, action_id: int, reason: str, now: str) -> None:
    """Malformed rows, unknown destinations, payloads outside the allowed fields: kept, never sent, visible."""
    _move(conn, action_id, "pending", "quarantined", now, reason=reason)


def sending_to_unknown(conn: Connection, now: str) -> list[int]:
    rows = conn.execute("UPDATE actions SET state = 'unknown', updated_at = $1, reason = 'the process stopped while "
                        "sending' WHERE state = 'sending' RETURNING action_id", (now,)).fetchall()
    return sorted(r[0] for r in rows)


def decide(conn: Connection, action_id: int, decision: str, by: str, now: str, *, receipt: str | None = None,
           detail: str | None = None) -> str:
    """Record a decision about an unknown or quarantined action and apply it. Returns the new state."""
    row = conn.execute("SELECT state FROM actions WHERE action_id = $1", (action_id,)).fetchone()
    if row is None:
        raise UnknownTarget(f"no action {action_id}")
    state = row[0]
    moves = {("unknown", "reconciled_found"): "delivered", ("unknown", "delivered"): "delivered",
             ("unknown", "reconciled_absent"): "pending", ("unknown", "resend"): "pending",
             ("quarantined", "release"): "pending", ("quarantined", "void"): "voided"}
    new = moves.get((state, decision))
    if new is None:
        raise IllegalTransition(f"action {action_id} is {state}: '{decision}' does not apply", table="actions",
                                row=action_id, expected=sorted({s for s, d in moves if d == decision}), found=state)
    if new == "delivered" and not receipt:
        receipt = f"confirmed by {by}"
    conn.execute("INSERT INTO action_decisions (action_id, decision, detail, decided_by, decided_at) "
                 "VALUES ($1, $2, $3, $4, $5)", (action_id, decision, redaction.error_detail(detail), by, now))
    columns: dict[str, object] = {"reason": detail or decision}
    if new == "delivered":
        columns["receipt"] = receipt
    if new == "pending":
        columns["not_before"] = None
    _move(conn, action_id, state, new, now, **columns)
    if new == "voided":
        _release_spending(conn, action_id, now)
    return new


def listing(conn: Connection, quarantined_only: bool = False) -> list[ActionView]:
    where = "WHERE a.state = 'quarantined'" if quarantined_only else ""
    return [ActionView(r["action_id"], r["proposal_id"], ActionState(r["state"]), r["destination"], r["attempts"],
                       r["receipt"], r["reason"], r["payload"], r["item"], r["quantity"], r["total_cents"])
            for r in conn.execute(
        "SELECT a.action_id, a.proposal_id, a.state, a.destination, a.attempts, a.receipt, a.reason, a.payload, "
        f"p.item, p.quantity, p.total_cents FROM actions a JOIN proposals p USING (proposal_id) {where} "
        "ORDER BY a.action_id").fetchall()]
