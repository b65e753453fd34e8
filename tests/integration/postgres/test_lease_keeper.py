"""The worker's lease keeper (C15, `Worker._keep_lease`) at the moment a turn ends, on a real PostgreSQL store and
worker: a renewal refused because the turn's own finish has just committed (the turn not resumed yet), and a renewal
that times out while the finish is in flight in the connection's thread (its transaction holding the run's row).
Neither cancels the turn: the next turn its finish claimed in the same commit comes back and runs at once, never left
to expire and run again with one more attempt. Each beside its negative control, the keeper as it was: it cancels
the turn, reports it lost though its finish committed, and the next claim sits running with no turn behind it.

The moments are made, not hoped for: the turn is held right after its finish returned (the store's `finish`
wrapped) or inside the finish's transaction (the fault point `finish-writes`) until the keeper's own renewal has
answered or run past its bound."""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from store import (
    Claim,
    FinishOutcome,
    ManualClock,
    Occurrence,
    Renewal,
    ReportDraft,
    StoreError,
    WorkKind,
    faults,
    open_store,
)
from store.postgres import PostgresStore
from tests.integration.postgres.test_leases import _waiting_on_a_lock, expired, query
from worker.models.base import ModelTurn
from worker.models.scripted import ScriptedModel
from worker.worker import Worker

LEASE_S = 3.0     # renewed every second, each renewal bounded by a second: room for a loaded machine
WAIT_S = 20.0


@pytest.fixture
async def pg(pg_url: str, clock: ManualClock) -> AsyncIterator[PostgresStore]:
    store = await open_store(pg_url, clock, capacity=10, debounce_ms=0, attempt_cap=3, lease_s=LEASE_S)
    assert isinstance(store, PostgresStore)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def worker_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="shopbot.worker")
    return caplog


class Renewals:
    """The store's own `renew`, watched: every answer, and every renewal the keeper's bound cut short."""

    def __init__(self, store: PostgresStore) -> None:
        self.answers: list[Renewal] = []
        self.cut_short = 0
        self._changed = asyncio.Event()
        real = store.renew

        async def renew(claim: Claim) -> Renewal:
            try:
                answer = await real(claim)
            except asyncio.CancelledError:
                self.cut_short += 1
                self._changed.set()
                raise
            self.answers.append(answer)
            self._changed.set()
            return answer
        store.renew = renew  # type: ignore[method-assign]

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not done():
                self._changed.clear()
                await self._changed.wait()


async def two_turns(store: PostgresStore) -> tuple[Worker, Claim]:
    """Two sessions waiting, the first claimed; its finish will claim the second in the same commit."""
    for session in ("tg:1", "tg:2"):
        await store.admit(Occurrence(f"{session}:1", session, "how much vanilla", WorkKind.AGENT, session))
    first = await store.claim("worker-1")
    assert first is not None and first.session == "tg:1"
    return Worker(store, ScriptedModel([ModelTurn("7 tubs", ()), ModelTurn("7 tubs still", ())])), first


def hold_after_finish(store: PostgresStore, first: Claim, renewals: Renewals) -> None:
    """The first finish's answer kept from its turn until a renewal of the run was refused: the moment after its
    commit in which the turn has not resumed yet."""
    real = store.finish

    async def finish(claim: Claim, *args: Any, **kwargs: Any) -> Any:
        outcome = await real(claim, *args, **kwargs)
        if claim.run_id == first.run_id:
            await renewals.until(lambda: any(a is not Renewal.HELD for a in renewals.answers))
        return outcome
    store.finish = finish  # type: ignore[method-assign]


def hold_inside_finish(monkeypatch: pytest.MonkeyPatch, *, roll_back: bool = False
                       ) -> tuple[asyncio.Event, threading.Event]:
    """The first finish stopped inside its transaction (fault point `finish-writes`: its fence passed, the run's row
    locked) until `go` is set, then on to its commit (or, `roll_back`, raising there as `<point>:raise` would);
    `inside` is set when it got there."""
    inside, go, loop, real = asyncio.Event(), threading.Event(), asyncio.get_running_loop(), faults.reached

    def reached(point: str) -> None:
        if point == "finish-writes" and not go.is_set():
            loop.call_soon_threadsafe(inside.set)
            assert go.wait(WAIT_S), "the test never let the finish go on"
            if roll_back:
                raise faults.FaultInjected(point)
        real(point)
    monkeypatch.setattr(faults, "reached", reached)
    return inside, go


