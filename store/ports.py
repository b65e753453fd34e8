"""The store's contract, as Protocols split by who uses them. Both implementations (SqliteStore in store/sqlite/,
PostgresStore in store/postgres/, siblings over store/shared's BaseStore) offer every port, and tests/contract/store/
runs the same suite against each.

Each method's contract is documented here, once. Every async method is one short transaction that holds no network
call; times cross the seam as aware UTC datetimes. Expected outcomes (duplicate, conflict, refused, not claimed by
this run) are return values or typed exceptions of `store.errors`; driver errors never cross the seam.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Protocol, TypeVar, runtime_checkable

from .asks import Ask
from .clock import Clock
from .offers import ClaimOffer
from .order_records import (
    ActionView,
    CountRequest,
    Draft,
    JsonObject,
    Order,
    Proposal,
    ReceivedOrder,
    RecordedProposal,
    UnknownReport,
)
from .records import (
    Action,
    ActionMove,
    AdmitResult,
    Claim,
    Claimed,
    Decision,
    Delivery,
    DeliveryState,
    DueReceipts,
    Fence,
    FinishOutcome,
    ItemSpec,
    LeaderView,
    MetricsSnapshot,
    Missed,
    MissedReason,
    Occurrence,
    Policy,
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
    Violation,
)
from .shop_records import (
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
from .signals import Signals

T = TypeVar("T")

Usage = tuple[int, int, int]          # model calls, input tokens, output tokens


class ProducerRecords(Protocol):
    """A producer's own progress inside its admission transaction (`Transaction.producers`), so it commits with the
    work it admits (C2)."""

    def get_cursor(self, schedule: str) -> tuple[datetime | None, str | None]:
        """The schedule's cursor (its last fire time dealt with) and the key refused for capacity at it, if any."""

    def set_cursor(self, schedule: str, cursor: datetime, refused_key: str | None) -> None:
        """Move the schedule's cursor (in the same transaction as the admissions up to it)."""

    def record_missed(self, schedule: str, key: str, reason: MissedReason, fire_time: datetime | None) -> bool:
        """Record an occurrence that will not run (late, superseded, capacity, conflict, outage) once: False if
        recorded."""

    def stock_levels(self) -> list[StockLevel]:
        """Every item with on hand, on order, the reorder point in force and its watch state (armed, episode), by
        item."""

    def set_watch(self, item: str, armed: bool, episode: int) -> None:
        """The stock watcher's episode state of an item (an episode ends when on hand >= reorder point)."""

    def get_mark(self, name: str) -> int:
        """A producer's read mark (e.g. the last stock event it looked at); 0 when never set."""

    def set_mark(self, name: str, value: int) -> None:
        """Move a producer's read mark."""

    def count_events_after(self, event_id: int) -> list[TillCount]:
        """Till count events after `event_id`, oldest first."""


class InTransaction(Protocol):
    """What every role of a transaction shares: its time."""

    at: datetime
    """The transaction's time (aware UTC), from the process's one clock."""


class AdmissionTx(InTransaction, Protocol):
    """Admission inside a transaction: what the producers use to admit work with their own progress (C1, C2)."""

    def isolated(self, fn: Callable[[], object]) -> BaseException | None:
        """Run `fn` in a savepoint: an exception other than a database error undoes only `fn`'s writes and is
        returned (one bad update never rolls back its batch); a database error fails the whole transaction."""

    def admit(self, occurrence: Occurrence) -> AdmitResult:
        """C1 inside this transaction: accepted, duplicate, conflict or refused (identity before capacity)."""

    @property
    def producers(self) -> ProducerRecords:
        """The producers' records in this transaction."""

    def count(self, kind: str, by: int = 1) -> int:
        """Add to this minute's counter of `kind` (refusals, strangers, malformed updates); returns the new count."""

    def tally(self, kind: str, by: int = 1) -> None:
        """Count a refusal in memory (C1): it rides along with this transaction's commit if the transaction writes
        anything else, and otherwise costs no commit at all (`Inbox.tally`)."""

    def admit_answered(self, occurrence: Occurrence,
                       answer: Callable[[Transaction, int], ReportDraft]) -> AdmitResult:
        """A control or notice item: admitted, moved to running and finished with the report `answer(tx, work_id)`
        builds, all in this transaction (C4's path for these kinds only). A duplicate writes nothing."""

    def add_receipt(self, chat_id: int, message_id: int, emoji: str) -> bool:
        """C19: a receipt (`emoji` as a reaction) for the owner's message `message_id` of `chat_id`, pending, in this
        transaction (the message's admission). One per message: False when it already has one (a redelivery)."""


