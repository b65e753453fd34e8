"""Durable state of shopbot. The other packages use only these names: the ports (store/ports.py), the records, the
errors, the clock, the fault points, and `open_store`, which opens the configured implementation."""
from collections.abc import Sequence
from pathlib import Path

from . import asks, faults, units
from .asks import Ask
from .clock import Clock, ManualClock, SystemClock, from_db, from_db_or_none, from_text, parse_clock, to_text
from .destination import Destination, telegram_chat
from .errors import (
    CommitUnknown,
    ConnectionLost,
    IllegalTransition,
    InstanceLocked,
    LeaseLost,
    NotClaimed,
    NotShopbotDatabase,
    PartStopped,
    RestoreRefused,
    SchemaTooNew,
    SchemaTooOld,
    ShopbotError,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    UnknownTarget,
    retry_delay,
)
from .locations import describe as describe_location
from .locations import is_database_url
from .offers import ClaimOffer, OfferState
from .order_records import (
    ActionView,
    CountRequest,
    Draft,
    JsonObject,
    Order,
    OrderState,
    Proposal,
    ProposalState,
    ReceivedOrder,
    RecordedProposal,
    UnknownReport,
)
from .ports import (
    ActionOutbox,
    Admin,
    AdmissionTx,
    ChangeNotification,
    ConversationTx,
    Inbox,
    Insights,
    InTransaction,
    Journal,
    Leadership,
    OrderTx,
    Outbox,
    ProducerRecords,
    PromptTx,
    Receipts,
    ShopRecords,
    Store,
    Transaction,
)
from .records import (
    Action,
    ActionMove,
    Admission,
    AdmitResult,
    Claim,
    Claimed,
    Decision,
    DecisionKind,
    Delivery,
    DeliveryCounts,
    DeliveryState,
    DueReceipts,
    Fence,
    FinishOutcome,
    ItemSpec,
    LeaderView,
    Lease,
    LimitKind,
    MetricsSnapshot,
    Missed,
    MissedReason,
    Occurrence,
    Policy,
    PolicyRefusal,
    ProcessView,
    Prompt,
    Receipt,
    RecoverySummary,
    Renewal,
    ReportDraft,
    ReportView,
    SaleLine,
    SalesImport,
    SentMessage,
    Stats,
    Status,
    Taken,
    TurnSetup,
    Violation,
    WorkCounts,
    WorkItem,
    WorkKind,
    WorkState,
)
from .shop_records import (
    ActionState,
    EndedRun,
    ItemSales,
    OnOrder,
    OpenAction,
    OpsView,
    RunOutcome,
    SalesDay,
    SaleSource,
    SeriesPoint,
    ShopItem,
    StateTallies,
    StockEvent,
    StockEventKind,
    StockLevel,
    Tally,
    TillCount,
    WorkReport,
    WorkWithReport,
)
from .sqlite import (
    DEFAULT_ATTEMPT_CAP,
    DEFAULT_CAPACITY,
    DEFAULT_DEBOUNCE_MS,
    DEFAULT_LEASE_S,
    InstanceLock,
    SqliteStore,
    backup_before_migration,
    restore,
)


