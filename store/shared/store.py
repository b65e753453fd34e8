"""The base of both stores: every port of store/ports.py over the shared SQL of this package, with the transaction
discipline (each method one short transaction, a synchronous function run whole in the driver's thread; none holds a
network call or a model).

The two dialect stores are siblings over this base, neither a subclass of the other: store/sqlite/store.py
(`SqliteStore`) and store/postgres/store.py (`PostgresStore`). Each sets the hooks below: the statements whose text
or guards differ by dialect (PostgreSQL locks what SQLite's single writer serialises), its leader leases, its driver
error, and the few things only one database has (a file, `PRAGMA data_version`, pages; a pool, LISTEN, leases).
"""
from __future__ import annotations

import abc
import asyncio
import dataclasses
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import date, datetime, timedelta
from typing import Any, TypeVar, cast

from .. import redaction
from ..clock import Clock, to_text
from ..errors import StoreError
from ..offers import ClaimOffer, OfferState
from ..order_records import (
    ActionView,
    CountRequest,
    Draft,
    JsonObject,
    Order,
    Proposal,
    ReceivedOrder,
    RecordedProposal,
)
from ..records import (
    Action,
    ActionMove,
    Admission,
    AdmitResult,
    Claim,
    Claimed,
    Delivery,
    DueReceipts,
    Fence,
    FinishOutcome,
    ItemSpec,
    LeaderView,
    MetricsSnapshot,
    Missed,
    Occurrence,
    Policy,
    ProcessView,
    Receipt,
    RecoverySummary,
    Renewal,
    ReportDraft,
    ReportView,
    SaleLine,
    SalesImport,
    Stats,
    Status,
    Taken,
    TurnSetup,
    Violation,
    WorkKind,
)
from ..shop_records import (
    ActionState,
    EndedRun,
    ItemSales,
    OnOrder,
    OpsView,
    SalesDay,
    SeriesPoint,
    ShopItem,
    StateTallies,
    StockEvent,
    StockLevel,
    TillCount,
    WorkWithReport,
)
from ..signals import Signals
from . import (
    actions,
    inbox,
    insights,
    invariants,
    journal,
    orders,
    outbox,
    producer_state,
    proposals,
    receipts,
    recovery,
    retention,
    sales,
    shop,
    stats,
)
from . import metrics as metric_reads
from .connection import Connection, Database
from .dialect import DialectSQL
from .status import read_reports, read_status
from .tallies import FLUSH_S, Tallies
from .transaction import Transaction

DEFAULT_CAPACITY = 100
FRESH_MAX = 1000          # receipts handed over and not taken (no receipt relay runs here): then dropped, as a hint
DEFAULT_DEBOUNCE_MS = 300     # docs/running.md: long enough for a double tap or a burst of short messages
DEFAULT_ATTEMPT_CAP = 3
STATUS_SETTLE_S = 1.0         # how long `status` reads again while commits carrying refusal counts end beside it
DEFAULT_LEASE_S = 30.0        # SHOPBOT_LEASE_S: a claim's lease where claims are leases (PostgreSQL, C15)

log = logging.getLogger("shopbot.store")

# Every relay move of an action (store/shared/actions.py); tests/unit checks that every ActionMove has one.
_ACTION_MOVES: dict[ActionMove, Callable[..., None]] = {
    ActionMove.MARK_SENDING: actions.mark_sending, ActionMove.MARK_DELIVERED: actions.mark_delivered,
    ActionMove.MARK_NOT_SENT: actions.mark_not_sent, ActionMove.MARK_FAILED: actions.mark_failed,
    ActionMove.MARK_UNKNOWN: actions.mark_unknown, ActionMove.QUARANTINE: actions.quarantine}


T = TypeVar("T")
W = TypeVar("W", bound=Callable[..., Awaitable[Any]])


def _ending_write(write: W) -> W:
    """A run's ending write (finish, finish_counts, fail, release): `ending(claim)` is True from its call until its
    answer (committed or refused) is back."""
    @functools.wraps(write)
    async def ending(self: BaseStore, claim: Claim, *args: Any, **kwargs: Any) -> Any:
        self._ending.add(claim.run_id)
        try:
            return await write(self, claim, *args, **kwargs)
        finally:
            self._ending.discard(claim.run_id)
    return cast(W, ending)