class PromptTx(InTransaction, Protocol):
    """The owner's questions (C8): each button's nonce, its decision, once."""

    def ask(self, kind: str, target: str, chat_id: int, *, verbs: Sequence[str] | None = None,
            named: bool = False) -> Ask:
        """Ask the owner of `chat_id` about `target` (C8): a prompt of `kind` stored with a fresh nonce (at least 96
        random bits, never a sequential id), answered by `verbs` (all of the kind's when None); a proposal's prompt
        expires with the proposal. The Ask goes in a report; the relay renders its buttons (store/asks.py)."""

    def prompt(self, nonce: str) -> Prompt | None:
        """The prompt a button's nonce names, or None."""

    def decide_prompt(self, nonce: str, decision: str, by: str) -> bool:
        """Record a prompt's decision once: False when it was decided before (a second press)."""

    def close_prompts(self, kind: str, target: str, decision: str, by: str) -> None:
        """A decision taken through one prompt closes every other open prompt for the same target."""


class ConversationTx(InTransaction, Protocol):
    """The owner's chat as the store keeps it: replies not known to have arrived, what a sent message reads,
    /status, /forget (C7, C8, C12)."""

    def unknown_reports(self) -> list[UnknownReport]:
        """Reports with a part in `unknown`, oldest part first (notices' own reports among them: the caller leaves
        those out, since no notice is written about a notice's delivery)."""

    def status(self) -> Status:
        """The same figures as `Store.status()`, read in this transaction (the owner's /status)."""

    def unknown_prompt_open(self, report_id: str) -> bool:
        """Whether the report still has a part awaiting a Resend / I have it decision (C8)."""

    def resolve(self, report_id: str, decision: str, by: str) -> list[int]:
        """C8: record `resend` (unknown parts back to pending) or `delivered` (unknown parts confirmed, receipt
        empty) with who decided; returns the moved delivery ids (none when nothing awaited a decision)."""

    def forget(self, session: str, by: str) -> tuple[int, int]:
        """C12: delete the session's agent history and cancel its pending work (pending -> failed with a report
        naming who cancelled); returns (history rows deleted, items cancelled)."""

    def delivery_states(self, report_id: str) -> list[DeliveryState]:
        """The states of a report's parts, in part order."""

    def sent_message(self, chat_id: int, message_id: int) -> SentMessage | None:
        """How a message the bot sent reads now (its latest send or edit): text without identity, report, asks."""


class OrderTx(InTransaction, Protocol):
    """Proposals, approvals and orders on order (C11), and the reorder settings the owner applies."""

    def proposal(self, proposal_id: int) -> Proposal | None:
        """A proposal with its item's unit, or None."""

    def awaiting_proposals(self) -> list[Proposal]:
        """Proposals awaiting Approve or Reject (not expired), oldest first."""

    def run_proposals(self, run_id: str) -> list[Proposal]:
        """The proposals a run recorded (void unless its turn finished, C11)."""

    def approve_proposal(self, proposal_id: int, by: str, *, day: str, day_max_cents: int | None,
                         destination: str, lead_time_days: int = 3) -> Decision:
        """C11: the decision, the day's spending reservation, the action row with a random 128-bit idempotency key
        and the order (on order from now, due after `lead_time_days`), in this transaction; refused (ok=False with
        the reason) when the proposal is no longer open or the day's limit would be passed."""

    def reject_proposal(self, proposal_id: int, by: str) -> Decision:
        """Record the owner's rejection of an open proposal."""

    def order(self, proposal_id: int) -> Order | None:
        """One order in any state (on order, received, not arrived, cancelled) with its action's state and
        `status` in the owner's words; None when the proposal has no order."""

    def open_orders(self, item: str | None = None) -> list[Order]:
        """Orders on order (all, or one item's), oldest first."""

    def overdue_orders(self) -> list[Order]:
        """Orders still on order after the supplier's lead time."""

    def restocked_orders_after(self, event_id: int) -> list[ReceivedOrder]:
        """Orders a till count received (a 'restock' stock event) after `event_id`, in event order, with the stock
        before and after and the count's source."""

    def receive_order(self, proposal_id: int, by: str, counted: int | None = None) -> ReceivedOrder:
        """The owner's Received: a 'received' stock event (the ordered quantity added, or the stock set to
        `counted`), and the order settled; the order as it is now with the stock before and after."""

    def order_not_arrived(self, proposal_id: int, by: str) -> Order:
        """The owner's Not arrived: the order stops counting as on order; the stock is unchanged."""

    def set_order_card(self, proposal_id: int, chat_id: int, message_id: int) -> None:
        """Remember the card an order was approved on, so its later life (confirmed, received) edits it."""

    def apply_setting(self, item: str, reorder_point: int, target: int, by: str, prompt: str | None = None) -> None:
        """The owner's applied reorder point and target for the item (a recorded decision, with the prompt it was
        pressed on): in force from this commit, in place of the shop file's, until `reset_setting`. ValueError when
        the target is below the reorder point; UnknownTarget for an unknown item."""


