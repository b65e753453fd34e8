"""Property-based tests of the store's state machines against a model of the contracts (issue 7, hostile input).

A hypothesis `RuleBasedStateMachine` drives random sequences of admit (agent, control, notice; duplicates,
conflicts, capacity), claim (ManualClock, debounce), finish, release (backoff, refund), fail, forged claims, an
operation that acted outside the store, forget, every delivery move, resolve and restart (close, reopen the same
file, `recover()`), through the public `Store` API only. After every step:

- `store.invariants.check(path)` on an independent read-only connection is empty;
- the model agrees with the database: every work row (state, attempts, not-before), every report and the items it
  answers, every delivery (state, attempts, not-before, resends), open runs, the refusal counter, which deliveries
  are due (`due_deliveries`: an unknown part is never due) and when the next claim is due;
- nothing ever left finished, failed, confirmed, failed or denied once there.

Every illegal move (finishing, releasing or failing work not held, a forged claim, journaling on an ended run, a
delivery move from the wrong state, a confirmation without a receipt, resolving a report with nothing unknown or a
report that does not exist) must raise the store's own exception (NotClaimed, IllegalTransition, UnknownTarget),
never a sqlite3 error, and leave every table exactly as it was.

The store is async: each machine owns a fresh event loop (`new_event_loop().run_until_complete`) and closes its
store and loop at teardown.
"""
from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store import (
    Admission,
    IllegalTransition,
    ManualClock,
    NotClaimed,
    Occurrence,
    ReportDraft,
    SqliteStore,
    Store,
    UnknownTarget,
    WorkKind,
    to_text,
)
from store.shared import store as store_api
from store.shared.outbox import split_parts
from store.sqlite import invariants
from tests.support.strategies import PROFILE, examples

# the long profile runs far past pytest-timeout's 180 s default (pyproject.toml)
pytestmark = [pytest.mark.timeout(3600)] if PROFILE != "ci" else []

CAPACITY = 4
DEBOUNCE_MS = 300
ATTEMPT_CAP = 3
START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
SESSIONS = ("tg:1", "tg:2", "till:1")
TABLES = ("work", "reports", "report_items", "deliveries", "resolutions", "runs", "operations", "sessions",
          "history", "counters", "prompts")
BODIES = {"short": "vanilla: 9 tubs", "lines": "\n".join(f"line {i} " + "x" * 60 for i in range(150)),
          "one_long_line": "y" * 9000}
DELIVERY_MOVES = ("sending", "confirmed", "confirm_without_receipt", "not_sent", "retry_after", "failed", "unknown",
                  "denied")
MOVE_FROM = {"sending": "pending", "denied": "pending", "confirmed": "sending", "confirm_without_receipt": None,
             "not_sent": "sending", "retry_after": "sending", "failed": "sending", "unknown": "sending"}
TERMINAL_WORK = ("finished", "failed")
TERMINAL_DELIVERY = ("confirmed", "failed", "denied")


def dest_of(session: str) -> str:
    return session   # tg:<chat> goes to that chat; till:1 is stored only (no deliveries)


@dataclass
class W:
    work_id: int
    source: str
    session: str
    kind: str
    payload: str
    destination: str | None
    admitted_at: datetime
    state: str = "pending"
    attempts: int = 0
    not_before: datetime | None = None
    run_id: str | None = None
    worker_id: str | None = None


@dataclass
class D:
    delivery_id: int
    report_id: str
    part: int
    parts: int
    state: str = "pending"
    not_before: datetime | None = None
    resends: int = 0
    attempts: int = 0


@dataclass
class Run:
    run_id: str
    worker_id: str
    session: str
    items: tuple[int, ...]
    attempt: int
    epoch: int
    open: bool = True
    acted: bool = False


def txt(moment: datetime | None) -> str | None:
    return to_text(moment) if moment is not None else None