async def open_store(location: Path | str, clock: Clock, *, capacity: int = DEFAULT_CAPACITY,
                     debounce_ms: int = DEFAULT_DEBOUNCE_MS, attempt_cap: int = DEFAULT_ATTEMPT_CAP,
                     create: bool = True, migrate: bool = False, max_pages: int | None = None,
                     secrets: Sequence[str] = (), lease_s: float = DEFAULT_LEASE_S) -> Store:
    """Open the store at `location`: a `postgresql://` (or `postgres://`) URL opens the PostgreSQL store
    (store/postgres, the `postgres` extra); anything else is a SQLite file path. A missing database is created at
    the current schema (when `create`); an older one is refused with the command that migrates it (unless
    `migrate`); a newer one is refused before anything changes. `secrets` (the configured credentials) are masked
    in everything the store keeps from outside text. `lease_s` is a claim's lease on PostgreSQL (C15; SQLite's
    claims are not leases: one process owns the file)."""
    if is_database_url(location):
        try:
            from .postgres import PostgresStore  # imported only when asked for: psycopg is an optional extra
        except ModuleNotFoundError as exc:
            raise StoreUnavailable(f"SHOPBOT_DB is a PostgreSQL URL but its driver is not installed ({exc.name}): "
                                   "pip install 'shopbot[postgres]'") from exc
        return await PostgresStore.open(str(location), clock, capacity=capacity, debounce_ms=debounce_ms,
                                        attempt_cap=attempt_cap, create=create, migrate=migrate,
                                        max_pages=max_pages, secrets=secrets, lease_s=lease_s)
    return await SqliteStore.open(location, clock, capacity=capacity, debounce_ms=debounce_ms,
                                  attempt_cap=attempt_cap, create=create, migrate=migrate, max_pages=max_pages,
                                  secrets=secrets)


__all__ = [
    # the ports and the way to open an implementation
    "Store", "Transaction", "Inbox", "Journal", "Outbox", "Receipts", "ActionOutbox", "ShopRecords", "Insights",
    "ChangeNotification", "Admin", "Leadership", "ProducerRecords", "open_store", "is_database_url",
    # the transaction's roles, by consumer (`Transaction` is their union)
    "InTransaction", "AdmissionTx", "PromptTx", "ConversationTx", "OrderTx",
    "describe_location",
    # the SQLite implementation's own operator moves (the instance lock, restore of a backup file, the backup
    # taken before a migration)
    "SqliteStore", "InstanceLock", "restore", "backup_before_migration",
    # the named fault points (kill points) the drills arm
    "faults",
    # what the owner is asked and the answers a press may carry (C8)
    "asks", "Ask",
    # words that agree with numbers (`1 tub`, `2 tubs`): every layer's texts use them
    "units",
    # time
    "Clock", "ManualClock", "SystemClock", "from_db", "from_db_or_none", "from_text", "parse_clock", "to_text",
    "telegram_chat",
    # errors
    "ShopbotError", "CommitUnknown", "ConnectionLost", "IllegalTransition", "InstanceLocked", "LeaseLost", "NotClaimed",
    "NotShopbotDatabase", "PartStopped", "RestoreRefused", "SchemaTooNew", "SchemaTooOld", "StoreBusy", "StoreError",
    "StoreUnavailable", "UnknownTarget", "retry_delay",
    # records
    "Action", "ActionMove", "Admission", "AdmitResult", "Claim", "Claimed", "Decision", "DecisionKind", "Delivery",
    "DeliveryState", "DueReceipts", "Destination", "Fence", "Lease",
    "FinishOutcome", "ItemSpec", "LeaderView", "LimitKind", "MetricsSnapshot", "Occurrence", "Policy",
    "PolicyRefusal", "ProcessView", "Prompt",
    "Receipt", "RecoverySummary", "ReportDraft", "ReportView", "SaleLine", "SalesImport", "SentMessage", "Stats",
    "Status", "Taken", "TurnSetup", "Violation", "WorkItem", "WorkKind", "WorkState", "Missed", "MissedReason",
    "DeliveryCounts", "WorkCounts", "Renewal",
    # an idle worker's claim, offered to the next admission's commit (store/offers.py)
    "ClaimOffer", "OfferState",
    # the shop's records (store/shop_records.py)
    "ActionState", "EndedRun", "ItemSales", "OnOrder", "OpenAction", "OpsView", "RunOutcome", "SaleSource", "SalesDay",
    "SeriesPoint", "ShopItem", "StateTallies", "StockEvent", "StockEventKind", "StockLevel", "Tally", "TillCount",
    "WorkReport", "WorkWithReport",
    # the ordering side's records (store/order_records.py)
    "ActionView", "CountRequest", "Draft", "JsonObject", "Order", "OrderState", "Proposal", "ProposalState",
    "ReceivedOrder", "RecordedProposal", "UnknownReport",
]
