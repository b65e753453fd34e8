"""The shop's records as they cross the seam (ShopRecords, ProducerRecords, Insights, Leadership): frozen dataclasses
with aware UTC datetimes, and kinds as Enums whose values are exactly the schema's CHECK lists (a test compares them
with both dialects' schemas)."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from .records import DeliveryCounts, FailedPart, FailedWork, UnknownPart, WorkCounts, WorkState, _Record


class StockEventKind(enum.StrEnum):
    """Why an item's stock changed (`stock_events.kind`)."""
    SEED = "seed"            # the shop file's first load
    COUNT = "count"          # a till count
    SYNC = "sync"            # an edited shop file (a new item, or `--reset-stock`)
    RESTOCK = "restock"      # a till count that received an open order (the stock rose by at least its quantity)
    RECEIVED = "received"    # the owner's Received on an order


class RunOutcome(enum.StrEnum):
    """How a run (one turn's claim) ended (`runs.outcome`)."""
    FINISHED = "finished"
    RELEASED = "released"
    FAILED = "failed"
    DISCARDED = "discarded"
    RECOVERED = "recovered"
    EXPIRED = "expired"


class ActionState(enum.StrEnum):
    """A supplier action's state (`actions.state`)."""
    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"
    UNKNOWN = "unknown"
    QUARANTINED = "quarantined"
    VOIDED = "voided"


@dataclass
class Tally:
    """Counts by state of a table's rows with ids at or below `upto`, kept by a caller between reads (`StateTallies`).
    Those rows are all ended (no open row has an id that low) and an ended row never changes state or goes away, so
    the counts stay true and each read only counts the rows above `upto`: a read costs the open window, not the whole
    history."""
    upto: int = 0
    counts: dict[tuple[str, ...], int] = field(default_factory=dict)


StateTallies = dict[str, Tally]
"""The counts of ended rows a caller keeps for `Insights.metrics` and `Insights.ops_view` (start with `{}`)."""


@dataclass(frozen=True, slots=True)
class ShopItem(_Record):
    """An item with its stock, what is on order, its position (on hand plus on order) and its limits; the reorder
    point and target in force (the owner's applied ones, else the shop file's), the file's beside them."""
    item: str
    unit: str
    on_hand: int
    reorder_point: int
    target: int
    unit_cost_cents: int
    max_order: int | None
    pack: int | None
    min_order: int | None
    price_cents: int | None
    file_reorder_point: int
    file_target: int
    applied_by: str | None          # who applied the reorder point and target in force (None: the shop file's)
    applied_at: datetime | None
    open_proposal: int | None       # the proposal id of the item's open proposal, if any
    on_order: int                   # units on order (approved, not yet received)

    @property
    def position(self) -> int:
        """On hand plus on order: what reorder decisions look at."""
        return self.on_hand + self.on_order

    @property
    def applied(self) -> bool:
        return self.applied_by is not None


@dataclass(frozen=True, slots=True)
class StockLevel(_Record):
    """What the stock watcher reads of an item: stock, on order, reorder point in force, and its episode state."""
    item: str
    unit: str
    on_hand: int
    on_order: int
    reorder_point: int
    armed: bool                     # a new episode may admit a stock check
    episode: int

    @property
    def position(self) -> int:
        return self.on_hand + self.on_order


@dataclass(frozen=True, slots=True)
class StockEvent(_Record):
    """One change of an item's stock: its kind, the figures before (None for a seed or new item) and after."""
    event_id: int
    item: str
    kind: StockEventKind
    old_on_hand: int | None
    new_on_hand: int
    source: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TillCount(_Record):
    """A till count (a stock event of kind `count`): the stock expected before it and the counted figure."""
    event_id: int
    item: str
    unit: str
    old_on_hand: int | None
    new_on_hand: int
    source: str | None              # the till request's identity (`till:<till>:<request>`)
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ItemSales(_Record):
    """An item's units sold and restocked over a window, its stock records in it and its first record before its end
    (None without one: the window is measured from that record when it starts later)."""
    item: str
    unit: str
    on_hand: int
    sold: int
    restocked: int
    records: int
    first_record_at: datetime | None


class SaleSource(enum.StrEnum):
    """Where a day's sales come from: the till's counts, or an imported file that takes the day's place."""
    TILL = "till"
    IMPORT = "import"


@dataclass(frozen=True, slots=True)
class SalesDay(_Record):
    """An item's sales on one shop-local day: the quantity (None without a record), where it comes from, and whether
    the item stood at 0 on hand at some moment of the day."""
    item: str
    day: date
    quantity: int | None
    source: SaleSource | None
    out_of_stock: bool


@dataclass(frozen=True, slots=True)
class OnOrder(_Record):
    """An order on order for the agent: quantity, total, when approved, when due, the supplier action's state."""
    proposal_id: int
    item: str
    unit: str | None
    quantity: int
    total_cents: int
    decided_at: datetime
    due_at: datetime                # approval plus the supplier's lead time
    action_state: ActionState | None


@dataclass(frozen=True, slots=True)
class WorkReport(_Record):
    """A report as the till reads it back."""
    report_id: str
    body: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class WorkWithReport(_Record):
    """A work item by its source identity, with its state and newest report (None until it has one)."""
    work_id: int
    state: WorkState
    report: WorkReport | None


@dataclass(frozen=True, slots=True)
class OpenAction(_Record):
    """A supplier action not yet settled (pending, sending, unknown or quarantined) with its proposal's order."""
    action_id: int
    proposal_id: int
    state: ActionState
    reason: str | None
    item: str
    quantity: int
    total_cents: int


@dataclass(frozen=True, slots=True)
class OpsView(_Record):
    """The operator page's figures, each read through an index."""
    work: WorkCounts
    agent_work: WorkCounts
    deliveries: DeliveryCounts
    oldest_pending_seconds: float | None           # None: nothing pending
    unknown: tuple[UnknownPart, ...]
    failed_work: tuple[FailedWork, ...]
    failed_deliveries: tuple[FailedPart, ...]
    open_actions: tuple[OpenAction, ...]
    counters_last_hour: Mapping[str, int] = field(default_factory=dict)   # counter kind (or `other`) -> count

    @property
    def open_agent_work(self) -> int:
        return self.agent_work.pending + self.agent_work.running


@dataclass(frozen=True, slots=True)
class SeriesPoint(_Record):
    """C14 over one slice of a day series: its start, λ (per second), W (seconds) and L."""
    start: datetime
    lam: float
    w: float
    l: float                        # noqa: E741 - Little's L


@dataclass(frozen=True, slots=True)
class EndedRun(_Record):
    """A run that ended: its outcome, start and end, and its model usage."""
    run_id: str
    outcome: RunOutcome
    started_at: datetime
    ended_at: datetime
    model_calls: int
    input_tokens: int
    output_tokens: int
