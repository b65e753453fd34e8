"""Rows as frozen dataclasses and states as enums matching the schema's CHECK lists."""
from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from .asks import Ask
from .clock import to_text

if TYPE_CHECKING:   # these modules build on this one
    from .order_records import ProposalState
    from .shop_records import ActionState, ShopItem


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


class ActionMove(enum.Enum):
    """A supplier action's relay moves (`ActionOutbox.action_move`); a plain Enum, so no string can stand for one."""
    MARK_SENDING = "mark_sending"       # pending -> sending, committed before the HTTP call
    MARK_DELIVERED = "mark_delivered"   # sending -> delivered (args: receipt)
    MARK_NOT_SENT = "mark_not_sent"     # sending -> pending (args: not-before, an aware datetime or None; reason)
    MARK_FAILED = "mark_failed"         # sending -> failed (args: reason)
    MARK_UNKNOWN = "mark_unknown"       # sending -> unknown (args: reason)
    QUARANTINE = "quarantine"           # pending -> quarantined (args: reason)


class Admission(str, enum.Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    REFUSED = "refused"


class Renewal(enum.Enum):
    """`Inbox.renew`'s answer (C15), read in the renewal's own transaction."""
    HELD = "held"        # the run is open and its lease extended (SQLite, without leases: the run is open)
    LAPSED = "lapsed"    # its lease lapsed (never revived), or another ended the run (a sweep, a recovery): lost
    ENDED = "ended"      # its own ending write (finish, finish_counts, fail, release) committed: nothing was lost


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
class TurnSetup:
    """What a turn reads before its model call, read in its claim's transaction (`Inbox.claim(history_limit=)`): the
    session's last exchanges, oldest first (role, text, the exchange as JSON or None), and the shop's items."""
    exchanges: tuple[tuple[str, str, str | None], ...]
    shop_items: tuple[ShopItem, ...]


@dataclass(frozen=True)
class Claim:
    """The exact set of items that defines one turn (C5), held by one worker under one run id."""
    run_id: str
    worker_id: str
    session: str
    items: tuple[WorkItem, ...]
    attempt: int          # the highest attempt number among the items (C9)
    epoch: int            # the session's forget epoch at claim time (C12)
    setup: TurnSetup | None = field(default=None, compare=False, repr=False)   # None: not read with the claim

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
    asks: tuple[Ask, ...] = ()           # what the owner is asked, under the last part only
    reply_to: int | None = None          # the owner's message this answers (first part only): quoted in the chat
    edit_of: int | None = None           # the message of this chat the delivery edits in place (a card)
    photo: bytes | None = None           # a photo part: the picture; `text` is then its caption


@dataclass(frozen=True)
class Receipt:
    """C19: the reaction that tells the owner one admitted message was stored, set by the receipt relay.
    `state` is `pending` (to set, again after an unknown outcome: setting a reaction is idempotent), `set` or
    `failed` (a definite refusal, or the attempt cap)."""
    receipt_id: int
    chat_id: int
    message_id: int
    emoji: str
    state: str
    attempts: int
    reason: str | None = None


@dataclass(frozen=True)
class DueReceipts:
    """`Receipts.due_receipts_or_wake`'s answer: the receipts due now (oldest first) and `next_wake`, the earliest
    not-before time still to come of a pending one (None: none waits), read in the same snapshot."""
    due: tuple[Receipt, ...]
    next_wake: datetime | None = None


@dataclass(frozen=True)
class FinishOutcome:
    report_id: str
    discarded: bool = False   # C12: the session was forgotten during the run; the result was not stored
    next_claim: Claim | None = None   # the next turn, claimed in the same commit when the worker asked for it
    # the finish looked for the next turn in its commit and found none due: `next_wake` is then when the earliest
    # waiting session becomes due (None: none waits), read in the same transaction (False: not read, e.g. read back)
    looked: bool = False
    next_wake: datetime | None = None


@dataclass(frozen=True)
class Claimed:
    """`Inbox.claim_or_wake`'s answer: the turn claimed (None when none is due) and, when none is, `next_wake`: when
    the earliest waiting session becomes due (None: none waits), read in the claim's own transaction, so the worker
    needs no read of its own before it sleeps."""
    claim: Claim | None
    next_wake: datetime | None = None


@dataclass(frozen=True)
class Taken:
    """`Outbox.take_due`'s answer: the parts now `sending`, oldest first, each of a different chat (none when none is
    due), and the parts denied on the way; when none is due, `next_wake` is the earliest not-before time of a pending
    part (None: none waits for one), read in the same transaction, so the relay needs no read of its own before it
    sleeps."""
    deliveries: tuple[Delivery, ...] = ()
    denied: tuple[Delivery, ...] = ()
    next_wake: datetime | None = None

    @property
    def delivery(self) -> Delivery | None:
        """The first part taken (the only one when one was asked for)."""
        return self.deliveries[0] if self.deliveries else None


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

    def to_json(self) -> dict[str, Any]:
        """The `littles_law` object of `status --json` (docs/operations.md)."""
        return {"window_seconds": self.window_seconds, "lambda_per_s": self.lam, "W_s": self.w, "L": self.l,
                "lambda_W": self.lam_w, "arrivals": self.arrivals, "refused": self.refused}


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
    state: ActionState
    attempts: int


class DecisionKind(enum.StrEnum):
    """What an approve/reject press did to a proposal; the owner's words for it are the renderer's
    (producers/telegram/wording.py), never the store's."""
    APPROVED = "approved"
    REJECTED = "rejected"
    NOT_FOUND = "not_found"            # no such proposal
    NOT_AWAITING = "not_awaiting"      # decided, expired or void already (`state` says which)
    EXPIRED = "expired"                # it expired just now, before this approval
    OVER_DAY_LIMIT = "over_day_limit"  # approving it would go over the day's spending limit: it stays awaiting


@dataclass(frozen=True)
class Decision:
    """The typed outcome of an approve/reject press: amounts in the shop's minor units, as the records keep them."""
    kind: DecisionKind
    proposal_id: int
    action_id: int | None = None
    item: str = ""
    quantity: int = 0
    unit: str = ""
    total_cents: int = 0
    state: ProposalState | None = None  # the proposal's state, for NOT_AWAITING
    day_max_cents: int | None = None   # for OVER_DAY_LIMIT: the limit and what the day already holds
    reserved_cents: int = 0

    def __post_init__(self) -> None:   # a kind given as its text becomes the member, so `is` holds
        object.__setattr__(self, "kind", DecisionKind(self.kind))

    @property
    def ok(self) -> bool:
        return self.kind in (DecisionKind.APPROVED, DecisionKind.REJECTED)


@dataclass(frozen=True)
class ReportDraft:
    body: str
    destination: str | None = None       # a Telegram chat (store/destination.py) gets deliveries; else stored only
    is_error: bool = False
    asks: Sequence[Ask] = ()             # what the owner is asked (store/asks.py), under the last part
    edit_of: int | None = None           # a message of the destination chat this report replaces in place (a card)
    photo: bytes | None = None           # a picture sent as the report's first part (a PNG chart), before the text
    caption: str = ""                    # the photo's caption (plain text; its identity line is added)


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


class Lease(Protocol):
    """A leader lease as the singleton it guards sees it (bot.leadership.Leader is the one implementation): the
    fence to write with while held, and whether this process can still know it is current."""

    lease_s: float
    fence: Fence | None

    def fresh(self, margin: float | None = None) -> bool: ...


@dataclass(frozen=True)
class SentMessage:
    """How a message the bot sent reads now: its report, its text without the identity line, what it asks."""
    report_id: str
    text: str
    asks: tuple[Ask, ...]


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
    pack: int | None = None            # the supplier's pack: order quantities are whole packs
    min_order: int | None = None       # the supplier's minimum order
    price_cents: int | None = None     # the selling price (money lost per day out of stock)


@dataclass(frozen=True)
class SaleLine:
    """One line of an imported sales file: units of `item` sold on the shop-local `day` (ISO date)."""
    line: int
    item: str
    day: str
    quantity: int


@dataclass(frozen=True)
class SalesImport:
    """The outcome of an import: all or nothing. `problems` (line, reason) non-empty means nothing was stored."""
    added: int
    unchanged: int
    problems: tuple[tuple[int, str], ...] = ()


class LimitKind(enum.StrEnum):
    """Which of the shop's spending limits refused a proposal (C11)."""
    ORDER_LIMIT = "order_limit"        # its total is over the limit per order
    DAY_LIMIT = "day_limit"            # with what today already holds approved, it would go over the day's limit


@dataclass(frozen=True)
class PolicyRefusal:
    """The typed outcome of a proposal refused for a spending limit: amounts in the shop's minor units, as the records
    keep them (`proposals.refusal`, `refusal_limit_cents`, `refusal_spent_cents`; the total is the proposal's). The
    owner's words for it, money in the shop's format, are the renderer's (worker/proposals.py), never the store's."""
    kind: LimitKind
    total_cents: int
    limit_cents: int
    spent_cents: int = 0               # DAY_LIMIT: what today already holds approved

    def __post_init__(self) -> None:   # a kind given as its text becomes the member, so `is` holds
        object.__setattr__(self, "kind", LimitKind(self.kind))


@dataclass(frozen=True)
class Policy:
    """The shop's rules for proposals, from the shop file (read at each start)."""
    supplier: str
    order_max_cents: int | None = None
    day_max_cents: int | None = None
    day: str = ""                    # the shop's local date now, for the per-day limit
    expires_at: datetime | None = None    # approvals after this change nothing (aware UTC)


# ---- the readers of status, reports and metrics: typed here, JSON only at the edge (`to_json`) -----------------
def _plain(value: object) -> object:
    """A field's JSON value: times as the store's text, enums as their value, nested records by their `to_json`."""
    if isinstance(value, datetime):
        return to_text(value)
    if isinstance(value, enum.Enum):
        return value.value
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _Record:
    """`to_json()` of a flat record: its fields by name, in declaration order."""
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(cast(Any, self))}