class Transaction(AdmissionTx, PromptTx, ConversationTx, OrderTx, Protocol):
    """The moves available inside one open write transaction (`Store.atomic`, `admit_answered`, `finish(apply=,
    after=)`): the union of the roles above, so a part that needs one role names it. Synchronous on purpose:
    nothing inside a transaction may await a network call or a model."""


@runtime_checkable
class Inbox(Protocol):
    """Admission and turns: what the producers and the worker use (C1, C2, C4, C5, C6, C9, C10, C12)."""

    clock: Clock
    capacity: int
    attempt_cap: int
    lease_s: float | None     # a claim's lease in seconds where claims are leases (PostgreSQL, C15); None: not leases

    async def admit(self, occurrence: Occurrence) -> AdmitResult:
        """C1: exactly one of accepted, duplicate (same identity and content: nothing stored), conflict (same
        identity, other content: nothing changed) or refused (open agent work at capacity: nothing stored).
        Identity is checked before capacity; control items are never refused. Outcomes are never exceptions."""

    async def admit_many(self, occurrences: Sequence[Occurrence]) -> list[AdmitResult]:
        """A batch in one commit (a getUpdates batch); each occurrence gets its own outcome, and a conflict never
        rolls back the batch."""

    async def admit_answered(self, occurrence: Occurrence,
                             answer: Callable[[Transaction, int], ReportDraft]) -> AdmitResult:
        """`Transaction.admit_answered` in a transaction of its own."""

    async def notice(self, kind: str, subject: str, text: str, destination: str) -> bool:
        """A system notice `notice:<kind>:<subject>` with its report; its identity makes it once only (True when
        this call wrote it)."""

    async def count(self, kind: str, by: int = 1) -> int:
        """`Transaction.count` in a transaction of its own."""

    def tally(self, kind: str, by: int = 1) -> None:
        """Count a refusal (a bad till token, a stranger) in memory: written with the next commit that writes anyway,
        or by a flush at most once a second. A crash may lose the last second of counts, never work (C1)."""

    async def atomic(self, fn: Callable[[Transaction], T], *, fence: Fence | None = None) -> T:
        """Run `fn(tx)` in one write transaction: a producer admits and moves its cursor in one commit (C2). With
        `fence`, a singleton's lease is checked first in the same transaction (`Leadership`): `LeaseLost` and nothing
        written when it is no longer held."""

    async def claim(self, worker_id: str, skip_sessions: Sequence[str] = (), *,
                    history_limit: int | None = None) -> Claim | None:
        """C5: the pending items of one due session (its oldest item admitted at least the debounce window ago,
        none with a future not-before) move to running for this worker under a new run id, attempts incremented,
        committed before any model runs. The owner's sessions (`tg:`) come before the producers' when both are due,
        oldest first within each. None when nothing is due. With `history_limit` the turn's set-up is read in the
        same transaction (`Claim.setup`: the session's last `history_limit` exchanges as `exchanges` returns them,
        and `shop_items`), so the turn makes no read before its model call."""

    async def claim_or_wake(self, worker_id: str, skip_sessions: Sequence[str] = (), *,
                            history_limit: int | None = None) -> Claimed:
        """`claim`, and when nothing is due, `Claimed.next_wake` is what `next_claim_time` would say, read in the
        same transaction: the worker's idle look costs no read of its own."""

    def offer_claim(self, worker_id: str, *, history_limit: int | None = None) -> ClaimOffer:
        """An idle worker's claim, offered to the next transaction of this process that admits agent work (`atomic`,
        `admit`, `admit_many`): that transaction runs the claim `claim_or_wake` would (the same due rule, the set-up
        read with it) in a savepoint after its own writes, and `ClaimOffer.taken` gets the claim once its COMMIT
        returned (C5: committed before any model runs), with no transaction of its own. An admission that rolls back
        takes nothing; a claim that fails rolls back to its savepoint only (the admission commits, the offer stays
        open); nothing due (a debounce window, the session's turn running) claims nothing. `ClaimOffer.withdraw`
        closes it and answers the claim it was given, if any: the caller's to run or to give back (`release`,
        `refund=True`)."""

    async def next_claim_time(self) -> datetime | None:
        """When the earliest waiting session becomes due (debounce, not-before); None when none waits."""

    async def finish(self, claim: Claim, draft: ReportDraft | Callable[[], ReportDraft], *,
                     user_text: str | None = None, model_said: tuple[str, str] | None = None,
                     stop_reason: str | None = None, usage: Usage = (0, 0, 0),
                     apply: Callable[[Transaction], None] | None = None,
                     after: Callable[[Transaction, str], None] | None = None,
                     claim_next: str | None = None, history_limit: int | None = None) -> FinishOutcome:
        """C6 in one transaction: the turn's items finished, the report `r<anchor>.<generation>` inserted and linked to
        every item, the run's operations attached, the history updated; `apply(tx)` first and `after(tx, report_id)`
        last in the same transaction. Raises `NotClaimed` for work this run does not hold. C12: if the session was
        forgotten during the run, nothing is stored (`discarded`). With `claim_next` the next due turn is claimed in the
        same commit (with its set-up when `history_limit` is given, as `claim`); when it finds none due, the outcome
        is `looked` with `next_wake` as `claim_or_wake` gives it. C17: with `model_said` (the model's own
        prose, its exchange as JSON) the history's answer is that prose and exchange, never the report's body."""

    async def finish_counts(self, claim: Claim, requests: Sequence[CountRequest],
                            render: Callable[[list[tuple[str, str, int, int]]], str]) -> FinishOutcome:
        """A till turn: every request's counts applied to the stock and the report rendered from the applied
        counts (source, item, old, new), in the finish transaction (C6)."""

    async def fail(self, claim: Claim, draft: ReportDraft, *, stop_reason: str | None = None,
                   usage: Usage = (0, 0, 0)) -> str:
        """C9: the turn's items failed with the error report `draft` (R3); returns the report id."""

    async def release(self, claim: Claim, *, delay_seconds: float, reason: str, refund: bool = False,
                      usage: Usage = (0, 0, 0)) -> str | None:
        """C4/C9: give the turn back (running -> pending, not before `delay_seconds`), or fail it with an error
        report when an item reached the attempt cap (returns that report's id). `refund` un-counts the attempt
        (the turn never ran)."""

    async def history(self, session: str, limit: int = 20) -> list[tuple[str, str]]:
        """The session's agent history, oldest first: (role, text) pairs."""

    async def exchanges(self, session: str, limit: int = 20) -> list[tuple[str, str, str | None]]:
        """C17: the session's agent history, oldest first: (role, text, the exchange's messages as JSON or None)."""

    async def forget(self, session: str, by: str) -> tuple[int, int]:
        """`Transaction.forget` in a transaction of its own."""

    async def recover(self) -> RecoverySummary:
        """C10 at start-up: running turns whose operations were all read/internal/proposals go back to pending
        (failed at the attempt cap, C9), one that acted outside fails visibly; `sending` parts become unknown.
        Only for a store one process owns (SQLite under its instance lock): on a shared store it would reset other
        processes' live turns, so processes sharing one recover with `sweep_expired`."""

    async def renew(self, claim: Claim) -> Renewal:
        """C15: extend the run's lease by `lease_s` from now, judged by the store's clock (the database's): HELD.
        Refused, how the run stands is read in the same transaction: ENDED when its own ending write (finish,
        finish_counts, fail, release) committed, LAPSED when its lease lapsed (never revived; its run may write
        nothing more) or another ended it (a sweep). Without leases (SQLite): HELD while the run is open."""

    def ending(self, claim: Claim) -> bool:
        """True while this process has an ending write of the run (finish, finish_counts, fail, release) in flight,
        from its call until its answer is back: its fence judges the lease in its own transaction (C15)."""

    async def sweep_expired(self, *, sending: bool = True) -> RecoverySummary:
        """C15: every open run whose lease expired is ended (outcome `expired`, its proposals void, C11) and its turn
        recovered by C10's rule, an `external` operation started and never finished counting as having acted, with
        C9's cap; a run whose lease is live is never touched. With `sending` (C16), `Leadership.sweep_sending`: a
        `sending` delivery or action whose sender's leader lease is no longer current becomes unknown. Without
        leases (SQLite): nothing expires and nothing changes."""


