"""Reading proposals (C11): one SELECT of a proposal row with its item's unit, for every port that shows one."""
from __future__ import annotations

from ..clock import from_db, from_db_or_none
from ..order_records import Proposal, ProposalState
from ..records import PolicyRefusal
from .connection import Connection, Row

_SELECT = "SELECT p.*, i.unit FROM proposals p LEFT JOIN items i ON i.item = p.item "
_AWAITING = _SELECT + "WHERE p.state = 'awaiting_approval' "


def _proposal(row: Row) -> Proposal:
    refusal = None
    if row["refusal"]:
        refusal = PolicyRefusal(row["refusal"], row["total_cents"], row["refusal_limit_cents"],
                                row["refusal_spent_cents"] or 0)
    return Proposal(row["proposal_id"], row["run_id"], row["supplier"], row["item"], row["quantity"],
                    row["unit"] or "", row["unit_cost_cents"], row["total_cents"], ProposalState(row["state"]),
                    row["reason"], refusal, from_db(row["created_at"]), from_db_or_none(row["expires_at"]),
                    from_db_or_none(row["decided_at"]), row["decided_by"])


def get(conn: Connection, proposal_id: int) -> Proposal | None:
    row = conn.execute(_SELECT + "WHERE p.proposal_id = $1", (proposal_id,)).fetchone()
    return _proposal(row) if row else None


def of_run(conn: Connection, run_id: str) -> list[Proposal]:
    """The proposals a run recorded, oldest first."""
    return [_proposal(r) for r in conn.execute(_SELECT + "WHERE p.run_id = $1 ORDER BY p.proposal_id",
                                               (run_id,)).fetchall()]


def awaiting(conn: Connection, now: str | None = None) -> list[Proposal]:
    """Proposals awaiting the owner's Approve or Reject, oldest first; with `now`, only those not expired by then."""
    if now is None:
        rows = conn.execute(_AWAITING + "ORDER BY p.proposal_id").fetchall()
    else:
        rows = conn.execute(_AWAITING + "AND (p.expires_at IS NULL OR p.expires_at > $1) ORDER BY p.proposal_id",
                            (now,)).fetchall()
    return [_proposal(r) for r in rows]