_C = TypeVar("_C", bound="_Counts")


class _Counts(_Record):
    """Counts per state, every state present (0 when none)."""
    __slots__ = ()

    def items(self) -> list[tuple[str, int]]:
        return [(f.name, getattr(self, f.name)) for f in fields(cast(Any, self))]

    @classmethod
    def of(cls: type[_C], counts: Mapping[str, int]) -> _C:
        """Every state of the record, from a mapping holding the states seen."""
        return cls(**{f.name: int(counts.get(f.name, 0)) for f in fields(cast(Any, cls))})


@dataclass(frozen=True)
class WorkCounts(_Counts):
    pending: int = 0
    running: int = 0
    finished: int = 0
    failed: int = 0


@dataclass(frozen=True)
class DeliveryCounts(_Counts):
    pending: int = 0
    sending: int = 0
    confirmed: int = 0
    unknown: int = 0
    failed: int = 0
    denied: int = 0


@dataclass(frozen=True)
class UnknownPart(_Record):
    """A report part in `unknown`, awaiting a recorded decision (C8)."""
    report_id: str
    part: int
    parts: int
    chat_id: int
    reason: str | None
    updated_at: datetime


@dataclass(frozen=True)
class FailedWork(_Record):
    work_id: int
    source: str
    report_id: str | None