@runtime_checkable
class Journal(Protocol):
    """The operations of a run: what the agent loop's tools use (C10, C11)."""

    async def op_started(self, run_id: str, call_id: str, tool: str, arguments: JsonObject, effect: str) -> None:
        """Journal a tool call as started before it acts (effect `read`, `internal` or `external`)."""

    async def op_finished(self, run_id: str, call_id: str, status: str, result: JsonObject, *,
                          acted_outside: bool = False) -> None:
        """Journal a tool call's result after it acted."""

    async def run_steps(self, run_id: str) -> list[str]:
        """The tool names a run has journaled so far, in the order they started; a read (C20's progress drafts)."""

    async def record_draft(self, run_id: str, item: str, quantity: int) -> Draft:
        """An order draft of an open run (an internal effect), costed from the catalog."""

    async def record_proposal(self, run_id: str, call_id: str, supplier: str, item: str, quantity: int,
                              policy: Policy | None = None) -> RecordedProposal:
        """C11: the typed proposal, validated by `policy` (rejected ones are recorded rejected by policy with the
        reason: a spending limit's as a typed `PolicyRefusal`, its words left to the renderer; the others in words),
        and its operation's completion with `RecordedProposal.to_json()` as its result, in one transaction; at most
        one open proposal per item."""


@runtime_checkable
class Outbox(Protocol):
    """Report deliveries: what the Telegram relay uses (C7, C8)."""

    async def due_deliveries(self, limit: int = 20, skip_chats: Sequence[int] = ()) -> list[Delivery]:
        """Pending parts whose not-before time has passed, oldest report first, in part order; parts of a report
        wait behind its earlier parts."""

    async def next_delivery_time(self) -> datetime | None:
        """The earliest not-before time of a pending part, or None."""

    async def mark_sending(self, delivery_id: int, confirm: tuple[int, str] | None = None, *,
                           fence: Fence | None = None) -> None:
        """pending -> sending, committed before the HTTP call; `confirm` (delivery id, receipt) records the previous
        part's receipt in the same commit. With `fence` (the relay's lease) the lease is checked in the same
        transaction (`LeaseLost`, nothing written) and recorded as the delivery's `sender`."""

    async def take_due(self, skip_chats: Sequence[int] = (), *, confirms: Sequence[tuple[int, str]] = (),
                       fence: Fence | None = None, refuse: Callable[[int], bool] | None = None,
                       limit: int = 1) -> Taken:
        """`mark_sending` of the oldest due parts, up to `limit` of them and at most one per chat (each the first
        `due_deliveries` would list with the chats already taken and those in `skip_chats` left out), read in the
        same transaction: they are `sending` when returned, committed before their HTTP calls; none when none is
        due. `confirms` ((delivery id, receipt) each) records earlier parts' receipts in the same commit, and `fence`
        acts as in `mark_sending`, whether a part is taken or not. A due part whose chat `refuse(chat_id)` names is
        moved to denied on the way, as `mark_denied` would (C3), and listed in `Taken.denied`. When none is due,
        `Taken.next_wake` is what `next_delivery_time` would say, read in the same transaction."""

    async def mark_confirmed(self, delivery_id: int, receipt: str) -> None:
        """sending -> confirmed with Telegram's message id (a receipt is required)."""

    async def mark_not_sent(self, delivery_id: int, reason: str, retry_after: float | None = None) -> None:
        """sending -> pending: the request provably never left, or 429 with a not-before time."""

    async def mark_failed(self, delivery_id: int, reason: str) -> None:
        """sending -> failed: a definite refusal about this message (400, 403)."""

    async def mark_unknown(self, delivery_id: int, reason: str) -> None:
        """sending -> unknown: it may have reached Telegram; never resent without a recorded decision."""

    async def mark_denied(self, delivery_id: int, reason: str) -> None:
        """pending -> denied: the recipient is no longer allow-listed (C3 at send time)."""

    async def resolve(self, report_id: str, decision: str, by: str) -> list[int]:
        """`Transaction.resolve` in a transaction of its own."""