async def run_held_inside(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> tuple[Worker, Claim, Claim | None]:
    """The first turn run with its finish held in its transaction until a renewal of the keeper ran past its bound
    (waiting for the run's row the finish holds), then let go."""
    renewals = Renewals(pg)
    inside, go = hold_inside_finish(monkeypatch)
    worker, first = await two_turns(pg)
    turn = asyncio.ensure_future(worker.run_turn(first))
    async with asyncio.timeout(WAIT_S):
        await inside.wait()
    await renewals.until(lambda: renewals.cut_short > 0)    # the keeper has decided by now
    go.set()
    return worker, first, await turn


@pytest.mark.parametrize("roll_back", [False, True])
async def test_a_renewal_waiting_on_the_row_of_a_finish_in_flight_reads_how_it_ended(
        pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, roll_back: bool):
    """The store alone: a renewal's UPDATE waits for the run's row a finish in flight holds, and its answer is read
    after, in its own transaction: ENDED once that finish committed; HELD when it rolled back (the control: not
    said because a finish was under way)."""
    inside, go = hold_inside_finish(monkeypatch, roll_back=roll_back)
    await pg.admit(Occurrence("tg:1:1", "tg:1", "how much vanilla", WorkKind.AGENT, "tg:1"))
    claim = await pg.claim("worker-1")
    assert claim is not None and not pg.ending(claim)
    finishing = asyncio.ensure_future(pg.finish(claim, ReportDraft("7 tubs", destination="tg:1")))
    async with asyncio.timeout(WAIT_S):
        await inside.wait()
    assert pg.ending(claim)
    renewing = asyncio.ensure_future(pg.renew(claim))
    await _waiting_on_a_lock(pg_url, renewing)
    go.set()
    assert await renewing is (Renewal.HELD if roll_back else Renewal.ENDED)
    (ended,) = await asyncio.gather(finishing, return_exceptions=True)
    assert isinstance(ended, faults.FaultInjected if roll_back else FinishOutcome)
    assert not pg.ending(claim)


async def test_a_renewal_refused_because_the_finish_just_committed_leaves_the_turn_its_next_claim(
        pg: PostgresStore, pg_url: str, worker_log: pytest.LogCaptureFixture):
    renewals = Renewals(pg)
    worker, first = await two_turns(pg)
    hold_after_finish(pg, first, renewals)
    following = await worker.run_turn(first)
    assert renewals.answers[-1] is Renewal.ENDED
    await the_next_claim_runs_at_once(worker, first, following, pg_url, worker_log)


async def test_a_renewal_timed_out_while_the_finish_is_in_flight_leaves_the_turn_its_next_claim(
        pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, worker_log: pytest.LogCaptureFixture):
    worker, first, following = await run_held_inside(pg, monkeypatch)
    await the_next_claim_runs_at_once(worker, first, following, pg_url, worker_log)


async def the_next_claim_runs_at_once(worker: Worker, first: Claim, following: Claim | None, pg_url: str,
                                      worker_log: pytest.LogCaptureFixture) -> None:
    assert following is not None and following.session == "tg:2", "the next claim its finish took was dropped"
    assert f"turn finished run_id={first.run_id}" in worker_log.text and "lease lost" not in worker_log.text
    assert await worker.run_turn(following) is None
    assert query(pg_url, "SELECT session, state, attempts FROM work ORDER BY work_id") == [
        ("tg:1", "finished", 1), ("tg:2", "finished", 1)]            # each ran once: none waited for expiry
    assert query(pg_url, "SELECT outcome, count(*) FROM runs GROUP BY outcome") == [("finished", 2)]


# ---- negative controls: the keeper as it was ------------------------------------------------------------------
async def former_keep_lease(self: Worker, claim: Claim, turn: asyncio.Task[Claim | None], lease: float) -> None:
    """`Worker._keep_lease` before this fix: any renewal not held (the store answered False for a run that had
    ended as for one whose lease lapsed), timed out or failed counted as lost."""
    period = lease / 3
    while not turn.done():
        await asyncio.sleep(period)
        try:
            async with asyncio.timeout(period):
                held = await self.store.renew(claim) is Renewal.HELD
            why = "" if held else "the lease had lapsed"
        except TimeoutError:
            held, why = False, f"the renewal took longer than {period:.2f} s"
        except StoreError as exc:
            held, why = False, f"the renewal failed ({type(exc).__name__})"
        if not held:
            if turn.done():
                return
            self._lost.add(claim.run_id)
            logging.getLogger("shopbot.worker").error(
                "lease lost run_id=%s: %s; the turn is abandoned and nothing of it is written", claim.run_id, why)
            turn.cancel()
            return


async def test_negative_control_the_former_keeper_cancels_a_turn_whose_finish_just_committed(
        pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, worker_log: pytest.LogCaptureFixture):
    monkeypatch.setattr(Worker, "_keep_lease", former_keep_lease)
    renewals = Renewals(pg)
    worker, first = await two_turns(pg)
    hold_after_finish(pg, first, renewals)
    assert await worker.run_turn(first) is None
    await the_next_claim_was_dropped(pg, first, pg_url, worker_log)


async def test_negative_control_the_former_keeper_cancels_a_turn_whose_finish_is_in_flight(
        pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, worker_log: pytest.LogCaptureFixture):
    monkeypatch.setattr(Worker, "_keep_lease", former_keep_lease)
    worker, first, following = await run_held_inside(pg, monkeypatch)
    assert following is None
    async with asyncio.timeout(WAIT_S):     # the finish goes on in the connection's thread: it commits all the same
        while query(pg_url, "SELECT outcome FROM runs WHERE run_id = %s", first.run_id) != [("finished",)]:
            await asyncio.sleep(0.02)
    await the_next_claim_was_dropped(pg, first, pg_url, worker_log)


async def the_next_claim_was_dropped(pg: PostgresStore, first: Claim, pg_url: str,
                                     worker_log: pytest.LogCaptureFixture) -> None:
    """Reported lost, yet its finish committed and claimed the next turn, which no turn runs: it waits for its lease
    to lapse and the sweep, and runs again with one more attempt."""
    assert f"lease lost run_id={first.run_id}" in worker_log.text
    assert f"turn finished run_id={first.run_id}" not in worker_log.text
    assert query(pg_url, "SELECT session, state, attempts FROM work ORDER BY work_id") == [
        ("tg:1", "finished", 1), ("tg:2", "running", 1)]
    (dropped,) = query(pg_url, "SELECT run_id FROM runs WHERE ended_at IS NULL")[0]
    await expired(pg_url, dropped, timeout=WAIT_S)
    assert len((await pg.sweep_expired()).released) == 1
    again = await pg.claim("worker-1")
    assert again is not None and again.session == "tg:2" and again.attempt == 2