@dataclass(frozen=True)
class FailedPart(_Record):
    """A report part refused (failed) or no longer allowed (denied)."""
    report_id: str
    part: int
    chat_id: int
    reason: str | None


@dataclass(frozen=True)
class HeldAction(_Record):
    """A quarantined or unknown supplier action."""
    action_id: int
    proposal_id: int
    reason: str | None


class MissedReason(enum.StrEnum):
    """Why a schedule's occurrence did not run (`missed_occurrences.reason`)."""
    LATE = "late"
    SUPERSEDED = "superseded"
    CAPACITY = "capacity"
    CONFLICT = "conflict"
    OUTAGE = "outage"


@dataclass(frozen=True)
class Missed(_Record):
    """A recorded missed occurrence of a schedule."""
    schedule: str
    key: str
    reason: MissedReason
    fire_time: datetime | None
    recorded_at: datetime


@dataclass(frozen=True)
class StatusExtra(_Record):
    missed: tuple[Missed, ...] = ()


@dataclass(frozen=True)
class AppliedSetting(_Record):
    """An item's reorder point and target the owner applied (in force in place of the shop file's, which stand
    beside them), and the decision's who and when."""
    item: str
    reorder_point: int
    target: int
    shop_file_reorder_point: int
    shop_file_target: int
    decided_by: str
    decided_at: datetime