@runtime_checkable
class Receipts(Protocol):
    """C19: the receipts the receipt relay sets (reactions on admitted owner messages), written by `add_receipt` in
    the admission's transaction. Setting a reaction is idempotent: an unknown outcome leaves a receipt pending."""

    async def due_receipts(self, limit: int = 20) -> list[Receipt]:
        """Pending receipts whose not-before time has passed, oldest first; one whose set is held (`hold_set`) is
        not due."""

    async def due_receipts_or_wake(self, limit: int = 20) -> DueReceipts:
        """`due_receipts`, with the earliest not-before time still to come of a pending receipt read in the same
        snapshot: the relay's look is one read."""

    def fresh_receipts(self) -> list[Receipt] | None:
        """The receipts this process's admissions wrote since the last call (each committed and pending; one whose
        set is held left out), oldest first, so the relay sets them with no read; a hint, which a look
        (`due_receipts_or_wake`) would find too. None when more waited than are kept (no relay took them): look."""

    def hold_set(self, receipt_id: int) -> None:
        """pending -> set (Telegram answered True), stored with the next commit that writes anyway, or by a flush
        within a second when nothing commits: no commit of its own. Until it is stored the receipt is not due; a
        crash before that leaves it pending, to be set again (the same reaction: harmless). `flush_held` stores it
        now."""

    async def flush_held(self) -> None:
        """Store now what is held in memory (sets held by `hold_set`, refusal counts): one commit, when any."""

    async def next_receipt_time(self) -> datetime | None:
        """The earliest not-before time of a pending receipt, or None."""

    async def receipt_set(self, receipt_id: int, *, then: int = 0) -> list[Receipt]:
        """pending -> set: Telegram answered True. With `then`, the receipts due next (up to `then`, as
        `due_receipts` lists them) read in the same transaction, so the relay's next look costs no read of its own;
        else []."""

    async def receipt_retry(self, receipt_id: int, reason: str, retry_after: float) -> None:
        """Stays pending, due again `retry_after` seconds from now (not sent, 429, or an unknown outcome)."""

    async def receipt_failed(self, receipt_id: int, reason: str) -> None:
        """pending -> failed: a definite refusal (400, 403) or the attempt cap; never set again."""

    async def receipts(self, chat_id: int | None = None, limit: int = 100) -> list[Receipt]:
        """The newest receipts (of one chat), newest first; a read."""


