"""The store's moves inside one open write transaction (`Store.atomic`, `admit_answered`, `finish(apply=, after=)`).

Sync on purpose: nothing inside a transaction may await a network call or a model (store/shared/connection.py
`Database`: each transaction one synchronous function run whole in the driver's thread).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from .. import asks
from ..asks import Ask
from ..clock import from_text, to_text
from ..order_records import Order, Proposal, ReceivedOrder, UnknownReport
from ..records import (
    Admission,
    AdmitResult,
    Decision,
    DeliveryState,
    Occurrence,
    Prompt,
    Receipt,
    ReportDraft,
    SentMessage,
    Status,
    WorkKind,
)
from . import actions, inbox, orders, outbox, producer_state, prompts, proposals, receipts, sales, stats
from .connection import Connection
from .status import read_status

if TYPE_CHECKING:
    from .store import BaseStore


class Transaction:
    """The store's moves available inside one open write transaction (sync: no awaits inside a transaction)."""

    def __init__(self, conn: Connection, now: str, store: BaseStore) -> None:
        self._conn = conn
        self._now = now                      # the store's text form, for the SQL
        self.at = from_text(now)             # the transaction's time, for callers (aware UTC)
        self._store = store
        self._open_count: list[int] = []     # open agent work, counted once per transaction
        # what `Store.atomic` wakes after the commit: the report relay only when a delivery may have become due (a
        # control item's report, a resend), the receipt relay only when a receipt was stored; an owner's plain
        # message admits work and its receipt and wakes neither relay's look for nothing
        self.wrote_deliveries = False
        self.wrote_receipts = False
        self.added_receipts: list[Receipt] = []   # handed to this process's receipt relay after the commit
        self.admitted_work = False           # agent work accepted here: an idle worker's offered claim may ride along
        self.approved_action = False         # an action queued: the action relay is woken after the commit, on the loop

    def isolated(self, fn: Callable[[], object]) -> BaseException | None:
        """Run `fn` in a savepoint. A bug or bad input inside it (any exception but a database error) undoes only
        its own writes and is returned, so one bad update never rolls back the batch it came in; a database error
        (disk full, I/O) still fails the whole transaction, so nothing is acknowledged."""
        self._conn.execute("SAVEPOINT isolated")
        receipts_before = len(self.added_receipts)
        try:
            fn()
        except self._store._db_error:
            raise
        except Exception as exc:
            self._conn.execute("ROLLBACK TO isolated")
            self._conn.execute("RELEASE isolated")
            self._open_count.clear()          # recount after the rollback
            del self.added_receipts[receipts_before:]   # undone with it
            return exc
        self._conn.execute("RELEASE isolated")
        return None

    def admit(self, occurrence: Occurrence) -> AdmitResult:
        result = self._store._admit(self._conn, occurrence, self._now, self._store.capacity, self._open_count)
        self.admitted_work |= result.outcome is Admission.ACCEPTED and occurrence.kind is WorkKind.AGENT
        return result

    @property
    def producers(self) -> producer_state.ProducerState:
        """Cursors, missed occurrences, stock-watch episodes and marks, in this transaction."""
        return self._store._producer_state(self._conn, self._now)

    def count(self, kind: str, by: int = 1) -> int:
        return inbox.count(self._conn, self._now, kind, by)

    def tally(self, kind: str, by: int = 1) -> None:
        self._store.tally(kind, by)

    def admit_answered(self, occurrence: Occurrence,
                       answer: Callable[[Transaction, int], ReportDraft]) -> AdmitResult:
        result = self._store._admit_answered(self._conn, occurrence, self._now, lambda work_id: answer(self, work_id))
        self.wrote_deliveries |= result.report_id is not None
        return result

    def add_receipt(self, chat_id: int, message_id: int, emoji: str) -> bool:
        receipt_id = receipts.add(self._conn, chat_id, message_id, emoji, self._now)
        if receipt_id is None:
            return False
        self.wrote_receipts = True
        self.added_receipts.append(Receipt(receipt_id, chat_id, message_id, emoji, "pending", 0))
        return True

    def unknown_reports(self) -> list[UnknownReport]:
        """Reports with a part in `unknown`, with what a notice needs; notices' own reports are left out (no notice
        is written about a notice's delivery: it shows in /pending and `shopbot status`)."""
        return outbox.unknown_reports(self._conn)

    def status(self) -> Status:
        now = from_text(self._now)
        return read_status(self._conn, now, stats.window(self._conn, to_text(now - timedelta(hours=1)), self._now))

    def unknown_prompt_open(self, report_id: str) -> bool:
        return outbox.has_unknown(self._conn, report_id)

    def proposal(self, proposal_id: int) -> Proposal | None:
        return proposals.get(self._conn, proposal_id)

    def awaiting_proposals(self) -> list[Proposal]:
        return proposals.awaiting(self._conn, self._now)

    def run_proposals(self, run_id: str) -> list[Proposal]:
        return proposals.of_run(self._conn, run_id)

    def approve_proposal(self, proposal_id: int, by: str, *, day: str, day_max_cents: int | None,
                         destination: str, lead_time_days: int = orders.DEFAULT_LEAD_TIME_DAYS) -> Decision:
        decision = self._store._approve(self._conn, proposal_id, by, self._now, day, day_max_cents, destination,
                                        lead_time_days)
        # not woken here: this runs in the driver's thread, before the commit (an asyncio event is the loop's)
        self.approved_action |= decision.action_id is not None
        return decision

    def reject_proposal(self, proposal_id: int, by: str) -> Decision:
        return actions.reject(self._conn, proposal_id, by, self._now)

    def ask(self, kind: str, target: str, chat_id: int, *, verbs: Sequence[str] | None = None,
            named: bool = False) -> Ask:
        answers = asks.offered(kind, verbs)           # a kind or verb the grammar lacks is refused before storing
        return Ask(kind, prompts.create(self._conn, kind, target, chat_id, self._now), target, answers, named)

    def prompt(self, nonce: str) -> Prompt | None:
        return prompts.get(self._conn, nonce)

    def decide_prompt(self, nonce: str, decision: str, by: str) -> bool:
        return prompts.decide(self._conn, nonce, decision, by, self._now)

    def resolve(self, report_id: str, decision: str, by: str) -> list[int]:
        moved = self._store._resolve(self._conn, report_id, decision, by, self._now)
        prompts.close_for_target(self._conn, "unknown", report_id, decision, by, self._now)
        self.wrote_deliveries |= bool(moved)           # a resend puts its parts back to pending
        return moved

    def forget(self, session: str, by: str) -> tuple[int, int]:
        self.wrote_deliveries = True                   # as `Store.forget` does
        return self._store._forget(self._conn, session, by, self._now)

    def delivery_states(self, report_id: str) -> list[DeliveryState]:
        return [DeliveryState(r[0]) for r in self._conn.execute(
            "SELECT state FROM deliveries WHERE report_id = $1 ORDER BY part", (report_id,)).fetchall()]

    # ---- on order (store/shared/orders.py) ------------------------------------------------------------------------
    def order(self, proposal_id: int) -> Order | None:
        return orders.get(self._conn, proposal_id)

    def open_orders(self, item: str | None = None) -> list[Order]:
        return orders.open_orders(self._conn, item)

    def overdue_orders(self) -> list[Order]:
        return orders.overdue(self._conn, self._now)

    def restocked_orders_after(self, event_id: int) -> list[ReceivedOrder]:
        return orders.restocked_after(self._conn, event_id)

    def receive_order(self, proposal_id: int, by: str, counted: int | None = None) -> ReceivedOrder:
        return orders.receive(self._conn, proposal_id, by, self._now, counted)

    def order_not_arrived(self, proposal_id: int, by: str) -> Order:
        return orders.not_arrived(self._conn, proposal_id, by, self._now)

    def sent_message(self, chat_id: int, message_id: int) -> SentMessage | None:
        return outbox.sent_message(self._conn, chat_id, message_id)

    def set_order_card(self, proposal_id: int, chat_id: int, message_id: int) -> None:
        orders.set_card(self._conn, proposal_id, chat_id, message_id, self._now)

    def close_prompts(self, kind: str, target: str, decision: str, by: str) -> None:
        prompts.close_for_target(self._conn, kind, target, decision, by, self._now)

    def apply_setting(self, item: str, reorder_point: int, target: int, by: str, prompt: str | None = None) -> None:
        sales.apply_setting(self._conn, item, reorder_point, target, by, self._now, prompt)