@dataclass(frozen=True)
class Status(_Record):
    """`Insights.status()` and `Transaction.status()`; `to_json()` is exactly `shopbot status --json`
    (docs/operations.md)."""
    work: WorkCounts
    agent_work: WorkCounts
    deliveries: DeliveryCounts
    open_agent_work: int
    oldest_pending_seconds: float | None          # None: nothing pending, or admitted ahead of this clock
    oldest_pending_ahead_seconds: float | None    # how far ahead a stamp is after a backward wall-clock step
    unknown: tuple[UnknownPart, ...]
    failed_work: tuple[FailedWork, ...]
    failed_deliveries: tuple[FailedPart, ...]
    counters: Mapping[str, int]                   # counter kind -> count, only the kinds seen
    actions: Mapping[str, int]                    # action state -> count, only the states seen
    quarantined_actions: tuple[HeldAction, ...]
    unknown_actions: tuple[HeldAction, ...]
    extra: StatusExtra
    littles_law: Stats
    processes: tuple[ProcessView, ...] = ()       # every process sharing the store (C16), oldest first
    leases: tuple[LeaderView, ...] = ()           # every leader lease and its holder, by name
    applied: tuple[AppliedSetting, ...] = ()      # the owner's applied reorder points and targets, by item


@dataclass(frozen=True)
class ProcessView(_Record):
    """A process that shares the store: its holder id (random per start), pid, host, start and last heartbeat."""
    holder: str
    pid: int
    host: str
    started_at: datetime
    seen_s_ago: float


@dataclass(frozen=True)
class LeaderView(_Record):
    """A leader lease (C16): who holds it, its generation, and how long until it expires (negative: lapsed)."""
    name: str
    holder: str
    generation: int
    expires_in_s: float
    acquired_at: datetime


@dataclass(frozen=True)
class PartView(_Record):
    """A report part's delivery as `shopbot reports` shows it."""
    part: int
    state: DeliveryState
    receipt: str | None
    reason: str | None


@dataclass(frozen=True)
class ReportView(_Record):
    """One row of `Insights.reports()`; `to_json()` is one element of `shopbot reports --json` (docs/operations.md)."""
    report: str
    work: tuple[int, ...]           # the work ids of the items the report answers
    sources: tuple[str, ...]        # their source identities, in the same order
    is_error: bool
    destination: str | None
    created_at: datetime
    deliveries: tuple[PartView, ...]
    body: str


@dataclass(frozen=True)
class MetricsSnapshot:
    """`Insights.metrics()`: the figures /metrics exports, no user data (labels are states and code-made kinds)."""
    work: Mapping[tuple[str, str], int]     # (kind, state) -> count, every kind and state present
    deliveries: DeliveryCounts
    actions: Mapping[str, int]              # every action state -> count
    oldest_pending_seconds: float           # 0.0 when nothing is pending
    counted_last_minute: Mapping[str, int]  # counter kind (or `other`) -> count in the last complete minute
    db_bytes: int
    db_free_bytes: int
    wal_bytes: int
    stats: Stats                            # C14 over the window asked for

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON (work nested as kind -> state -> count)."""
        work: dict[str, dict[str, int]] = {}
        for (kind, state), n in self.work.items():
            work.setdefault(kind, {})[state] = n
        return {"work": work, "deliveries": self.deliveries.to_json(), "actions": dict(self.actions),
                "oldest_pending_seconds": self.oldest_pending_seconds,
                "counted_last_minute": dict(self.counted_last_minute), "db_bytes": self.db_bytes,
                "db_free_bytes": self.db_free_bytes, "wal_bytes": self.wal_bytes, "stats": self.stats.to_json()}