class BaseStore(abc.ABC):
    """`store.ports.Store` over the shared SQL; a dialect store (SqliteStore, PostgresStore) completes it."""

    lease_s: float | None = None    # claims are leases only where a dialect says so (PostgreSQL, C15)

    def __init__(self, db: Database, clock: Clock, *, capacity: int, debounce_ms: int, attempt_cap: int) -> None:
        self.db = db
        self.clock = clock
        self.capacity = capacity
        self.debounce = timedelta(milliseconds=debounce_ms)
        self.attempt_cap = attempt_cap
        self.signals = Signals()
        self._seen_version: int | None = None
        self._last_probe: tuple[float, StoreError | None] | None = None   # /healthz's write probe (`writable`)
        self.tallies = Tallies()
        self.held_sets = receipts.HeldSets()
        self._fresh: list[Receipt] | None = []   # receipts admitted here, for the relay (None: some were dropped)
        db.hooks = _RideAlong(self.tallies, self.held_sets)
        self._flush: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._closed = False
        self.tallies.held_again = self._arm_flush_soon
        self._ending: set[str] = set()     # runs whose ending write is in flight here (`ending`)
        self._offers: list[ClaimOffer] = []    # idle workers' claims, for the next admission's commit (`offer_claim`)
        self._rider_failed = False         # a rider's failure is logged once at warning, later ones at debug

    # The statements whose guards may differ by dialect: here the shared SQL, which is whole on SQLite (one writer,
    # BEGIN IMMEDIATE); PostgresStore sets its guarded versions (store/postgres/guards.py). Everything else is shared.
    _admit = staticmethod(inbox.admit)
    _admit_answered = staticmethod(inbox.admit_answered)
    _claim = staticmethod(inbox.claim)
    _finish = staticmethod(inbox.finish)
    _release = staticmethod(inbox.release)
    _fail = staticmethod(inbox.fail)
    _guard_run = staticmethod(journal._run_open)   # what a run's journal and tool writes check first
    _forget = staticmethod(inbox.forget)
    _approve = staticmethod(actions.approve)
    _resolve = staticmethod(outbox.resolve)
    _producer_state = producer_state.ProducerState
    _check = staticmethod(invariants.check_connection)
    _seed = staticmethod(shop.seed)
    _sync = staticmethod(shop.sync)
    _import_sales = staticmethod(sales.import_lines)
    # Each dialect's own: its words for the SQL that differs (store/shared/dialect.py), its leader-lease module (C16)
    # and its driver's root error.
    _sql: DialectSQL
    _leases: Any
    _db_error: type[Exception]

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def close(self) -> None:
        self._closed = True              # no new flush is armed; the last counts are written below
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        flushing = self._flushing
        if flushing is not None:
            await asyncio.gather(flushing, return_exceptions=True)
        if self._flush is not None:      # re-armed by the flush that just ended
            self._flush.cancel()
            self._flush = None
        try:
            await self.flush_counts()
        except StoreError:
            pass         # a database that cannot be written loses these counts, as a crash would
        await self.db.close()

    def now(self) -> str:
        """The clock's time in the store's text form (for the SQL of this package)."""
        return to_text(self.now_dt())

    def now_dt(self) -> datetime:
        """The time every stamp and comparison of this store uses (the clock's; PostgreSQL's is the server's)."""
        return self.clock.now()

    @abc.abstractmethod
    async def schema_version(self) -> int:
        """The schema version the database records (its migrations)."""

    # ---- what each dialect answers in its own words -----------------------------------------------------------
    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the data is, for people (a file path; a URL with its password masked)."""

    @abc.abstractmethod
    async def data_version(self) -> int:
        """A number that moves when another connection commits (a hint for `poll_changes`)."""

    @abc.abstractmethod
    async def listen(self) -> None:
        """Start listening for other processes' commits, where the database can tell (a hint only)."""

    @abc.abstractmethod
    async def renew(self, claim: Claim) -> Renewal:
        """Extend a claim's lease where claims are leases; HELD while the run may go on."""

    def ending(self, claim: Claim) -> bool:
        return claim.run_id in self._ending

    @abc.abstractmethod
    async def sweep_expired(self, *, sending: bool = True) -> RecoverySummary:
        """Recover the runs whose leases expired (none where claims are not leases)."""

    @abc.abstractmethod
    async def metrics(self, window_seconds: float = 3600.0, tallies: StateTallies | None = None) -> MetricsSnapshot:
        """Operational figures for /metrics in one read snapshot (sizes in the database's own terms)."""

    @abc.abstractmethod
    async def writable(self, probe_interval_s: float = 5.0) -> str | None:
        """None while writes commit, else a fixed sentence why not."""

    @abc.abstractmethod
    async def vacuum(self) -> tuple[int, int]:
        """Give freed space back; the database's size before and after."""

    @abc.abstractmethod
    async def backup(self, target: str) -> None:
        """A consistent copy, or the sentence naming the database's own tool."""

    async def poll_changes(self) -> bool:
        """`PRAGMA data_version` moves when another connection committed: then every signal is notified."""
        version = await self.data_version()
        changed, self._seen_version = version != self._seen_version, version
        if changed:
            self.signals.work.notify()
            self.signals.deliveries.notify()
            self.signals.actions.notify()
            self.signals.receipts.notify()
        return changed

    # ---- admission (C1, C2) -------------------------------------------------------------------------------
    async def admit(self, occurrence: Occurrence) -> AdmitResult:
        return (await self.admit_many([occurrence]))[0]

    async def admit_many(self, occurrences: Sequence[Occurrence]) -> list[AdmitResult]:
        """A whole batch in one commit (a getUpdates batch); each occurrence gets its own outcome."""
        now_dt = self.now_dt()
        now = to_text(now_dt)

        def batch(conn: Connection) -> tuple[list[AdmitResult], bool]:
            open_count: list[int] = []       # counted once for the batch, then kept up to date
            results = [self._admit(conn, o, now, self.capacity, open_count) for o in occurrences]
            return results, any(r.outcome is Admission.ACCEPTED and o.kind is WorkKind.AGENT
                                for o, r in zip(occurrences, results, strict=True))
        results, served = await self._admission(batch, now_dt)
        if any(r.outcome is Admission.ACCEPTED for r in results) and not served:
            self.signals.work.notify()
        return results

    async def admit_answered(self, occurrence: Occurrence, answer: Callable[[Any, int], ReportDraft]) -> AdmitResult:
        """A control or notice item with its report, in one transaction. `answer(tx, work_id)` builds the report
        inside the transaction (it may read and decide through `tx`, a `Transaction`)."""
        now = self.now()
        result = await self.db.write(lambda conn: Transaction(conn, now, self).admit_answered(occurrence, answer))
        if result.report_id:
            self.signals.deliveries.notify()
        return result

    async def notice(self, kind: str, subject: str, text: str, destination: str) -> bool:
        """A system notice `notice:<kind>:<subject>` with its report; the identity makes it once only. The text is
        outside error text as far as the store knows: redacted before it is stored (store/redaction.py)."""
        text = redaction.error_detail(text)
        result = await self.admit_answered(
            Occurrence(f"notice:{kind}:{subject}", f"notice:{kind}", text, WorkKind.NOTICE, destination),
            lambda tx, work_id: ReportDraft(text, destination=destination))
        return result.outcome is Admission.ACCEPTED

    async def count(self, kind: str, by: int = 1) -> int:
        now = self.now()
        return await self.db.write(lambda conn: inbox.count(conn, now, kind, by))

    def tally(self, kind: str, by: int = 1) -> None:
        """C1: count a refusal (bad till token, stranger, malformed update) in memory, no commit. The counts ride
        along with the next commit that writes anyway, or are flushed at most once a second (store/shared/tallies.py).
        Safe to call from inside a transaction's function (the connection thread)."""
        self.tallies.add(self.now(), kind, by)
        self._arm_flush_soon()

    def _arm_flush_soon(self) -> None:
        """Arm the flush from any thread: at once on the store's loop, else through it (a transaction's thread). Also
        `Tallies.held_again`: a carrier that rolled back holds its counts again, and a flush that ran meanwhile found
        none held and armed no other."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._arm_flush()
            return
        try:
            self._loop.call_soon_threadsafe(self._arm_flush)
        except RuntimeError:            # the loop is closed: the process is ending, and a crash loses a second anyway
            pass

    def _arm_flush(self) -> None:
        if self._flush is None and self._flushing is None and not self._closed:
            self._flush = self._loop.call_later(FLUSH_S, self._start_flush)

    def _start_flush(self) -> None:
        self._flush = None
        self._flushing = self._loop.create_task(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        try:
            await self.flush_counts()
        except StoreError:
            pass                   # the database is busy or full: the counts wait for the next try
        finally:
            self._flushing = None
        if self.tallies or self.held_sets:   # held while this flush ran, or not written: flushed a second from now
            self._arm_flush()

    async def flush_counts(self) -> int:
        """Write the counts and receipt sets held in memory now (one commit, only when there are any). Returns the
        kinds of count written."""
        if not self.tallies and not self.held_sets:
            return 0
        def flush(conn: Connection) -> int:
            kinds = len(self.tallies.pending())
            self.db.hooks.before_commit(conn)   # Database sees the change and completes the hooks at commit
            return kinds
        return await self.db.write(flush)

    async def flush_held(self) -> None:
        await self.flush_counts()

    async def atomic(self, fn: Callable[[Transaction], Any], *, fence: Fence | None = None) -> Any:
        """Run `fn(tx)` in one write transaction: a producer admits and moves its cursor in one commit (C2). With
        `fence` (a singleton's leader lease) the transaction first checks the lease is still held (C16)."""
        now_dt = self.now_dt()
        now = to_text(now_dt)
        ran: list[Transaction] = []          # the run that committed is the last (a lost idle connection runs it again)

        def body(conn: Connection) -> tuple[Any, bool]:
            if fence is not None:
                self._leases.fence(conn, fence, now_dt)
            ran.append(Transaction(conn, now, self))
            return fn(ran[-1]), ran[-1].admitted_work
        result, served = await self._admission(body, now_dt)
        if not served:
            self.signals.work.notify()
        if ran[-1].wrote_deliveries:         # else the relay's look would find nothing new (Transaction's note)
            self.signals.deliveries.notify()
        if ran[-1].wrote_receipts:
            self._hand_over(ran[-1].added_receipts)
            self.signals.receipts.notify()
        if ran[-1].approved_action:
            self.signals.actions.notify()
        return result

    # ---- an idle worker's claim, in the next admission's commit (store/offers.py) ----------------------------------
    def offer_claim(self, worker_id: str, *, history_limit: int | None = None) -> ClaimOffer:
        offer = ClaimOffer(worker_id, history_limit)
        self._offers = [o for o in self._offers if o.state in (OfferState.OPEN, OfferState.HELD)]
        self._offers.append(offer)
        return offer

    def _hold_offer(self) -> ClaimOffer | None:
        """The open offer the next admission's transaction carries, now held by it; None when there is none, or when
        a debounce window holds what is admitted now (nothing it admits is due: the ordinary wake-up claims later)."""
        if self.debounce > timedelta(0) or self._closed:
            return None
        return next((o for o in self._offers if o.hold()), None)

    async def _admission(self, body: Callable[[Connection], tuple[T, bool]], now_dt: datetime) -> tuple[T, bool]:
        """An admission's write transaction: `body(conn)` answers (its result, whether it admitted agent work). When
        it did and an offer is open, the offer's claim rides at the end of the same transaction (`_Rider`); the
        offer gets it only once the COMMIT returned. The write is not cancelled with its caller (it would commit in
        the driver's thread all the same): its outcome always settles the offer. Answers (the result, served): served
        when the offer took a claim and nothing else was claimable then, so the worker needs no wake-up to look
        again (a worker with free slots would look once and find nothing: a database call beside the turn)."""
        offer = self._hold_offer()
        if offer is None:
            return (await self.db.write(body))[0], False
        rider = _Rider(self, offer, now_dt)

        def carrying(conn: Connection) -> T:
            result, admitted = body(conn)
            rider.ride(conn, admitted)
            return result
        write = asyncio.ensure_future(self.db.write(carrying))
        write.add_done_callback(rider.settle)
        result = await asyncio.shield(write)
        return result, rider.claim is not None and not rider.more

    # ---- the worker (C5, C6, C9) ---------------------------------------------------------------------------
    async def claim(self, worker_id: str, skip_sessions: Sequence[str] = (), *,
                    history_limit: int | None = None) -> Claim | None:
        now_dt = self.now_dt()
        cutoff = to_text(now_dt - self.debounce)
        run_id = uuid.uuid4().hex
        return await self.db.write(lambda conn: self._set_up(
            conn, self._claim(conn, worker_id, run_id, to_text(now_dt), cutoff, skip_sessions), history_limit))

    @staticmethod
    def _set_up(conn: Connection, claim: Claim | None, history_limit: int | None) -> Claim | None:
        """The turn's set-up read in its claim's transaction (one round trip less before the model call)."""
        if claim is None or history_limit is None:
            return claim
        return dataclasses.replace(claim, setup=TurnSetup(tuple(inbox.exchanges(conn, claim.session, history_limit)),
                                                          tuple(shop.list_items(conn))))

    async def claim_or_wake(self, worker_id: str, skip_sessions: Sequence[str] = (), *,
                            history_limit: int | None = None) -> Claimed:
        """`claim` whose empty answer carries the next wake-up time, read in the claim's transaction."""
        now_dt = self.now_dt()
        cutoff = to_text(now_dt - self.debounce)
        run_id = uuid.uuid4().hex

        def body(conn: Connection) -> Claimed:
            claim = self._set_up(conn, self._claim(conn, worker_id, run_id, to_text(now_dt), cutoff, skip_sessions),
                                 history_limit)
            return Claimed(claim, None if claim is not None else self._next_wake(conn, now_dt))
        claimed = await self.db.write(body)
        return dataclasses.replace(claimed, next_wake=self._on_process_clock(claimed.next_wake))

    def _next_wake(self, conn: Connection, now: datetime) -> datetime | None:
        """When the earliest waiting session becomes due (debounce, not-before, judged as `inbox.DUE` judges them
        under a backward clock step), on the store's clock; None when none is waiting."""
        def due(admitted: datetime, not_before: datetime | None, released: datetime | None) -> datetime:
            debounced = now if admitted > now else admitted + self.debounce
            held = not_before if not_before and not (released and released > now) else None
            return max(debounced, held) if held else debounced
        times = [due(*row) for row in inbox.waiting_sessions(conn)]
        return min(times) if times else None

    def _on_process_clock(self, at: datetime | None) -> datetime | None:
        """A wake-up time read on the store's clock, handed to callers that wait on `clock` (PostgreSQL: moved back by
        the offset between the two). Every wake-up time a store answer carries passes through here."""
        return at

    async def next_claim_time(self) -> datetime | None:
        """When the earliest waiting session becomes due; None when none is waiting."""
        now = self.clock.now()
        return self._on_process_clock(await self.db.read(self._next_wake, now))

    @_ending_write
    async def finish(self, claim: Claim, draft: ReportDraft | Callable[[], ReportDraft], *,
                     user_text: str | None = None, model_said: tuple[str, str] | None = None,
                     stop_reason: str | None = None, usage: tuple[int, int, int] = (0, 0, 0),
                     apply: Callable[[Transaction], None] | None = None,
                     after: Callable[[Transaction, str], None] | None = None,
                     claim_next: str | None = None, history_limit: int | None = None) -> FinishOutcome:
        """C6. `draft` may be a function called after `apply`, inside the transaction (a report made from what `apply`
        read or did). `after(tx, report_id)` runs at the end of the same transaction (the run's proposals are visible by
        then: the worker announces them with their buttons). With `claim_next` (a worker id) the next due turn is
        claimed in the same commit: one commit per turn instead of two (C5 holds: the claim commits before its
        model runs)."""
        now_dt = self.now_dt()
        now = to_text(now_dt)
        cutoff = to_text(now_dt - self.debounce)
        next_run_id = uuid.uuid4().hex if claim_next is not None else None   # known, to read a lost commit back

        def body(conn: Connection) -> FinishOutcome:
            outcome = self._finish(conn, claim, draft, now, user_text=user_text, model_said=model_said,
                                   stop_reason=stop_reason, usage=usage,
                                   apply=(lambda c: apply(Transaction(c, now, self))) if apply else None)
            if after is not None and not outcome.discarded:
                after(Transaction(conn, now, self), outcome.report_id)
            if claim_next is not None and next_run_id is not None:
                outcome = dataclasses.replace(
                    outcome, next_claim=self._set_up(conn, self._claim(conn, claim_next, next_run_id, now, cutoff),
                                                     history_limit))
                outcome = self._looked(conn, outcome, now_dt)
            return outcome
        outcome = await self._commit_finish(body, claim, next_run_id)
        if outcome.looked:
            outcome = dataclasses.replace(outcome, next_wake=self._on_process_clock(outcome.next_wake))
        self.signals.deliveries.notify()
        return outcome

    def _looked(self, conn: Connection, outcome: FinishOutcome, now: datetime) -> FinishOutcome:
        """A finish that looked for the next turn and found none carries the next wake-up (the worker's idle look)."""
        if outcome.next_claim is not None:
            return outcome
        return dataclasses.replace(outcome, looked=True, next_wake=self._next_wake(conn, now))

    async def _commit_finish(self, body: Callable[[Any], FinishOutcome], claim: Claim,
                             next_run_id: str | None) -> FinishOutcome:
        """The finish's commit. SQLite's file either took it or not; PostgreSQL reads a lost commit back (K16)."""
        return await self.db.write(body)

    @_ending_write
    async def finish_counts(self, claim: Claim, requests: Sequence[CountRequest],
                            render: Callable[[list[tuple[str, str, int, int]]], str]) -> FinishOutcome:
        """A till turn: every request's counts applied to the stock (count events with till and request id) and the
        report rendered from the applied counts, in the finish transaction (C6)."""
        now = self.now()
        work_ids = {item.source: item.work_id for item in claim.items}
        applied: list[tuple[str, str, int, int]] = []

        def apply(conn: Connection) -> None:
            applied.clear()              # a transaction run again (a commit that did not happen) starts afresh
            for request in requests:
                source = request.source
                for item, old, new in shop.apply_counts(conn, request.counts, source, work_ids[source], now):
                    applied.append((source, item, old, new))
        outcome = await self._commit_finish(lambda conn: self._finish(
            conn, claim, lambda: ReportDraft(render(applied), destination=claim.destination), now,
            stop_reason="counts applied", apply=apply), claim, None)
        self.signals.deliveries.notify()
        return outcome

    @_ending_write
    async def fail(self, claim: Claim, draft: ReportDraft, *, stop_reason: str | None = None,
                   usage: tuple[int, int, int] = (0, 0, 0)) -> str:
        now = self.now()
        report_id = await self.db.write(
            lambda conn: self._fail(conn, claim, draft, now, stop_reason=stop_reason, usage=usage))
        self.signals.deliveries.notify()
        return report_id

    @_ending_write
    async def release(self, claim: Claim, *, delay_seconds: float, reason: str, refund: bool = False,
                      usage: tuple[int, int, int] = (0, 0, 0)) -> str | None:
        now_dt = self.now_dt()
        not_before = to_text(now_dt + timedelta(seconds=delay_seconds)) if delay_seconds > 0 else None
        report_id = await self.db.write(lambda conn: self._release(
            conn, claim, to_text(now_dt), not_before, self.attempt_cap, reason=reason, refund=refund, usage=usage))
        (self.signals.deliveries if report_id else self.signals.work).notify()
        return report_id

    async def op_started(self, run_id: str, call_id: str, tool: str, arguments: JsonObject, effect: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: journal.op_started(conn, run_id, call_id, tool, arguments, effect, now,
                                                            guard=self._guard_run))

    async def run_steps(self, run_id: str) -> list[str]:
        return await self.db.read(journal.steps, run_id)

    async def op_finished(self, run_id: str, call_id: str, status: str, result: JsonObject, *,
                          acted_outside: bool = False) -> None:
        now = self.now()
        await self.db.write(lambda conn: journal.op_finished(conn, run_id, call_id, status, result, now,
                                                             acted_outside=acted_outside, guard=self._guard_run))

    async def history(self, session: str, limit: int = 20) -> list[tuple[str, str]]:
        return await self.db.read(inbox.history, session, limit)

    async def exchanges(self, session: str, limit: int = 20) -> list[tuple[str, str, str | None]]:
        return await self.db.read(inbox.exchanges, session, limit)

    async def forget(self, session: str, by: str) -> tuple[int, int]:
        now = self.now()
        result = await self.db.write(lambda conn: self._forget(conn, session, by, now))
        self.signals.deliveries.notify()
        return result

    async def recover(self) -> RecoverySummary:
        now_dt = self.now_dt()
        now = to_text(now_dt)

        def body(conn: Connection) -> RecoverySummary:
            self._leases.release_all(conn, now_dt)    # under the instance lock: no other process leads (C16)
            return recovery.recover(conn, now, self.attempt_cap)
        summary = await self.db.write(body)
        self.signals.work.notify()
        self.signals.deliveries.notify()
        return summary

    # ---- the relay (C7, C8) --------------------------------------------------------------------------------
    async def due_deliveries(self, limit: int = 20, skip_chats: Sequence[int] = ()) -> list[Delivery]:
        now = self.now()
        return await self.db.read(outbox.due_deliveries, self._sql, now, limit, skip_chats)

    async def next_delivery_time(self) -> datetime | None:
        return self._on_process_clock(await self.db.read(outbox.next_wake))

    async def mark_sending(self, delivery_id: int, confirm: tuple[int, str] | None = None, *,
                           fence: Fence | None = None) -> None:
        """`sending` committed before the HTTP call. `confirm` (delivery id, receipt) records the previous part's
        receipt in the same commit: one commit per message instead of two; each delivery is still marked sending only
        just before its own call. With `fence` (the relay's lease) the lease is checked in the same transaction and
        recorded as the delivery's sender (C16)."""
        now_dt = self.now_dt()
        now = to_text(now_dt)

        def body(conn: Connection) -> None:
            self._before_sending(conn, now_dt, (confirm,) if confirm is not None else (), fence)
            outbox.mark_sending(conn, delivery_id, now, fence.sender if fence else None)

        await self._commit_sending(body, delivery_id)

    def _before_sending(self, conn: Connection, now_dt: datetime, confirms: Sequence[tuple[int, str]],
                        fence: Fence | None) -> None:
        """In a `sending` transaction: the relay's lease checked, then earlier parts' receipts recorded."""
        if fence is not None:
            self._leases.fence(conn, fence, now_dt)
        for delivery_id, receipt in confirms:
            outbox.mark_confirmed(conn, delivery_id, receipt, to_text(now_dt))

    async def _commit_sending(self, body: Callable[[Any], None], delivery_id: int) -> None:
        """The `sending` mark's commit; PostgreSQL reads a lost one back from the delivery's state (K16)."""
        await self.db.write(body)

    async def take_due(self, skip_chats: Sequence[int] = (), *, confirms: Sequence[tuple[int, str]] = (),
                       fence: Fence | None = None, refuse: Callable[[int], bool] | None = None,
                       limit: int = 1) -> Taken:
        """`mark_sending` with the due read in its own transaction: the relay's wake-up costs no read before it."""
        now_dt = self.now_dt()
        now = to_text(now_dt)
        sender = fence.sender if fence else None
        confirms = tuple(confirms)

        def body(conn: Connection) -> Taken:
            self._before_sending(conn, now_dt, confirms, fence)
            return outbox.take_due(conn, self._sql, now, skip_chats, refuse, sender, limit)
        return await self._commit_take(body, now, confirms, sender)

    async def _commit_take(self, body: Callable[[Any], Taken], now: str, confirms: Sequence[tuple[int, str]],
                           sender: str | None) -> Taken:
        """`take_due`'s commit; PostgreSQL reads a lost one back (K16)."""
        return await self.db.write(body)

    async def mark_confirmed(self, delivery_id: int, receipt: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: outbox.mark_confirmed(conn, delivery_id, receipt, now))

    async def mark_not_sent(self, delivery_id: int, reason: str, retry_after: float | None = None) -> None:
        now_dt = self.now_dt()
        not_before = to_text(now_dt + timedelta(seconds=retry_after)) if retry_after else None
        await self.db.write(lambda conn: outbox.mark_not_sent(conn, delivery_id, not_before, reason, to_text(now_dt)))

    async def mark_failed(self, delivery_id: int, reason: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: outbox.mark_failed(conn, delivery_id, reason, now))

    async def mark_unknown(self, delivery_id: int, reason: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: outbox.mark_unknown(conn, delivery_id, reason, now))

    async def mark_denied(self, delivery_id: int, reason: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: outbox.mark_denied(conn, delivery_id, reason, now))

    async def resolve(self, report_id: str, decision: str, by: str) -> list[int]:
        now = self.now()
        moved = await self.db.write(lambda conn: Transaction(conn, now, self).resolve(report_id, decision, by))
        self.signals.deliveries.notify()
        return moved

    # ---- receipts (C19) -------------------------------------------------------------------------------------
    async def due_receipts(self, limit: int = 20) -> list[Receipt]:
        now = self.now()
        return await self.db.read(lambda conn: receipts.due(conn, now, limit, self.held_sets.skip()))

    async def due_receipts_or_wake(self, limit: int = 20) -> DueReceipts:
        now = self.now()

        def look(conn: Connection) -> DueReceipts:
            due = receipts.due(conn, now, limit, self.held_sets.skip())
            return DueReceipts(tuple(due), None if len(due) == limit else receipts.next_wake_after(conn, now))
        found = await self.db.read(look)
        return dataclasses.replace(found, next_wake=self._on_process_clock(found.next_wake))

    def _hand_over(self, added: Sequence[Receipt]) -> None:
        if self._fresh is not None:
            self._fresh.extend(added)
            if len(self._fresh) > FRESH_MAX:    # no relay takes them here: it reads when it starts
                self._fresh = None

    def fresh_receipts(self) -> list[Receipt] | None:
        taken, self._fresh = self._fresh, []
        if taken is None:
            return None
        held = self.held_sets.taken()
        return [r for r in taken if r.receipt_id not in held]

    def hold_set(self, receipt_id: int) -> None:
        self.held_sets.hold(receipt_id, self.now())
        self._arm_flush()

    async def next_receipt_time(self) -> datetime | None:
        return await self.db.read(receipts.next_wake)

    async def receipt_set(self, receipt_id: int, *, then: int = 0) -> list[Receipt]:
        now = self.now()

        def body(conn: Connection) -> list[Receipt]:
            receipts.mark_set(conn, receipt_id, now)
            return receipts.due(conn, now, then, self.held_sets.skip()) if then else []
        return await self.db.write(body)

    async def receipt_retry(self, receipt_id: int, reason: str, retry_after: float) -> None:
        now_dt = self.now_dt()
        not_before = to_text(now_dt + timedelta(seconds=retry_after))
        await self.db.write(lambda conn: receipts.mark_retry(conn, receipt_id, not_before, reason, to_text(now_dt)))

    async def receipt_failed(self, receipt_id: int, reason: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: receipts.mark_failed(conn, receipt_id, reason, now))

    async def receipts(self, chat_id: int | None = None, limit: int = 100) -> list[Receipt]:
        return await self.db.read(receipts.listed, chat_id, limit)

    # ---- leader leases (C16) -----------------------------------------------------------------------------------
    def _lease_span(self, lease_s: float) -> float:
        """A lease of `lease_s` real seconds in the store clock's seconds (an accelerated test clock runs faster)."""
        return lease_s * float(getattr(self.clock, "factor", 1.0))

    async def acquire_leader(self, name: str, holder: str, lease_s: float) -> int | None:
        now_dt, span = self.now_dt(), self._lease_span(lease_s)
        return await self.db.write(lambda conn: self._leases.acquire(conn, name, holder, span, now_dt))

    async def renew_leader(self, name: str, holder: str, generation: int, lease_s: float) -> bool:
        now_dt, span = self.now_dt(), self._lease_span(lease_s)
        return bool(await self.db.write(lambda conn: self._leases.renew(conn, name, holder, generation, span, now_dt)))

    async def resign_leader(self, name: str, holder: str, generation: int) -> bool:
        now_dt = self.now_dt()
        return bool(await self.db.write(lambda conn: self._leases.resign(conn, name, holder, generation, now_dt)))

    async def fenced(self, fence: Fence) -> None:
        now_dt = self.now_dt()
        await self.db.write(lambda conn: self._leases.fence(conn, fence, now_dt))

    async def heartbeat(self, holder: str, pid: int, host: str, forget_after_s: float) -> None:
        now_dt, span = self.now_dt(), self._lease_span(forget_after_s)
        await self.db.write(lambda conn: self._leases.heartbeat(conn, holder, pid, host, now_dt, span))

    async def depart(self, holder: str) -> None:
        await self.db.write(lambda conn: self._leases.depart(conn, holder))

    async def leaders(self) -> list[LeaderView]:
        now_dt = self.now_dt()
        return await self.db.read(lambda conn: self._leases.leaders(conn, now_dt))

    async def processes(self) -> list[ProcessView]:
        now_dt = self.now_dt()
        return await self.db.read(lambda conn: self._leases.processes(conn, now_dt))

    async def sweep_sending(self) -> tuple[list[int], list[int]]:
        now = self.now()
        found = await self.db.write(lambda conn: self._leases.sweep_sending(conn, now))
        if found[0]:
            self.signals.deliveries.notify()
        return found

    # ---- the shop ------------------------------------------------------------------------------------------
    async def shop_items(self) -> list[ShopItem]:
        return await self.db.read(shop.list_items)

    async def shop_item(self, item: str) -> ShopItem | None:
        return await self.db.read(shop.get_item, item)

    async def sales(self, since: datetime, until: datetime, item: str | None = None) -> list[ItemSales]:
        """Units sold and restocked per item in (since, until], from the stock records (store/shared/insights.py)."""
        return await self.db.read(insights.sales, to_text(since), to_text(until), item)

    async def on_order(self, item: str | None = None) -> list[OnOrder]:
        """Approved orders not failed or voided (store/shared/insights.py)."""
        return await self.db.read(insights.on_order, item)

    async def recent_counts(self, item: str | None = None, limit: int = 10) -> list[TillCount]:
        """The latest till counts, newest first (store/shared/insights.py)."""
        return await self.db.read(insights.recent_counts, item, limit)

    async def open_proposals(self) -> list[Proposal]:
        """Proposals awaiting the owner's decision, expired or not (store/shared/proposals.py)."""
        return await self.db.read(proposals.awaiting)

    async def seed_shop(self, specs: Sequence[ItemSpec], source: str) -> bool:
        now = self.now()
        return await self.db.write(lambda conn: self._seed(conn, specs, source, now))

    async def sync_shop(self, specs: Sequence[ItemSpec], source: str, reset_stock: bool = False) -> list[str]:
        now = self.now()
        return await self.db.write(lambda conn: self._sync(conn, specs, source, now, reset_stock=reset_stock))

    async def record_draft(self, run_id: str, item: str, quantity: int) -> Draft:
        now = self.now()

        def body(conn: Connection) -> Draft:
            self._guard_run(conn, run_id)
            return shop.record_draft(conn, run_id, item, quantity, now)
        return await self.db.write(body)

    async def record_proposal(self, run_id: str, call_id: str, supplier: str, item: str, quantity: int,
                              policy: Policy | None = None) -> RecordedProposal:
        """C11: the proposal (validated by policy) and its operation's completion, its result `to_json()`, in one
        transaction."""
        now = self.now()

        def body(conn: Connection) -> RecordedProposal:
            self._guard_run(conn, run_id)
            recorded = shop.record_proposal(conn, run_id, supplier, item, quantity, now, policy)
            journal.op_finished(conn, run_id, call_id, "done", recorded.to_json(), now, guard=self._guard_run)
            return recorded
        return await self.db.write(body)

    # ---- on order (store/shared/orders.py) -----------------------------------------------------------------------
    async def open_orders(self, item: str | None = None) -> list[Order]:
        """Orders on order (all, or one item's), oldest first."""
        return await self.db.read(orders.open_orders, item)

    async def order(self, proposal_id: int) -> Order | None:
        """One order in any state (on_order, received, not_arrived, cancelled), or None."""
        return await self.db.read(orders.get, proposal_id)

    async def receive_order(self, proposal_id: int, by: str, counted: int | None = None) -> ReceivedOrder:
        """The owner's Received in one transaction: the ordered quantity is added to the stock (or, with `counted`,
        the stock is set to the count) as a stock event of kind 'received', and the order is settled. Raises
        UnknownTarget / IllegalTransition / ValueError (nothing changes)."""
        now = self.now()
        return await self.db.write(lambda conn: orders.receive(conn, proposal_id, by, now, counted))

    async def order_not_arrived(self, proposal_id: int, by: str) -> Order:
        """The owner's Not arrived: the order stops counting as on order; the stock is unchanged."""
        now = self.now()
        return await self.db.write(lambda conn: orders.not_arrived(conn, proposal_id, by, now))

    async def stock_events(self, item: str, limit: int = 100) -> list[StockEvent]:
        """An item's latest stock events, oldest first: event_id, kind ('seed', 'count', 'sync', 'restock',
        'received'), old_on_hand, new_on_hand, source, created_at. Sales are the decreases between consecutive
        events; 'restock' and 'received' events are deliveries, never negative sales."""
        return await self.db.read(shop.stock_events, item, limit)

    # ---- the sales history and applied settings (store/shared/sales.py) -------------------------------------------
    async def sales_days(self, first: date, last: date, timezone: str,
                         item: str | None = None) -> list[SalesDay]:
        return await self.db.read(sales.days, first, last, timezone, item)

    async def import_sales(self, lines: Sequence[SaleLine], timezone: str, source: str) -> SalesImport:
        now = self.now()
        return await self.db.write(lambda conn: self._import_sales(conn, lines, timezone, source, now))

    async def apply_setting(self, item: str, reorder_point: int, target: int, by: str) -> None:
        now = self.now()
        await self.db.write(lambda conn: sales.apply_setting(conn, item, reorder_point, target, by, now))
        # the stock watcher lives above the store: its check after a change is the caller's (the Apply press's
        # Ingress, `shopbot settings reset`), as after a till count
        self.signals.work.notify()

    async def reset_setting(self, item: str) -> bool:
        done = await self.db.write(lambda conn: sales.reset_setting(conn, item))
        self.signals.work.notify()
        return bool(done)

    # ---- actions (C11) ---------------------------------------------------------------------------------------
    async def due_actions(self, limit: int = 10) -> list[Action]:
        return await self.db.read(actions.due, self.now(), limit)

    async def unknown_actions(self) -> list[Action]:
        return await self.db.read(actions.unknown)

    async def next_action_time(self) -> datetime | None:
        return self._on_process_clock(await self.db.read(actions.next_wake))

    async def action_move(self, move: ActionMove, action_id: int, *args: str | datetime | None,
                          fence: Fence | None = None) -> None:
        """One relay move (store/records.py `ActionMove`) in its own transaction; with `fence` (the action relay's
        lease) checked first, and recorded as the sender of a `mark_sending` (C16)."""
        if not isinstance(move, ActionMove):
            raise TypeError(f"an action move is an ActionMove, not {type(move).__name__} {move!r}")
        fn = _ACTION_MOVES[move]
        now_dt = self.now_dt()
        now = to_text(now_dt)

        def body(conn: Connection) -> None:
            if fence is not None:
                self._leases.fence(conn, fence, now_dt)
            fn(conn, action_id, *args, now)
            if fence is not None and move is ActionMove.MARK_SENDING:
                conn.execute("UPDATE actions SET sender = $1 WHERE action_id = $2", (fence.sender, action_id))
        await self.db.write(body)

    async def decide_action(self, action_id: int, decision: str, by: str, *, receipt: str | None = None,
                            detail: str | None = None) -> ActionState:
        now = self.now()
        state = await self.db.write(lambda conn: actions.decide(conn, action_id, decision, by, now, receipt=receipt,
                                                                detail=detail))
        self.signals.actions.notify()
        return ActionState(state)

    async def actions(self, quarantined_only: bool = False) -> list[ActionView]:
        return await self.db.read(actions.listing, quarantined_only)

    async def awaiting_proposals(self) -> list[Proposal]:
        """Proposals awaiting the owner's Approve or Reject (not expired), oldest first."""
        return await self.db.read(proposals.awaiting, self.now())

    async def expire_proposals(self) -> list[int]:
        now = self.now()
        # looked at before written: the action relay asks every second, and an idle bot must not take the write lock
        # (a reader such as /metrics would queue behind it while another process holds that lock)
        if not await self.db.read(lambda conn: actions.expiring(conn, now)):
            return []
        return await self.db.write(lambda conn: actions.expire(conn, now))

    # ---- the producers' records ---------------------------------------------------------------------------
    async def missed_occurrences(self, limit: int = 20) -> list[Missed]:
        return await self.db.read(producer_state.missed_occurrences, limit)

    async def stock_watch(self) -> list[StockLevel]:
        return await self.db.read(producer_state.stock_levels)

    async def item_names(self) -> list[str]:
        return await self.db.read(producer_state.item_names)

    async def work_with_report(self, source: str) -> WorkWithReport | None:
        return await self.db.read(producer_state.work_with_report, source)

    # ---- reading ---------------------------------------------------------------------------------------------
    async def stats(self, start: datetime, end: datetime) -> Stats:
        return await self.db.read(stats.window, to_text(start), to_text(end))

    async def status(self, window_seconds: float = 3600.0) -> Status:
        now_dt = self.now_dt()
        window = await self.stats(now_dt - timedelta(seconds=window_seconds), now_dt)
        def read(conn: Connection) -> tuple[Status, dict[str, int] | None]:
            # the counts in memory, not yet stored, taken after the stored ones in the same job. A commit that
            # carries counts drops them from memory once it returned: one that ends beside this read could leave a
            # count in both or in neither, so then the read is taken again (Tallies.pending_since; only PostgreSQL
            # commits beside a read)
            mark = self.tallies.mark()
            return read_status(conn, now_dt, window), self.tallies.pending_since(mark)
        deadline = self._loop.time() + STATUS_SETTLE_S
        while True:
            status, pending = await self.db.read(read)
            if pending is not None:
                break
            if self._loop.time() >= deadline:     # commits carrying counts kept ending: the nearest count
                pending = self.tallies.pending()
                break
            await asyncio.sleep(0.005)
        counters = dict(status.counters)
        for kind, n in pending.items():
            counters[kind] = counters.get(kind, 0) + n
        # who shares the store, and who leads what (C16)
        return dataclasses.replace(status, counters=counters,
                                   processes=tuple(await self.processes()), leases=tuple(await self.leaders()))

    async def reports(self, limit: int = 20) -> list[ReportView]:
        return await self.db.read(read_reports, limit)

    async def ops_view(self, tallies: StateTallies) -> OpsView:
        """The operator page's figures (store/shared/metrics.py `ops_view`): each read through an index, the counts by
        state kept in `tallies` as for `metrics`; a read."""
        now_dt = self.clock.now()
        settled = await self._settled_ids()
        return await self.db.read(metric_reads.ops_view, now_dt, tallies, self._sql.oldest_open, settled)

    async def _settled_ids(self) -> dict[str, int | None] | None:
        """The tallied tables' settled ids (DialectSQL.settled), read before the tally's own read; None on SQLite."""
        return None if self._sql.settled is None else await self.db.read(metric_reads.settled_ids, self._sql.settled)

    async def runs_ended_since(self, mark: datetime, limit: int = 10_000) -> list[EndedRun]:
        """Runs that ended at or after `mark`, oldest end first (store/shared/metrics.py `runs_ended_since`); a read."""
        return await self.db.read(metric_reads.runs_ended_since, mark, limit)

    async def day_series(self, hours: int = 24) -> list[SeriesPoint]:
        """λ, W and L per hour over the last `hours` hours, oldest first; a read."""
        now_dt = self.clock.now()
        return await self.db.read(metric_reads.window_series, now_dt - timedelta(hours=hours), now_dt, hours)

    async def check(self) -> list[Violation]:
        return await self.db.read(self._check)

    async def prune(self, older_than_days: float, batch: int = 2000) -> dict[str, int]:
        """Retention (store/shared/retention.py): remove or empty what ended more than `older_than_days` ago, in short
        transactions of at most `batch` rows of each kind, until nothing is left. Returns the rows per kind. Never
        open work, a part not yet ended, an action, or an identity."""
        if older_than_days < 1:
            raise ValueError("retention keeps at least one day: --older-than must be 1 or more")
        now_dt = self.clock.now()
        cutoff, now = to_text(now_dt - timedelta(days=older_than_days)), to_text(now_dt)
        totals: dict[str, int] = {}
        while True:
            done = await self.db.write(retention.prune_batch, self._sql, cutoff, now, batch)
            for kind, n in done.items():
                totals[kind] = totals.get(kind, 0) + n
            if not any(done.values()):
                return totals


class _Rider:
    """An offer's claim, carried by one admission's transaction (`BaseStore._admission`): the same claim as
    `claim_or_wake` (`_claim` and `_set_up`, the debounce window being 0) in a savepoint after the admission's own
    writes. A rider that fails rolls back to its savepoint only: the admission commits, the offer stays open and the
    ordinary wake-up claims. The offer is settled on the event loop when the write ended: with the claim only if the
    COMMIT returned (C5); a rolled-back admission rolled the claim back with it."""

    def __init__(self, store: BaseStore, offer: ClaimOffer, now_dt: datetime) -> None:
        self.store, self.offer = store, offer
        self.now = to_text(now_dt)
        self.run_id = uuid.uuid4().hex
        self.claim: Claim | None = None
        self.more = False              # another session was claimable after this claim (the worker looks again)
        self.error: Exception | None = None

    def ride(self, conn: Connection, admitted: bool) -> None:
        """In the admission's transaction, after its writes (the driver's thread)."""
        self.claim, self.error, self.more = None, None, False   # a transaction run again starts afresh
        if not admitted:
            return
        store = self.store
        conn.execute("SAVEPOINT claim_rider")
        try:
            claim = store._set_up(conn, store._claim(conn, self.offer.worker_id, self.run_id, self.now, self.now),
                                  self.offer.history_limit)
        except Exception as exc:
            try:
                conn.execute("ROLLBACK TO claim_rider")
            except Exception:
                raise exc from None          # the transaction itself is gone (a full disk, a lost connection)
            conn.execute("RELEASE claim_rider")
            self.error = exc
            return
        conn.execute("RELEASE claim_rider")
        self.claim = claim
        self.more = claim is not None and inbox.claimable(conn, self.now, self.now)

    def settle(self, write: asyncio.Future[Any]) -> None:
        """The admission's write ended (a done callback, on the event loop)."""
        committed = not write.cancelled() and write.exception() is None
        self.offer.settle(self.claim if committed else None)
        if committed and self.claim is not None:
            # the worker wakes now, in this callback, ahead of the admission's caller (which resumes one loop pass
            # later): the pulse wakes its waiting task itself, the offer's future would take a pass more. No mark:
            # the claim is handed over; the admission marks the pulse itself when more was claimable (`_admission`)
            self.store.signals.work.wake()
        if self.error is not None and committed:
            level = logging.DEBUG if self.store._rider_failed else logging.WARNING
            self.store._rider_failed = True
            log.log(level, "an admission's claim for worker %s failed and was rolled back to its savepoint (the "
                    "admission committed; the worker claims on its wake-up): %s", self.offer.worker_id, self.error)


class _RideAlong:
    """What rides along with the next commit that writes anyway (`CommitHooks` of each part, in turn): the refusal
    counts (C1) and the receipts' sets (C19)."""

    def __init__(self, *parts: Any) -> None:
        self.parts = parts

    def __bool__(self) -> bool:
        return any(bool(part) for part in self.parts)

    def before_commit(self, conn: Any) -> None:
        for part in self.parts:
            part.before_commit(conn)

    def committed(self) -> None:
        for part in self.parts:
            part.committed()

    def rolled_back(self) -> None:
        for part in self.parts:
            part.rolled_back()