class DeterministicUuids:
    """Run ids in a fixed but unordered sequence, so an example replays exactly (recovery orders runs by run id)."""

    def __init__(self) -> None:
        self.n = 0

    def uuid4(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=(self.n * 0x9E3779B97F4A7C15F39CC0605CEDC835) % 2**128)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._uuid_module = store_api.uuid
        store_api.uuid = DeterministicUuids()  # type: ignore[assignment]
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="shopbot-props-"))
        self.path = self.dir / "shop.sqlite3"
        self.clock = ManualClock(START)
        self.store: Store | None = self.run(self.open())
        self.works: dict[int, W] = {}
        self.by_source: dict[str, int] = {}
        self.reports: dict[str, tuple[tuple[int, ...], bool, str | None]] = {}
        self.deliveries: dict[int, D] = {}
        self.runs: dict[str, Run] = {}
        self.claims: list = []
        self.epochs: dict[str, int] = {}
        self.history: dict[str, int] = {}
        self.refused = 0
        self.calls = 0
        self.terminal_seen: dict[tuple[str, int], str] = {}

    # ---- plumbing ----------------------------------------------------------------------------------------------
    def run(self, coro):
        return self.loop.run_until_complete(coro)

    async def open(self) -> Store:
        return await SqliteStore.open(self.path, self.clock, capacity=CAPACITY, debounce_ms=DEBOUNCE_MS,
                                attempt_cap=ATTEMPT_CAP)

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.run(self.store.close())
        finally:
            store_api.uuid = self._uuid_module
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump(self) -> dict[str, list[tuple]]:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            return {t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY 1")] for t in TABLES}
        finally:
            conn.close()

    def refused_move(self, exc_type: type[Exception], coro) -> None:
        """An illegal move raises the store's own exception and changes nothing."""
        before = self.dump()
        with pytest.raises(exc_type):
            self.run(coro)
        assert self.dump() == before, "an illegal move changed the database"

    # ---- the model ---------------------------------------------------------------------------------------------
    def now(self) -> datetime:
        return self.clock.now()

    def open_agent(self) -> int:
        return sum(1 for w in self.works.values() if w.kind == "agent" and w.state in ("pending", "running"))

    def model_admit(self, occ: Occurrence) -> tuple[Admission, int | None]:
        """C1: identity first, then capacity (agent work only), then the insert."""
        existing = self.by_source.get(occ.source)
        if existing is not None:
            w = self.works[existing]
            same = w.session == occ.session and w.payload == occ.payload
            return (Admission.DUPLICATE if same else Admission.CONFLICT), existing
        if occ.kind is WorkKind.AGENT and self.open_agent() >= CAPACITY:
            self.refused += 1
            return Admission.REFUSED, None
        work_id = max(self.works, default=0) + 1
        self.works[work_id] = W(work_id, occ.source, occ.session, occ.kind.value, occ.payload, occ.destination,
                                self.now())
        self.by_source[occ.source] = work_id
        return Admission.ACCEPTED, work_id

    def model_report(self, ids: list[int], body: str | None, is_error: bool, destination: str | None) -> str:
        anchor = min(ids)
        generation = 1 + sum(1 for rid in self.reports if rid.startswith(f"r{anchor}."))
        report_id = f"r{anchor}.{generation}"
        self.reports[report_id] = (tuple(sorted(set(ids))), is_error, destination)
        if destination and destination.startswith("tg:"):
            parts = len(split_parts(body, report_id)) if body is not None else 1   # the store's own texts are short
            first = max(self.deliveries, default=0) + 1
            for part in range(1, parts + 1):
                self.deliveries[first + part - 1] = D(first + part - 1, report_id, part, parts)
        return report_id

    def end(self, ids: list[int], state: str) -> None:
        for i in ids:
            assert self.works[i].state in (("running", "pending") if state == "failed" else ("running",))
            self.works[i].state = state

    def held(self, claim) -> bool:
        return all(self.works[i.work_id].state == "running" and self.works[i.work_id].run_id == claim.run_id
                   and self.works[i.work_id].worker_id == claim.worker_id for i in claim.items)

    def expected_claim(self) -> str | None:
        cutoff = self.now() - timedelta(milliseconds=DEBOUNCE_MS)
        # the owner's sessions (tg:) before the others, oldest first within each (store/shared/inbox.py OWNER_FIRST)
        for work_id in sorted(self.works, key=lambda i: (not self.works[i].session.startswith("tg:"), i)):
            w = self.works[work_id]
            if w.kind != "agent" or w.state != "pending":
                continue
            oldest = min(x.work_id for x in self.works.values()
                         if x.session == w.session and x.kind == "agent" and x.state in ("pending", "running"))
            if oldest != work_id or w.admitted_at > cutoff:
                continue
            if w.not_before is not None and w.not_before > self.now():
                continue
            return w.session
        return None

    def expected_next_claim(self) -> datetime | None:
        due = []
        for w in self.works.values():
            if w.kind != "agent" or w.state != "pending":
                continue
            oldest = min(x.work_id for x in self.works.values()
                         if x.session == w.session and x.kind == "agent" and x.state in ("pending", "running"))
            if oldest == w.work_id:
                due.append(max(w.admitted_at + timedelta(milliseconds=DEBOUNCE_MS), w.not_before or w.admitted_at))
        return min(due) if due else None

    def due_ids(self) -> list[int]:
        out = []
        for d in sorted(self.deliveries.values(), key=lambda d: d.delivery_id):
            if d.state != "pending" or (d.not_before is not None and d.not_before > self.now()):
                continue
            earlier = [e for e in self.deliveries.values() if e.report_id == d.report_id and e.part < d.part]
            if all(e.state == "confirmed" for e in earlier):
                out.append(d.delivery_id)
        return out

    def close_run(self, run_id: str) -> None:
        self.runs[run_id].open = False

    def k_for(self, claim) -> int:
        """The `k` with which pick_claim picks this held claim."""
        return 4 * [c for c in self.claims if self.held(c)].index(claim) + 1

    def pick_claim(self, k: int):
        """Mostly a claim still held (the worker's normal path), every fourth pick any claim ever made (stale)."""
        held = [c for c in self.claims if self.held(c)]
        pool = held if held and k % 4 else self.claims
        return pool[(k // 4) % len(pool)]

    # ---- admission ---------------------------------------------------------------------------------------------
    @rule(n=st.integers(0, 11), session=st.sampled_from(SESSIONS), payload=st.sampled_from(["a", "b"]))
    def admit_agent(self, n: int, session: str, payload: str) -> None:
        occ = Occurrence(f"src:{n}", session, payload, WorkKind.AGENT, dest_of(session))
        expected = self.model_admit(occ)
        result = self.run(self.store.admit(occ))
        assert (result.outcome, result.work_id) == expected

    @rule(batch=st.lists(st.tuples(st.integers(0, 11), st.sampled_from(SESSIONS), st.sampled_from(["a", "b"])),
                         min_size=1, max_size=5))
    def admit_batch(self, batch: list[tuple[int, str, str]]) -> None:
        occs = [Occurrence(f"src:{n}", s, p, WorkKind.AGENT, dest_of(s)) for n, s, p in batch]
        expected = [self.model_admit(o) for o in occs]
        results = self.run(self.store.admit_many(occs))
        assert [(r.outcome, r.work_id) for r in results] == expected

    @rule(n=st.integers(0, 5), payload=st.sampled_from(["press", "other"]), body=st.sampled_from(sorted(BODIES)),
          is_error=st.booleans())
    def admit_control(self, n: int, payload: str, body: str, is_error: bool) -> None:
        """A button press: never refused for capacity, answered and ended inside its admission."""
        occ = Occurrence(f"cb:{n}", "tg:1", payload, WorkKind.CONTROL, "tg:1")
        outcome, work_id = self.model_admit(occ)
        expected_report = None
        if outcome is Admission.ACCEPTED:
            self.works[work_id].state = "failed" if is_error else "finished"
            expected_report = self.model_report([work_id], BODIES[body], is_error, "tg:1")
        result = self.run(self.store.admit_answered(
            occ, lambda tx, wid: ReportDraft(BODIES[body], destination="tg:1", is_error=is_error)))
        assert (result.outcome, result.work_id, result.report_id) == (outcome, work_id, expected_report)

    @rule(n=st.integers(0, 3), text=st.sampled_from(["r1.1 may not have arrived", "other text"]))
    def notice(self, n: int, text: str) -> None:
        occ = Occurrence(f"notice:test:s{n}", "notice:test", text, WorkKind.NOTICE, "tg:2")
        outcome, work_id = self.model_admit(occ)
        if outcome is Admission.ACCEPTED:
            self.works[work_id].state = "finished"
            self.model_report([work_id], text, False, "tg:2")
        assert self.run(self.store.notice("test", f"s{n}", text, "tg:2")) is (outcome is Admission.ACCEPTED)

    @rule(seconds=st.sampled_from([0.05, 0.2, 0.3, 0.5, 1, 5, 30, 120]))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # ---- the worker ----------------------------------------------------------------------------------------------
    @rule(worker=st.sampled_from(["w1", "w2"]), wait=st.sampled_from([0, 0.3, 0.3, 1]))
    def claim(self, worker: str, wait: float) -> None:
        self.clock.advance(wait)        # mostly past the debounce window, sometimes inside it
        expected = self.expected_claim()
        claim = self.run(self.store.claim(worker))
        event(f"claim {'none' if expected is None else 'turn'}")
        self.check_claim(expected, worker, claim)

    def check_claim(self, session: str | None, worker: str, claim) -> None:
        """The claim the store returned is the one the model expects (C5); apply it to the model."""
        if session is None:
            assert claim is None
            return
        assert claim is not None and claim.session == session
        ids = sorted(w.work_id for w in self.works.values()
                     if w.session == session and w.kind == "agent" and w.state == "pending")
        assert [i.work_id for i in claim.items] == ids
        for i in ids:
            w = self.works[i]
            w.state, w.attempts, w.not_before = "running", w.attempts + 1, None
            w.run_id, w.worker_id = claim.run_id, worker
        attempt = max(self.works[i].attempts for i in ids)
        assert claim.attempt == attempt and claim.epoch == self.epochs.get(session, 0)
        assert claim.destination == dest_of(session) and claim.worker_id == worker
        self.runs[claim.run_id] = Run(claim.run_id, worker, session, tuple(ids), attempt, self.epochs.get(session, 0))
        self.claims.append(claim)

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6), body=st.sampled_from(sorted(BODIES)), user_text=st.booleans(),
          claim_next=st.sampled_from([None, None, "w1", "w2"]))
    def finish(self, k: int, body: str, user_text: bool, claim_next: str | None = None) -> None:
        """C6, and with `claim_next` the next due turn claimed in the same commit (C5)."""
        claim = self.pick_claim(k)
        draft = ReportDraft(BODIES[body], destination=claim.destination)
        call = self.store.finish(claim, draft, user_text="question" if user_text else None, claim_next=claim_next)
        event(f"finish {'held' if self.held(claim) else 'not held'}{' claiming next' if claim_next else ''}")
        if not self.held(claim):
            self.refused_move(NotClaimed, call)
            return
        ids = [i.work_id for i in claim.items]
        if self.epochs.get(claim.session, 0) != claim.epoch:      # C12: forgotten during the run
            self.end(ids, "failed")
            expected, discarded = self.model_report(ids, None, True, claim.destination), True
        else:
            self.end(ids, "finished")
            expected, discarded = self.model_report(ids, BODIES[body], False, claim.destination), False
            if user_text:
                self.history[claim.session] = self.history.get(claim.session, 0) + 2
        self.close_run(claim.run_id)
        next_session = self.expected_claim() if claim_next else None
        outcome = self.run(call)
        assert (outcome.report_id, outcome.discarded) == (expected, discarded)
        if claim_next:
            self.check_claim(next_session, claim_next, outcome.next_claim)
        else:
            assert outcome.next_claim is None

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6), delay=st.sampled_from([0, 1, 10]), refund=st.booleans())
    def release(self, k: int, delay: float, refund: bool) -> None:
        claim = self.pick_claim(k)
        call = self.store.release(claim, delay_seconds=delay, reason="model unavailable", refund=refund)
        if not self.held(claim):
            self.refused_move(NotClaimed, call)
            return
        ids = [i.work_id for i in claim.items]
        event(f"release at attempt {claim.attempt} refund={refund}")
        if self.epochs.get(claim.session, 0) != claim.epoch:    # C12: forgotten during the run, never run again
            self.end(ids, "failed")
            expected = self.model_report(ids, None, True, claim.destination)
        elif not refund and claim.attempt >= ATTEMPT_CAP:     # C9: at the cap the turn fails visibly
            self.end(ids, "failed")
            expected = self.model_report(ids, None, True, claim.destination)
        else:
            for i in ids:
                w = self.works[i]
                w.state = "pending"
                w.not_before = self.now() + timedelta(seconds=delay) if delay > 0 else None
                w.attempts -= 1 if refund else 0
            expected = None
        self.close_run(claim.run_id)
        assert self.run(call) == expected

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6))
    def fail(self, k: int) -> None:
        claim = self.pick_claim(k)
        call = self.store.fail(claim, ReportDraft("could not", destination=claim.destination, is_error=True),
                               stop_reason="model refused")
        if not self.held(claim):
            self.refused_move(NotClaimed, call)
            return
        ids = [i.work_id for i in claim.items]
        self.end(ids, "failed")
        expected = self.model_report(ids, "could not", True, claim.destination)
        self.close_run(claim.run_id)
        assert self.run(call) == expected

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6), forge=st.sampled_from(["worker", "run", "items"]),
          move=st.sampled_from(["finish", "release", "fail"]))
    def forged_claim(self, k: int, forge: str, move: str) -> None:
        """C5: a worker cannot end work it did not claim, whatever it pretends."""
        claim = self.pick_claim(k)
        if forge == "worker":
            forged = replace(claim, worker_id="intruder")
        elif forge == "run":
            forged = replace(claim, run_id="f" * 32)
        else:   # the real run, claiming one more item than it holds
            others = [w for w in self.works.values() if w.work_id not in {i.work_id for i in claim.items}]
            if not others:
                return
            extra = others[0]
            forged = replace(claim, items=claim.items + (replace(claim.items[0], work_id=extra.work_id),))
        call = {"finish": lambda: self.store.finish(forged, ReportDraft("x", destination=forged.destination)),
                "release": lambda: self.store.release(forged, delay_seconds=0, reason="x"),
                "fail": lambda: self.store.fail(forged, ReportDraft("x", is_error=True))}[move]()
        self.refused_move(NotClaimed, call)

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6), outside=st.booleans())
    def operation(self, k: int, outside: bool) -> None:
        """A tool call journaled by the run; one that acted outside the store makes recovery fail the turn (C10)."""
        claim = self.pick_claim(k)
        self.calls += 1
        call_id = f"call-{self.calls}"
        started = self.store.op_started(claim.run_id, call_id, "tool", {"n": 1}, "external" if outside else "read")
        if not self.runs[claim.run_id].open:
            self.refused_move(NotClaimed, started)
            return
        self.run(started)
        self.run(self.store.op_finished(claim.run_id, call_id, "done", {"ok": True}, acted_outside=outside))
        if outside:
            self.runs[claim.run_id].acted = True

    @rule(session=st.sampled_from(SESSIONS))
    def forget(self, session: str) -> None:
        """C12: history deleted, pending work cancelled (pending -> failed with a report); a running turn is
        discarded at its finish."""
        self.epochs[session] = self.epochs.get(session, 0) + 1
        ids = sorted(w.work_id for w in self.works.values()
                     if w.session == session and w.kind == "agent" and w.state == "pending")
        if ids:
            self.end(ids, "failed")
            self.model_report(ids, None, True, self.works[ids[0]].destination)
        history, self.history[session] = self.history.get(session, 0), 0
        assert self.run(self.store.forget(session, "owner:1")) == (history, len(ids))

    # ---- the relay -----------------------------------------------------------------------------------------------
    @precondition(lambda self: self.deliveries)
    @rule(k=st.integers(0, 10**6), move=st.sampled_from(DELIVERY_MOVES))
    def deliver(self, k: int, move: str) -> None:
        open_ids = [i for i, d in sorted(self.deliveries.items()) if d.state not in TERMINAL_DELIVERY]
        ids = open_ids if open_ids and k % 5 else sorted(self.deliveries)
        d = self.deliveries[ids[(k // 5) % len(ids)]]
        if MOVE_FROM[move] == "pending" and d.state == "pending" and d.delivery_id not in self.due_ids():
            return      # the relay only takes due parts, in order (D4)
        event(f"deliver {move} from {d.state}: {'legal' if d.state == MOVE_FROM[move] else 'refused'}")
        self._move(d.delivery_id, move)

    def _move(self, did: int, move: str) -> None:
        d = self.deliveries[did]
        call = {"sending": lambda: self.store.mark_sending(did),
                "confirmed": lambda: self.store.mark_confirmed(did, f"m{did}"),
                "confirm_without_receipt": lambda: self.store.mark_confirmed(did, None),  # type: ignore[arg-type]
                "not_sent": lambda: self.store.mark_not_sent(did, "connection refused"),
                "retry_after": lambda: self.store.mark_not_sent(did, "429", retry_after=2.0),
                "failed": lambda: self.store.mark_failed(did, "403 blocked"),
                "unknown": lambda: self.store.mark_unknown(did, "read timeout"),
                "denied": lambda: self.store.mark_denied(did, "revoked")}[move]()
        if d.state != MOVE_FROM[move]:
            self.refused_move(IllegalTransition, call)
            return
        later = [e for e in self.deliveries.values() if e.report_id == d.report_id and e.part > d.part]
        if move == "sending":
            d.state, d.attempts = "sending", d.attempts + 1
        elif move == "confirmed":
            d.state = "confirmed"
        elif move in ("not_sent", "retry_after"):
            d.state = "pending"
            d.not_before = self.now() + timedelta(seconds=2.0) if move == "retry_after" else None
        elif move in ("failed", "denied"):
            d.state = move
            for e in later:
                if e.state == "pending":
                    e.state = move
        else:
            d.state = "unknown"
        self.run(call)

    @precondition(lambda self: self.reports)
    @rule(k=st.integers(0, 10**6), decision=st.sampled_from(["resend", "delivered"]))
    def resolve(self, k: int, decision: str) -> None:
        """C8: only a report with an unknown part takes a decision; resend puts it back, delivered confirms it."""
        with_unknown = sorted({d.report_id for d in self.deliveries.values() if d.state == "unknown"})
        report_ids = with_unknown if with_unknown and k % 3 else sorted(self.reports) + ["r999999.1"]
        report_id = report_ids[(k // 3) % len(report_ids)]
        call = self.store.resolve(report_id, decision, "operator")
        if report_id not in self.reports:
            self.refused_move(UnknownTarget, call)
            return
        unknown = sorted(d.delivery_id for d in self.deliveries.values()
                         if d.report_id == report_id and d.state == "unknown")
        event(f"resolve {decision} {'with' if unknown else 'without'} unknown parts")
        if not unknown:
            self.refused_move(IllegalTransition, call)
            return
        for did in unknown:
            d = self.deliveries[did]
            if decision == "resend":
                d.state, d.resends, d.not_before = "pending", d.resends + 1, None
            else:
                d.state = "confirmed"
        assert self.run(call) == unknown

    # ---- restart -------------------------------------------------------------------------------------------------
    @rule()
    def restart(self) -> None:
        """Close the store, reopen the same file, recover (C10): running turns go back (or fail at the cap, or fail
        when an operation acted outside the store), open runs end, `sending` becomes unknown."""
        self.run(self.store.close())
        self.store = None
        self.store = self.run(self.open())
        released, failed = [], []
        running = [w for w in self.works.values() if w.kind == "agent" and w.state == "running"]
        for run_id in sorted({w.run_id for w in running}):
            ids = sorted(w.work_id for w in running if w.run_id == run_id)
            attempt = max(self.works[i].attempts for i in ids)
            destination = self.works[ids[0]].destination
            run = self.runs[run_id]
            forgotten = self.epochs.get(run.session, 0) != run.epoch     # C12: discarded, never run again
            if run.acted or forgotten or attempt >= ATTEMPT_CAP:
                self.end(ids, "failed")
                self.model_report(ids, None, True, destination)
                failed += ids
            else:
                for i in ids:
                    self.works[i].state, self.works[i].not_before = "pending", None
                released += ids
        for r in self.runs.values():
            r.open = False
        unknown = sorted(d.delivery_id for d in self.deliveries.values() if d.state == "sending")
        for did in unknown:
            self.deliveries[did].state = "unknown"
        event(f"restart: {len(released)} released, {len(failed)} failed, {len(unknown)} unknown")
        summary = self.run(self.store.recover())
        assert (sorted(summary.released), sorted(summary.failed), sorted(summary.unknown_deliveries)) == \
            (sorted(released), sorted(failed), unknown)

    # Compound rules: paths that need several moves in a row to reach the interesting states (the attempt cap,
    # a crash mid-turn, a relay pass with mixed outcomes).
    @rule(worker=st.sampled_from(["w1", "w2"]), outside=st.booleans())
    def killed_during_a_turn(self, worker: str, outside: bool) -> None:
        """K3-K6: a turn is claimed (maybe after an operation) and the process dies; recovery decides."""
        before = len(self.claims)
        self.claim(worker, 1)
        if len(self.claims) > before and outside:
            self.operation(self.k_for(self.claims[-1]), True)
        self.restart()

    @rule(delay=st.sampled_from([0, 1]))
    def transient_failure(self, delay: float) -> None:
        """A model outage: claim and release without refund, so attempts grow towards the cap (C9)."""
        self.clock.advance(1.5)
        before = len(self.claims)
        self.claim("w1", 0)
        if len(self.claims) > before:
            self.release(self.k_for(self.claims[-1]), delay, False)

    @precondition(lambda self: self.deliveries)
    @rule(outcomes=st.lists(st.sampled_from(["confirmed", "confirmed", "unknown", "not_sent", "retry_after",
                                              "failed", "denied"]), min_size=1, max_size=6))
    def relay_pass(self, outcomes: list[str]) -> None:
        """The relay's loop: each due part is marked sending (committing the previous part's receipt in the same
        transaction), then gets one outcome or is denied at send time; the last receipt is flushed on its own."""
        self.clock.advance(2.5)
        carry: int | None = None
        for outcome in outcomes:
            due = self.due_ids()
            if not due:
                break
            did = due[0]
            if outcome in ("denied", "unknown") and carry is not None:
                self._move(carry, "confirmed")
                carry = None
            if outcome == "denied":
                self._move(did, "denied")
                continue
            self._send(did, carry)
            carry = None
            if outcome == "confirmed":
                carry = did
            else:
                self._move(did, outcome)
        if carry is not None:
            self._move(carry, "confirmed")

    def _send(self, did: int, confirm: int | None) -> None:
        """mark_sending with an optional receipt for another delivery, in one commit: both or neither."""
        call = self.store.mark_sending(did, confirm=(confirm, f"m{confirm}") if confirm is not None else None)
        d = self.deliveries[did]
        c = self.deliveries.get(confirm) if confirm is not None else None
        if d.state != "pending" or (confirm is not None and (c is None or c.state != "sending")):
            self.refused_move(IllegalTransition, call)
            return
        if c is not None:
            c.state = "confirmed"
        d.state, d.attempts = "sending", d.attempts + 1
        self.run(call)

    @precondition(lambda self: self.deliveries)
    @rule(k=st.integers(0, 10**6), j=st.integers(0, 10**6))
    def send_confirming_another(self, k: int, j: int) -> None:
        """A receipt carried into the next send must be for a part in `sending`; otherwise neither move happens."""
        due = self.due_ids()
        if not due:
            return
        ids = sorted(self.deliveries)
        self._send(due[k % len(due)], ids[j % len(ids)])

    # The worker's and the relay's usual path, weighted up: hypothesis picks uniformly among the enabled rules.
    @rule(n=st.integers(0, 11), session=st.sampled_from(SESSIONS), payload=st.sampled_from(["a", "b"]))
    def admit_agent_more(self, n: int, session: str, payload: str) -> None:
        self.admit_agent(n, session, payload)

    @rule(worker=st.sampled_from(["w1", "w2"]), wait=st.sampled_from([0.3, 1]))
    def claim_more(self, worker: str, wait: float) -> None:
        self.claim(worker, wait)

    @precondition(lambda self: self.claims)
    @rule(k=st.integers(0, 10**6), body=st.sampled_from(sorted(BODIES)), user_text=st.booleans())
    def finish_more(self, k: int, body: str, user_text: bool) -> None:
        self.finish(k, body, user_text, None)

    @precondition(lambda self: self.deliveries)
    @rule(k=st.integers(0, 10**6), move=st.sampled_from(DELIVERY_MOVES))
    def deliver_more(self, k: int, move: str) -> None:
        self.deliver(k, move)

    @precondition(lambda self: self.deliveries)
    @rule(k=st.integers(0, 10**6), move=st.sampled_from(DELIVERY_MOVES))
    def deliver_again(self, k: int, move: str) -> None:
        self.deliver(k, move)

    # ---- after every step ----------------------------------------------------------------------------------------
    @invariant()
    def database_agrees_with_the_model(self) -> None:
        assert invariants.check(self.path) == []
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            work = {r[0]: r[1:] for r in conn.execute(
                "SELECT work_id, source, session, kind, payload, destination, state, attempts, admitted_at, "
                "not_before FROM work")}
            reports = {r[0]: (tuple(int(x) for x in r[1].split(",")), bool(r[2]), r[3]) for r in conn.execute(
                "SELECT r.report_id, group_concat(i.work_id), r.is_error, r.destination FROM reports r "
                "JOIN report_items i USING (report_id) GROUP BY r.report_id ORDER BY r.report_id")}
            deliveries = {r[0]: r[1:] for r in conn.execute(
                "SELECT delivery_id, report_id, part, parts, state, not_before, resends, attempts FROM deliveries")}
            open_runs = {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE ended_at IS NULL")}
            refused = conn.execute("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = 'refused_capacity'"
                                   ).fetchone()[0]
            history = dict(conn.execute("SELECT session, count(*) FROM history GROUP BY session").fetchall())
        finally:
            conn.close()
        assert work == {w.work_id: (w.source, w.session, w.kind, w.payload, w.destination, w.state, w.attempts,
                                    txt(w.admitted_at), txt(w.not_before)) for w in self.works.values()}
        assert {rid: (tuple(sorted(items)), e, d) for rid, (items, e, d) in reports.items()} == self.reports
        assert deliveries == {d.delivery_id: (d.report_id, d.part, d.parts, d.state, txt(d.not_before), d.resends,
                                              d.attempts) for d in self.deliveries.values()}
        assert open_runs == {r.run_id for r in self.runs.values() if r.open}
        assert refused == self.refused
        assert {s: n for s, n in history.items() if n} == {s: n for s, n in self.history.items() if n}
        due = self.run(self.store.due_deliveries(limit=10**6))
        assert [d.delivery_id for d in due] == self.due_ids()
        assert all(d.state.value == "pending" for d in due)            # an unknown part is never due (C7)
        assert self.run(self.store.next_claim_time()) == self.expected_next_claim()
        # nothing leaves finished/failed (C4) or confirmed/failed/denied (C7)
        for work_id, row in work.items():
            if row[5] in TERMINAL_WORK:
                assert self.terminal_seen.setdefault(("work", work_id), row[5]) == row[5]
        for delivery_id, row in deliveries.items():
            if row[3] in TERMINAL_DELIVERY:
                assert self.terminal_seen.setdefault(("delivery", delivery_id), row[3]) == row[3]
        for (kind, key), state in self.terminal_seen.items():
            assert (work[key][5] if kind == "work" else deliveries[key][3]) == state


StoreMachine.TestCase.settings = settings(stateful_step_count=40 if PROFILE == "ci" else 60)
TestStoreStateMachine = StoreMachine.TestCase


# ---- C1 under concurrency: two connections (two processes' worth) admit the same occurrences at once -------------

@settings(max_examples=examples(15))
@given(batch=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["a", "b"])), min_size=1, max_size=8),
       split=st.integers(0, 8))
def test_concurrent_admission_leaves_the_store_as_admitting_once(batch: list[tuple[int, str]], split: int) -> None:
    """Two Store objects (two connections) on one file admit overlapping batches concurrently: every identity is
    stored once with the first content admitted, every repeat is a duplicate or a conflict, never a second row."""
    async def main(path: Path) -> None:
        clock = ManualClock(START)
        a = await SqliteStore.open(path, clock, capacity=100)
        b = await SqliteStore.open(path, clock, capacity=100)
        try:
            occs = [Occurrence(f"tg:1:{n}", "tg:1", text) for n, text in batch]
            first, second = occs, occs[split % len(occs):] + occs[:split % len(occs)]
            ra, rb = await asyncio.gather(a.admit_many(first), b.admit_many(second))
            outcomes = ra + rb
            conn = sqlite3.connect(str(path))
            try:
                rows = dict(conn.execute("SELECT source, payload FROM work").fetchall())
            finally:
                conn.close()
            assert sorted(rows) == sorted({o.source for o in occs})
            assert sum(r.outcome is Admission.ACCEPTED for r in outcomes) == len(rows)
            for occ, result in zip(first + second, outcomes):
                assert result.outcome in (Admission.ACCEPTED, Admission.DUPLICATE, Admission.CONFLICT)
                assert (result.outcome is Admission.CONFLICT) == (rows[occ.source] != occ.payload)
            assert invariants.check(path) == []
        finally:
            await a.close()
            await b.close()

    tmp = Path(tempfile.mkdtemp(prefix="shopbot-c1-"))
    try:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(main(tmp / "shop.sqlite3"))
        finally:
            loop.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