@runtime_checkable
class ActionOutbox(Protocol):
    """Approved supplier orders: what the action relay and the operator use (C11)."""

    async def due_actions(self, limit: int = 10) -> list[Action]:
        """Pending actions whose not-before time has passed, oldest first."""

    async def unknown_actions(self) -> list[Action]:
        """Actions whose last send may or may not have reached the supplier."""

    async def next_action_time(self) -> datetime | None:
        """The earliest not-before time of a pending action, or None."""

    async def action_move(self, move: ActionMove, action_id: int, *args: str | datetime | None,
                          fence: Fence | None = None) -> None:
        """One relay move (`ActionMove`: mark_sending, mark_delivered(receipt), mark_not_sent(not_before: an aware
        datetime or None, reason), mark_failed(reason), mark_unknown(reason), quarantine(reason)) in its own
        transaction; an illegal move raises `IllegalTransition`; anything but an `ActionMove` raises TypeError,
        changing nothing. With `fence` (the action relay's lease) the lease is checked first (`LeaseLost`, nothing
        written) and a `mark_sending` records it as the action's `sender`."""

    async def decide_action(self, action_id: int, decision: str, by: str, *, receipt: str | None = None,
                            detail: str | None = None) -> ActionState:
        """The operator's recorded release or void of a quarantined (or unknown) action; returns its new state."""

    async def actions(self, quarantined_only: bool = False) -> list[ActionView]:
        """Actions with their state, for `shopbot actions`."""

    async def awaiting_proposals(self) -> list[Proposal]:
        """Proposals awaiting the owner's Approve or Reject (not expired), oldest first."""

    async def expire_proposals(self) -> list[int]:
        """Proposals not approved before their expiry become expired; returns their ids."""


