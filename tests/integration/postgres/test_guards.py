"""The PostgreSQL guards against concurrent connections (store/postgres/guards.py).

SQLite's single writer makes each check-then-act safe; on PostgreSQL two READ COMMITTED transactions may both read,
then both write. Each test opens the race on purpose: every transaction waits at a barrier right after its check,
so all checks run before any write. With the guard the transactions serialise (the barrier is never full; each
waits out its short timeout alone) and the contract holds; the same race run with SQLite's unguarded statement on
the same database breaks it, which shows the guard is what holds it."""
from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from store import Admission, ManualClock, Occurrence, StoreError, WorkKind, open_store
from store.postgres import PostgresStore, guards
from store.sqlite import actions, inbox

NOW = "2027-03-01T09:00:00.000000Z"
BARRIER_WAIT_S = 0.5


@pytest.fixture
async def pg(pg_url: str, clock: ManualClock) -> AsyncIterator[PostgresStore]:
    store = await open_store(pg_url, clock, capacity=3, debounce_ms=0)
    assert isinstance(store, PostgresStore)
    try:
        yield store
    finally:
        await store.close()


def race(store: PostgresStore, n: int, body: Callable[[Any, int], Any]) -> list[Any]:
    """Run `body(conn, i)` in n transactions at once, on n pooled connections; each result or exception."""
    def one(i: int) -> Any:
        try:
            return store.db.run_write(body, i)
        except StoreError as exc:
            return exc
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def barrier_after(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, n: int) -> None:
    """Make `module.name` wait (at most BARRIER_WAIT_S) until n transactions have called it."""
    barrier = threading.Barrier(n)
    original = getattr(module, name)

    def waiting(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            barrier.wait(BARRIER_WAIT_S)
        except threading.BrokenBarrierError:
            pass
        return result
    monkeypatch.setattr(module, name, waiting)


def occurrence(i: int) -> Occurrence:
    return Occurrence(f"tg:{i}:1", f"tg:{i}", "hi", WorkKind.AGENT, f"tg:{i}")


async def test_capacity_holds_under_eight_concurrent_admitting_connections(pg, monkeypatch):
    barrier_after(monkeypatch, inbox, "open_agent_work", 8)
    results = race(pg, 8, lambda conn, i: guards.admit(conn, occurrence(i), NOW, 3))
    assert sorted(r.outcome.value for r in results) == ["accepted"] * 3 + ["refused"] * 5
    assert (await pg.status())["agent_work"]["pending"] == 3


async def test_without_the_admission_lock_eight_admitters_overfill_the_queue(pg, monkeypatch):
    barrier_after(monkeypatch, inbox, "open_agent_work", 8)
    results = race(pg, 8, lambda conn, i: inbox.admit(conn, occurrence(i), NOW, 3))
    assert [r.outcome for r in results].count(Admission.ACCEPTED) > 3      # the race the guard closes


async def test_two_connections_admitting_one_identity_give_one_accepted_and_one_duplicate(pg, monkeypatch):
    barrier_after(monkeypatch, guards, "_existing", 2)
    results = race(pg, 2, lambda conn, i: guards.admit(conn, occurrence(7), NOW, 3))
    assert sorted(r.outcome.value for r in results) == ["accepted", "duplicate"]
    assert results[0].work_id == results[1].work_id


async def test_without_on_conflict_the_second_admission_of_one_identity_is_an_error(pg, monkeypatch):
    barrier_after(monkeypatch, inbox, "open_agent_work", 2)
    results = race(pg, 2, lambda conn, i: inbox.admit(conn, occurrence(7), NOW, 3))
    assert any(isinstance(r, StoreError) for r in results)                  # a unique violation, not "duplicate"


def _two_proposals(conn: Any) -> list[int]:
    conn.execute("INSERT INTO work (source, session, kind, payload, admitted_at) VALUES ('t:1', 't', 'agent', '', ?)",
                 (NOW,))
    conn.execute("INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at) "
                 "VALUES ('run1', 'w', 't', 1, 1, 0, ?)", (NOW,))
    return [conn.execute(
        "INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, created_at, "
        "updated_at) VALUES ('run1', 'dairy', ?, 1, 60, 60, 'awaiting_approval', ?, ?) RETURNING proposal_id",
        (item, NOW, NOW)).fetchone()[0] for item in ("milk", "eggs")]


def _approve_both(pg: PostgresStore, approve: Callable[..., Any]) -> list[Any]:
    ids = pg.db.run_write(_two_proposals)
    return race(pg, 2, lambda conn, i: approve(conn, ids[i], "owner", NOW, "2027-03-01", 100, "supplier:dairy"))


async def test_two_approvals_that_fit_the_daily_limit_only_one_at_a_time_approve_one(pg, monkeypatch):
    barrier_after(monkeypatch, actions, "reserved_on", 2)
    results = _approve_both(pg, guards.approve)
    assert sorted(r.ok for r in results) == [False, True]
    assert [r for r in results if not r.ok][0].text.startswith("Approving #")


async def test_without_the_spending_lock_both_approvals_pass_the_daily_limit(pg, monkeypatch):
    barrier_after(monkeypatch, actions, "reserved_on", 2)
    results = _approve_both(pg, actions.approve)
    assert [r.ok for r in results] == [True, True]                          # 120 cents approved against 100
