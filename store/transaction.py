"""The store's moves inside one open write transaction (`Store.atomic`, `admit_answered`, `finish(apply=, after=)`).

Sync on purpose: nothing inside a transaction may await a network call or a model (store/connection.py).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from . import actions, inbox, outbox, producer_state, prompts, shop, stats
from .clock import from_text, to_text
from .outbox import ReportDraft
from .records import AdmitResult, Occurrence
from .status import read_status

if TYPE_CHECKING:
    from .api import Store


class Transaction:
    """The store's moves available inside one open write transaction (sync: no awaits inside a transaction)."""

    def __init__(self, conn: sqlite3.Connection, now: str, store: Store) -> None:
        self.conn = conn
        self.now = now
        self._store = store
        self._open_count: list[int] = []     # open agent work, counted once per transaction

    def isolated(self, fn: Callable[[], object]) -> BaseException | None:
        """Run `fn` in a savepoint. A bug or bad input inside it (any exception but a database error) undoes only
        its own writes and is returned, so one bad update never rolls back the batch it came in; a database error
        (disk full, I/O) still fails the whole transaction, so nothing is acknowledged."""
        self.conn.execute("SAVEPOINT isolated")
        try:
            fn()
        except sqlite3.Error:
            raise
        except Exception as exc:
            self.conn.execute("ROLLBACK TO isolated")
            self.conn.execute("RELEASE isolated")
            self._open_count.clear()          # recount after the rollback
            return exc
        self.conn.execute("RELEASE isolated")
        return None

    def admit(self, occurrence: Occurrence) -> AdmitResult:
        return inbox.admit(self.conn, occurrence, self.now, self._store.capacity, self._open_count)

    @property
    def producers(self) -> producer_state.ProducerState:
        """Cursors, missed occurrences, stock-watch episodes and marks, in this transaction."""
        return producer_state.ProducerState(self.conn)

    def count(self, kind: str, by: int = 1) -> int:
        return inbox.count(self.conn, self.now, kind, by)

    def tally(self, kind: str, by: int = 1) -> None:
        """Count a refusal in memory (C1): it rides along with this transaction's commit if the transaction writes
        anything else, and otherwise costs no commit at all (`Store.tally`)."""
        self._store.tally(kind, by)

    def admit_answered(self, occurrence: Occurrence, answer: Callable[[Transaction, int], ReportDraft]) -> AdmitResult:
        return inbox.admit_answered(self.conn, occurrence, self.now, lambda work_id: answer(self, work_id))

    def unknown_reports(self) -> list[dict]:
        """Reports with a part in `unknown`, with what a notice needs; notices' own reports are left out (no notice
        is written about a notice's delivery: it shows in /pending and `shopbot status`)."""
        return outbox.unknown_reports(self.conn)

    def status(self) -> dict:
        now = from_text(self.now)
        return read_status(self.conn, now, stats.window(self.conn, to_text(now - timedelta(hours=1)), self.now))

    def unknown_prompt_open(self, report_id: str) -> bool:
        return outbox.has_unknown(self.conn, report_id)

    def proposal(self, proposal_id: int) -> dict | None:
        return actions.proposal(self.conn, proposal_id)

    def run_proposals(self, run_id: str) -> list[dict]:
        return shop.proposals(self.conn, run_id)

    def approve_proposal(self, proposal_id: int, by: str, *, day: str, day_max_cents: int | None,
                         destination: str) -> actions.Decision:
        decision = actions.approve(self.conn, proposal_id, by, self.now, day, day_max_cents, destination)
        if decision.action_id is not None:
            self._store.signals.actions.notify()
        return decision

    def reject_proposal(self, proposal_id: int, by: str) -> actions.Decision:
        return actions.reject(self.conn, proposal_id, by, self.now)

    def create_prompt(self, kind: str, target: str, chat_id: int, expires_at: str | None = None) -> str:
        return prompts.create(self.conn, kind, target, chat_id, self.now, expires_at)

    def prompt(self, nonce: str) -> prompts.Prompt | None:
        return prompts.get(self.conn, nonce)

    def decide_prompt(self, nonce: str, decision: str, by: str) -> bool:
        return prompts.decide(self.conn, nonce, decision, by, self.now)

    def resolve(self, report_id: str, decision: str, by: str) -> list[int]:
        moved = outbox.resolve(self.conn, report_id, decision, by, self.now)
        prompts.close_for_target(self.conn, "unknown", report_id, decision, by, self.now)
        return moved

    def forget(self, session: str, by: str) -> tuple[int, int]:
        return inbox.forget(self.conn, session, by, self.now)

    def delivery_states(self, report_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT state FROM deliveries WHERE report_id = ? ORDER BY part", (report_id,)).fetchall()]