@runtime_checkable
class ShopRecords(Protocol):
    """The shop's items, stock and the producers' records read outside a transaction."""

    async def shop_items(self) -> list[ShopItem]:
        """Every item with its stock and limits."""

    async def shop_item(self, item: str) -> ShopItem | None:
        """One item, or None."""

    async def seed_shop(self, specs: Sequence[ItemSpec], source: str) -> bool:
        """Load the shop file's items into an empty shop; False when items existed already."""

    async def sync_shop(self, specs: Sequence[ItemSpec], source: str, reset_stock: bool = False) -> list[str]:
        """Apply an edited shop file (counted stock kept unless `reset_stock`); returns the changes in words."""

    async def item_names(self) -> list[str]:
        """The names of the shop's items."""

    async def stock_watch(self) -> list[StockLevel]:
        """`ProducerRecords.stock_levels` outside a transaction."""

    async def missed_occurrences(self, limit: int = 20) -> list[Missed]:
        """The most recently recorded missed occurrences, newest first."""

    async def work_with_report(self, source: str) -> WorkWithReport | None:
        """The work item of a source identity with its state and report (the till reads its requests back)."""

    async def sales(self, since: datetime, until: datetime, item: str | None = None) -> list[ItemSales]:
        """Units sold and restocked per item (one, or every item, by item) in (since, until], from the stock records:
        sales are the decreases between consecutive records of an item, increases are restocks and never negative
        sales."""

    async def on_order(self, item: str | None = None) -> list[OnOrder]:
        """Orders on order (from approval until received; not failed, voided or not arrived), for the agent, by
        proposal."""

    async def recent_counts(self, item: str | None = None, limit: int = 10) -> list[TillCount]:
        """The latest till counts, newest first."""

    async def open_proposals(self) -> list[Proposal]:
        """Proposals awaiting the owner's decision, oldest first (one past its expiry too, until it is expired)."""

    async def open_orders(self, item: str | None = None) -> list[Order]:
        """`Transaction.open_orders` outside a transaction; `Order.status` says where each stands with the supplier
        (e.g. "confirmed by the supplier (their id SUP-1)")."""

    async def order(self, proposal_id: int) -> Order | None:
        """`Transaction.order` outside a transaction."""

    async def receive_order(self, proposal_id: int, by: str, counted: int | None = None) -> ReceivedOrder:
        """`Transaction.receive_order` in a transaction of its own. Raises UnknownTarget, IllegalTransition or
        ValueError, changing nothing."""

    async def order_not_arrived(self, proposal_id: int, by: str) -> Order:
        """`Transaction.order_not_arrived` in a transaction of its own."""

    async def stock_events(self, item: str, limit: int = 100) -> list[StockEvent]:
        """An item's latest stock events, oldest first."""

    async def sales_days(self, first: date, last: date, timezone: str,
                         item: str | None = None) -> list[SalesDay]:
        """The sales history (store/shared/sales.py): every (item, shop-local day) in [first, last] with a record or
        out of stock, by item and day; an imported day takes the place of the till's, so no day counts twice."""

    async def import_sales(self, lines: Sequence[SaleLine], timezone: str, source: str) -> SalesImport:
        """All or nothing, in one transaction: each line's (item, day) is added, or already recorded with the same
        quantity (unchanged: importing a file again changes nothing), or a problem (an unknown item, a day recorded
        with another quantity: a conflict); with any problem nothing is stored."""

    async def apply_setting(self, item: str, reorder_point: int, target: int, by: str) -> None:
        """`Transaction.apply_setting` in a transaction of its own."""

    async def reset_setting(self, item: str) -> bool:
        """The item's reorder point and target go back to the shop file's; False when none was applied."""


@runtime_checkable
class Insights(Protocol):
    """Read-only figures for `shopbot status|reports|check`, /status and the benchmarks (C14)."""

    async def schema_version(self) -> int:
        """The database's schema version."""

    async def stats(self, start: datetime, end: datetime) -> Stats:
        """C14 over [start, end]: λ, W and L of agent work."""

    async def status(self, window_seconds: float = 3600.0) -> Status:
        """Counts per state, oldest pending age, unknown and failed items, actions, counters, missed occurrences,
        Little's law over the window, the processes sharing the store and who holds each leader lease (C16);
        `Status.to_json()` is the shape docs/operations.md documents for `status --json`."""

    async def reports(self, limit: int = 20) -> list[ReportView]:
        """The latest reports, newest first, with their items' work ids and source identities and their parts'
        states; `ReportView.to_json()` is one element of `reports --json`."""

    async def check(self) -> list[Violation]:
        """Every invariant (R1-R3 and the rest) on the store's own read path; empty when all hold."""

    async def metrics(self, window_seconds: float = 3600.0,
                      tallies: StateTallies | None = None) -> MetricsSnapshot:
        """Operational figures for /metrics in one read snapshot: never the write lock, no user data. Pass the same
        `tallies` at every call (the caller keeps it, from `{}`): the counts by state then cost only what changed."""

    async def ops_view(self, tallies: StateTallies) -> OpsView:
        """The operator page's figures, each read through an index, the counts by state kept in `tallies` as for
        `metrics`; a read."""

    async def runs_ended_since(self, mark: datetime, limit: int = 10_000) -> list[EndedRun]:
        """Runs that ended at or after `mark`, oldest end first; a read."""

    async def day_series(self, hours: int = 24) -> list[SeriesPoint]:
        """λ, W and L per hour over the last `hours` hours, oldest first; a read."""

    async def writable(self, probe_interval_s: float = 5.0) -> str | None:
        """None while writes can commit, else a fixed sentence why not (no path, no data): a write that failed for
        the lock or the disk counts until a later write probe commits; the probe runs at most every
        `probe_interval_s` and changes nothing anyone reads (/healthz)."""


