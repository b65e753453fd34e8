"""The ordering side's records (proposals, orders, actions, the reports and messages the owner decides on, the
journal's arguments): frozen rows with aware UTC times and states as enums whose values are the schema's CHECK lists
(tests/unit/test_state_enums.py reads both dialects' schema.sql)."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from .records import PolicyRefusal, WorkKind
from .shop_records import ActionState

JsonObject = Mapping[str, object]
"""A tool call's arguments or result as the journal stores it (JSON)."""


class ProposalState(enum.StrEnum):
    """A proposal's life (C11): `proposed` until its turn finishes, then awaiting the owner, then decided."""
    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    REJECTED_BY_POLICY = "rejected_by_policy"
    VOID = "void"                      # its turn never finished
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class OrderState(enum.StrEnum):
    """An approved order's life: on order until received, reported not arrived, or cancelled with its action."""
    ON_ORDER = "on_order"
    RECEIVED = "received"
    NOT_ARRIVED = "not_arrived"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Proposal:
    """A proposal row with its item's unit (`Transaction.proposal`, `awaiting_proposals`, `run_proposals`)."""
    proposal_id: int
    run_id: str
    supplier: str
    item: str
    quantity: int
    unit: str
    unit_cost_cents: int
    total_cents: int
    state: ProposalState
    reason: str | None                 # why policy rejected it, in words (not a spending limit's)
    refusal: PolicyRefusal | None      # a spending limit's typed refusal
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    decided_by: str | None


@dataclass(frozen=True, slots=True)
class RecordedProposal:
    """What `Journal.record_proposal` recorded (C11): the proposal as its row holds it just after the insert, before
    its turn finishes. `to_json()` is the operation's result as journaled and as propose_order hands it to the model."""
    proposal_id: int
    item: str
    quantity: int
    total_cents: int
    unit: str
    state: ProposalState               # PROPOSED (awaits approval once its turn finishes) or REJECTED_BY_POLICY
    reason: str | None                 # why policy rejected it, in words (not a spending limit's)
    refusal: PolicyRefusal | None      # a spending limit's typed refusal

    def __post_init__(self) -> None:
        if self.state not in (ProposalState.PROPOSED, ProposalState.REJECTED_BY_POLICY):
            raise ValueError(f"a proposal is recorded proposed or rejected by policy, not {self.state}")

    @property
    def rejected(self) -> bool:
        return self.state is ProposalState.REJECTED_BY_POLICY

    def to_json(self) -> dict[str, object]:
        """The result in the shape the model has always read: `state` is what the owner will see (`awaiting_approval`
        or `rejected`); a refusal as the row's plain columns (`refusal`, `refusal_limit_cents`,
        `refusal_spent_cents`), its words left to the tool (worker/tools/shop.py)."""
        result: dict[str, object] = {
            "proposal_id": self.proposal_id, "item": self.item, "quantity": self.quantity,
            "total_cents": self.total_cents, "unit": self.unit,
            "state": "rejected" if self.rejected else ProposalState.AWAITING_APPROVAL.value, "reason": self.reason}
        if self.refusal is not None:
            result |= {"refusal": self.refusal.kind.value, "refusal_limit_cents": self.refusal.limit_cents,
                       "refusal_spent_cents": self.refusal.spent_cents}
        return result


@dataclass(frozen=True, slots=True)
class Order:
    """An approved order in any state with its supplier action's state (`Transaction.order`, `open_orders`)."""
    proposal_id: int
    item: str
    quantity: int
    unit: str
    state: OrderState
    approved_at: datetime
    due_at: datetime                   # the approval plus the supplier's lead time
    settled_at: datetime | None
    settled_by: str | None
    event_id: int | None               # the stock event that received it
    card_chat: int | None              # the message it was approved on (its card), edited as it moves on
    card_message: int | None
    action_id: int | None
    action_state: ActionState | None
    receipt: str | None                # the supplier's order id
    action_reason: str | None

    @property
    def status(self) -> str:
        """Where the order stands with the supplier, in the owner's words."""
        if self.action_state is ActionState.DELIVERED:
            return "confirmed by the supplier" + (f" (their id {self.receipt})" if self.receipt else "")
        if self.action_state is ActionState.UNKNOWN:
            return "sent, not yet confirmed by the supplier"
        if self.action_state is ActionState.QUARANTINED:
            return "held back, not sent"
        return "being sent to the supplier"


@dataclass(frozen=True, slots=True)
class ReceivedOrder:
    """An order as a stock event received it: the owner's Received, or a till count that rose enough (restock)."""
    order: Order
    old_on_hand: int
    new_on_hand: int
    source: str | None                 # who counted: the owner, or the till request


@dataclass(frozen=True, slots=True)
class ActionView:
    """An action with its proposal's item and amounts, for `shopbot actions`."""
    action_id: int
    proposal_id: int
    state: ActionState
    destination: str
    attempts: int
    receipt: str | None
    reason: str | None
    payload: str
    item: str
    quantity: int
    total_cents: int


@dataclass(frozen=True, slots=True)
class Draft:
    """An order draft of an open run (`Journal.record_draft`): costed from the catalog, never sent."""
    draft_id: int
    item: str
    quantity: int
    cost_cents: int
    unit: str


@dataclass(frozen=True, slots=True)
class UnknownReport:
    """A report with a part in `unknown` (C8): what a notice or /pending says about it."""
    report_id: str
    chat_id: int
    kind: WorkKind                     # the kind of the work it answers
    preview: str                       # the first 80 characters of its body
    resends: int
    since: datetime                    # the earliest last change of its parts
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CountRequest:
    """One till request's counts (`Inbox.finish_counts`): its source identity and item -> counted on hand."""
    source: str
    counts: Mapping[str, int]
