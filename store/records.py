"""Rows as frozen dataclasses and states as enums matching the schema's CHECK lists."""
from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


class WorkState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


class WorkKind(str, enum.Enum):
    AGENT = "agent"        # claimed by the worker, counted by capacity and C14
    CONTROL = "control"    # an owner's button or command, answered inside its admission
    NOTICE = "notice"      # a system notice, answered inside its admission


class DeliveryState(str, enum.Enum):
    PENDING = "pending"
    SENDING = "sending"
    CONFIRMED = "confirmed"
    UNKNOWN = "unknown"
    FAILED = "failed"
    DENIED = "denied"


class Admission(str, enum.Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    REFUSED = "refused"


@dataclass(frozen=True)
class Occurrence:
    """What a producer asks to admit (C1)."""
    source: str
    session: str
    payload: str
    kind: WorkKind = WorkKind.AGENT
    destination: str | None = None


@dataclass(frozen=True)
class AdmitResult:
    outcome: Admission
    work_id: int | None = None     # the stored item (also for duplicate and conflict)
    report_id: str | None = None   # control and notice items: the report written in the admission


@dataclass(frozen=True)
class WorkItem:
    work_id: int
    source: str
    session: str
    kind: WorkKind
    payload: str
    destination: str | None
    state: WorkState
    attempts: int
    admitted_at: datetime


@dataclass(frozen=True)
class Claim:
    """The exact set of items that defines one turn (C5), held by one worker under one run id."""
    run_id: str
    worker_id: str
    session: str
    items: tuple[WorkItem, ...]
    attempt: int          # the highest attempt number among the items (C9)
    epoch: int            # the session's forget epoch at claim time (C12)

    @property
    def anchor(self) -> int:
        return min(item.work_id for item in self.items)

    @property
    def destination(self) -> str | None:
        return min(self.items, key=lambda item: item.work_id).destination


@dataclass(frozen=True)
class Delivery:
    delivery_id: int
    report_id: str
    part: int
    parts: int
    chat_id: int
    text: str
    state: DeliveryState
    attempts: int
    buttons: tuple[tuple[tuple[str, str], ...], ...] | None = None   # only on the last part
    reply_to: int | None = None          # the owner's message this answers (first part only): quoted in the chat
    edit_of: int | None = None           # the message of this chat the delivery edits in place (a card)


@dataclass(frozen=True)
class FinishOutcome:
    report_id: str
    discarded: bool = False   # C12: the session was forgotten during the run; the result was not stored
    next_claim: Claim | None = None   # the next turn, claimed in the same commit when the worker asked for it


@dataclass(frozen=True)
class RecoverySummary:
    released: tuple[int, ...]
    failed: tuple[int, ...]
    unknown_deliveries: tuple[int, ...]


@dataclass(frozen=True)
class Stats:
    """C14 over a window: arrival rate, mean time in system, mean open items (agent work only)."""
    window_seconds: float
    arrivals: int
    refused: int
    lam: float        # accepted arrivals per second
    w: float          # mean seconds in system
    l: float          # noqa: E741 - mean open items, Little's L

    @property
    def lam_w(self) -> float:
        return self.lam * self.w

    @property
    def holds(self) -> bool:
        return abs(self.l - self.lam_w) <= 0.05 * self.l if self.l else self.lam_w == 0


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str
    detail: str


@dataclass(frozen=True)
class Action:
    action_id: int
    proposal_id: int
    idempotency_key: str
    destination: str
    payload: str
    state: str
    attempts: int


@dataclass(frozen=True)
class Decision:
    """The outcome of an approve/reject press, in words the owner reads."""
    ok: bool
    text: str
    action_id: int | None = None


Buttons = Sequence[Sequence[tuple[str, str]]]


@dataclass(frozen=True)
class ReportDraft:
    body: str
    destination: str | None = None       # 'tg:<chat_id>' gets deliveries; anything else is stored only
    is_error: bool = False
    buttons: Buttons | None = None       # inline keyboard rows of (label, callback data), under the last part
    edit_of: int | None = None           # a message of the destination chat this report replaces in place (a card)


@dataclass(frozen=True)
class Fence:
    """A singleton's leader lease as held (C16): checked inside each of its write transactions, so a write by a
    holder whose lease lapsed or was taken over is refused (`LeaseLost`) with nothing written."""
    name: str              # poller, relay, producers, actions
    holder: str            # a random uuid4 hex per process start
    generation: int        # grows at every takeover

    @property
    def sender(self) -> str:
        """How a `sending` row names the lease that marked it (`deliveries.sender`, `actions.sender`)."""
        return f"{self.holder}/{self.generation}"


@dataclass(frozen=True)
class Prompt:
    nonce: str
    kind: str
    target: str
    chat_id: int
    expires_at: datetime | None
    decided_at: datetime | None
    decision: str | None


@dataclass(frozen=True)
class ItemSpec:
    """An item as the shop file describes it."""
    item: str
    unit: str
    on_hand: int
    reorder_point: int
    target: int
    unit_cost_cents: int
    max_order: int | None = None


@dataclass(frozen=True)
class Policy:
    """The shop's rules for proposals, from the shop file (read at each start)."""
    supplier: str
    order_max_cents: int | None = None
    day_max_cents: int | None = None
    day: str = ""                    # the shop's local date now, for the per-day limit
    expires_at: str | None = None    # approvals after this change nothing
