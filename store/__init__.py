"""Durable state of shopbot. `Store` (store/api.py) is the only interface the other packages use."""
from .api import Store
from .backup import restore
from .transaction import Transaction
from .clock import Clock, ManualClock, SystemClock, from_text, parse_clock, to_text
from .errors import (IllegalTransition, InstanceLocked, NotClaimed, SchemaTooNew, SchemaTooOld, StoreBusy, StoreError,
                     StoreUnavailable, UnknownTarget)
from .lock import InstanceLock
from .outbox import ReportDraft
from .shop import ItemSpec
from .records import (Admission, AdmitResult, Claim, Delivery, DeliveryState, FinishOutcome, Occurrence,
                      RecoverySummary, Stats, Violation, WorkItem, WorkKind, WorkState)

__all__ = [name for name in dir() if not name.startswith("_")]