@runtime_checkable
class ChangeNotification(Protocol):
    """Wake-ups: in-process signals, and changes committed by another process (a CLI admission or resolution)."""

    signals: Signals

    async def listen(self) -> None:
        """Start waking `signals` on other processes' commits as they happen (PostgreSQL: LISTEN/NOTIFY on one
        dedicated connection, reconnected on loss, with a full scan after every reconnect and every few seconds);
        nothing on SQLite. A hint only: `poll_changes` stays the periodic scan. Stopped by `close`."""

    async def poll_changes(self) -> bool:
        """True (and every signal notified) when another connection committed since the last call."""


@runtime_checkable
class Admin(Protocol):
    """Lifecycle and the operator's whole-database moves."""

    @property
    def location(self) -> str:
        """Where the data lives, for logs and messages (a file path; never a password)."""

    async def close(self) -> None:
        """Close the store; every later call fails."""

    async def backup(self, target: str) -> None:
        """A consistent copy of the live database at `target` (which must not exist)."""

    async def prune(self, older_than_days: float, batch: int = 2000) -> dict[str, int]:
        """Retention: remove or empty what ended more than `older_than_days` ago (at least 1) in short transactions,
        keeping every identity as a tombstone with its content hash; never open work, a part not yet ended, an
        action, or an identity. Returns the rows per kind."""

    async def vacuum(self) -> tuple[int, int]:
        """Give the space freed by a prune back to the file system; returns the size in bytes before and after."""


@runtime_checkable
class Leadership(Protocol):
    """Leader leases (C16): one holder at a time per singleton name (`poller`, `relay`, `producers`, `actions`).

    A holder is a random uuid4 hex made at each process start (never a pid or a host name); the generation grows at
    every takeover. Every judgement of a lease is made by the store's one clock: the database server's clock
    (`clock_timestamp()`) on PostgreSQL, the store's clock on SQLite (where the one process under the instance lock
    always wins). Lease lengths are real seconds. (The moves are named `*_leader` because a run's lease of C15 has
    its own `renew` on the same store.)"""

    async def acquire_leader(self, name: str, holder: str, lease_s: float) -> int | None:
        """The lease for `holder` for `lease_s` when it is free or expired: its generation (one more than the last
        holder's); None while another holder's lease is current (or this holder's own: it is never re-entered)."""

    async def renew_leader(self, name: str, holder: str, generation: int, lease_s: float) -> bool:
        """Extend the lease by `lease_s` from now, only for this holder and generation and only while it is current:
        False means demote at once (a lapsed lease is never revived)."""

    async def resign_leader(self, name: str, holder: str, generation: int) -> bool:
        """End the lease now (a clean stop) so a standby acquires it at once; False when it was no longer held."""

    async def fenced(self, fence: Fence) -> None:
        """The fence in a transaction of its own: `LeaseLost` unless `fence` is still held and unexpired. Inside a
        singleton's own write it is the `fence=` of `atomic`, `mark_sending` and `action_move`; on PostgreSQL it
        takes the lease row FOR SHARE, so a takeover waits until the fenced transaction has committed."""

    async def heartbeat(self, holder: str, pid: int, host: str, forget_after_s: float) -> None:
        """This process is alive (its `processes` row: holder, pid, host, started, seen now); rows of processes
        not seen for `forget_after_s` are dropped."""

    async def depart(self, holder: str) -> None:
        """A clean stop: the process's row is removed."""

    async def leaders(self) -> list[LeaderView]:
        """Every lease, by name (`expires_in_s` negative once expired); a read."""

    async def processes(self) -> list[ProcessView]:
        """The processes that share the store, oldest start first; a read."""

    async def sweep_sending(self) -> tuple[list[int], list[int]]:
        """C7, C11, C16: deliveries and actions `sending` whose sender's lease (relay, actions) is no longer current
        become unknown; those of a sender that still holds its lease are left alone. Returns (delivery ids, action
        ids) moved. Any process may run it at any time."""


@runtime_checkable
class Store(Inbox, Journal, Outbox, Receipts, ActionOutbox, ShopRecords, Insights, ChangeNotification, Admin,
            Leadership, Protocol):
    """Every port: what the composition root hands to each part (each part annotates the port it uses)."""


PORTS: tuple[type, ...] = (Inbox, Journal, Outbox, Receipts, ActionOutbox, ShopRecords, Insights, ChangeNotification,
                           Admin, Leadership)
