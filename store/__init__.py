"""Durable state of shopbot. `Store` (store/api.py) is the only interface the other packages use."""
from . import faults
from .api import Store
from .backup import restore
from .clock import Clock, ManualClock, SystemClock, from_text, parse_clock, to_text
from .errors import (
    IllegalTransition,
    InstanceLocked,
    NotClaimed,
    NotShopbotDatabase,
    RestoreRefused,
    SchemaTooNew,
    SchemaTooOld,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    UnknownTarget,
)
from .lock import InstanceLock
from .outbox import ReportDraft
from .producer_state import ProducerStore
from .records import (
    Admission,
    AdmitResult,
    Claim,
    Delivery,
    DeliveryState,
    FinishOutcome,
    Occurrence,
    RecoverySummary,
    Stats,
    Violation,
    WorkItem,
    WorkKind,
    WorkState,
)
from .shop import ItemSpec, Policy
from .transaction import Transaction

__all__ = [
    # the store and its transaction
    "Store", "Transaction", "ProducerStore", "restore", "InstanceLock",
    # the named fault points (kill points) the drills arm
    "faults",
    # time
    "Clock", "ManualClock", "SystemClock", "from_text", "parse_clock", "to_text",
    # errors
    "IllegalTransition", "InstanceLocked", "NotClaimed", "NotShopbotDatabase", "RestoreRefused",
    "SchemaTooNew", "SchemaTooOld",
    "StoreBusy", "StoreError", "StoreUnavailable", "UnknownTarget",
    # records
    "Admission", "AdmitResult", "Claim", "Delivery", "DeliveryState", "FinishOutcome", "ItemSpec", "Occurrence",
    "Policy", "RecoverySummary", "ReportDraft", "Stats", "Violation", "WorkItem", "WorkKind", "WorkState",
]
