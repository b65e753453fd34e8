"""Claims as leases on PostgreSQL (C15): the lease judged by the database clock, renewal never reviving a lapsed
lease, the fence on every write of a run, the sweep of expired leases by C10's rule, the unique open-run index as
T2's backstop, and K13 (the sweeper and the lease's owner at once: exactly one commits), each beside a negative
control. Waits are on the database clock (`clock_timestamp() > lease_expires_at`), never sleeps that hope."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from store import ManualClock, NotClaimed, Occurrence, Renewal, ReportDraft, StoreError, WorkKind, open_store
from store.postgres import PostgresStore, guards
from store.shared import inbox

LEASE_S = 0.6
NOW = "2027-03-01T09:00:00.000000Z"


@pytest.fixture
async def pg(pg_url: str, clock: ManualClock) -> AsyncIterator[PostgresStore]:
    store = await open_store(pg_url, clock, capacity=10, debounce_ms=0, attempt_cap=2, lease_s=LEASE_S)
    assert isinstance(store, PostgresStore)
    try:
        yield store
    finally:
        await store.close()


def occurrence(i: int, session: str = "tg:1") -> Occurrence:
    return Occurrence(f"{session}:{i}", session, f"message {i}", WorkKind.AGENT, session)


async def _waiting_on_a_lock(url: str, owner: Any, timeout: float = 10.0) -> None:
    """Until a backend of the test's database waits for a row lock (or the owner's transaction already ended)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not owner.done() and query(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                          "AND wait_event_type = 'Lock'") == [(0,)]:
        assert loop.time() < deadline, "the owner never reached the run's row lock"
        await asyncio.sleep(0.01)


def query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]  # type: ignore[arg-type]


async def expired(url: str, run_id: str, timeout: float = 10.0) -> None:
    """Wait until the run's lease has expired by the database clock (polled with a deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if query(url, "SELECT clock_timestamp() > lease_expires_at FROM runs WHERE run_id = %s", run_id) == [(True,)]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the lease of {run_id} did not expire within {timeout} s")


async def test_a_claim_is_a_lease_on_the_database_clock_renewed_while_live_never_revived(pg, pg_url):
    await pg.admit(occurrence(1))
    claim = await pg.claim("w1")
    (left,) = query(pg_url, "SELECT extract(epoch FROM lease_expires_at - clock_timestamp()) FROM runs")[0]
    assert 0 < float(left) <= LEASE_S
    assert await pg.renew(claim) is Renewal.HELD
    await expired(pg_url, claim.run_id)
    assert await pg.renew(claim) is Renewal.LAPSED         # a lapsed lease is never revived
    assert query(pg_url, "SELECT clock_timestamp() > lease_expires_at, ended_at FROM runs") == [(True, None)]


async def test_every_write_of_a_run_whose_lease_lapsed_is_refused_and_writes_nothing(pg, pg_url):
    await pg.admit(occurrence(1))
    claim = await pg.claim("w1")
    await pg.op_started(claim.run_id, "c1", "get_item", {"item": "vanilla"}, "read")   # live: written
    await expired(pg_url, claim.run_id)
    writes = [
        pg.op_started(claim.run_id, "c2", "get_item", {}, "read"),
        pg.op_finished(claim.run_id, "c1", "done", {}),
        pg.record_draft(claim.run_id, "vanilla", 1),
        pg.finish(claim, ReportDraft("late", destination="tg:1"), user_text="message 1"),
        pg.fail(claim, ReportDraft("late failure", destination="tg:1", is_error=True)),
        pg.release(claim, delay_seconds=0, reason="late"),
    ]
    for write in writes:
        with pytest.raises(NotClaimed):
            await write
    assert query(pg_url, "SELECT count(*) FROM reports") == [(0,)]
    assert query(pg_url, "SELECT count(*) FROM history") == [(0,)]
    assert query(pg_url, "SELECT call_id, status FROM operations") == [("c1", "started")]
    assert query(pg_url, "SELECT state FROM work") == [("running",)]


async def test_without_the_lease_condition_a_late_finish_is_written(pg, pg_url, monkeypatch):
    """Negative control of the fence: with `FENCE` stripped of its lease condition (the run open and held, as
    SQLite's `_held` alone judges it), a finish after the lease lapsed commits."""
    monkeypatch.setattr(guards, "FENCE", guards.FENCE.replace("AND lease_expires_at > clock_timestamp() ", ""))
    await pg.admit(occurrence(1))
    claim = await pg.claim("w1")
    await expired(pg_url, claim.run_id)
    await pg.finish(claim, ReportDraft("late", destination="tg:1"))
    assert query(pg_url, "SELECT outcome, clock_timestamp() > lease_expires_at FROM runs") == [("finished", True)]


async def test_the_sweep_recovers_only_expired_leases_by_c10_and_c9(pg, pg_url, clock):
    from bot.shop_file import load_shop
    from tests.support import ROOT
    await pg.seed_shop(load_shop(ROOT / "shop.example.toml").items, "test")
    for session in ("tg:1", "tg:2", "tg:3"):
        await pg.admit(occurrence(1, session))
    store_only = await pg.claim("w1")
    proposing = await pg.claim("w1")
    await pg.op_started(store_only.run_id, "c1", "get_item", {"item": "vanilla"}, "read")
    await pg.op_finished(store_only.run_id, "c1", "done", {"on_hand": 2})
    await pg.op_started(proposing.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    await expired(pg_url, proposing.run_id)
    live = await pg.claim("w2")                            # claimed after the others expired: its lease is live
    summary = await pg.sweep_expired()
    assert summary.released == (store_only.items[0].work_id,)
    # an external operation that started and never finished counts as having acted: failed, visibly
    assert summary.failed == (proposing.items[0].work_id,)
    assert query(pg_url, "SELECT session, state FROM work ORDER BY work_id") == [
        ("tg:1", "pending"), ("tg:2", "failed"), ("tg:3", "running")]
    outcomes = dict(query(pg_url, "SELECT run_id, outcome FROM runs"))
    assert outcomes == {store_only.run_id: "expired", proposing.run_id: "expired", live.run_id: None}
    assert "propose_order" in query(pg_url, "SELECT body FROM reports")[0][0]
    assert await pg.renew(live) is Renewal.HELD and (await pg.sweep_expired()).released == ()
    assert await pg.renew(store_only) is Renewal.LAPSED    # ended by a sweep: lost, not ended by its own write
    # C9: the released turn is claimed again (attempt 2 = the cap); expired again, it fails at the cap
    again = await pg.claim("w3")
    assert again is not None and again.attempt == 2
    await expired(pg_url, again.run_id)
    assert (await pg.sweep_expired()).failed == (store_only.items[0].work_id,)
    assert query(pg_url, "SELECT state FROM work WHERE session = 'tg:1'") == [("failed",)]
    assert await pg.check() == []


async def test_a_planted_second_open_run_of_a_session_is_refused_by_the_unique_index(pg_fresh_url):
    """A database of its own: the negative control drops the index."""
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        conn.execute("INSERT INTO work (source, session, kind, payload, admitted_at) "
                     "VALUES ('t:1', 's', 'agent', 'x', %s)", (NOW,))
        insert = ("INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at) "
                  "VALUES (%s, 'w', 's', 1, 1, 0, %s)")
        conn.execute(insert, ("a", NOW))
        with pytest.raises(psycopg.errors.UniqueViolation, match="runs_one_open_per_session"):
            conn.execute(insert, ("b", NOW))
        conn.execute("DROP INDEX runs_one_open_per_session")          # negative control: without it, both get in
        conn.execute(insert, ("b", NOW))
        assert conn.execute("SELECT count(*) FROM runs WHERE ended_at IS NULL").fetchone()[0] == 2


async def test_a_claim_that_meets_an_open_run_of_its_session_takes_another_session_never_crashes(pg, pg_url):
    for session in ("tg:1", "tg:2"):
        await pg.admit(occurrence(1, session))
    with psycopg.connect(pg_url, autocommit=True) as conn:      # an open run of tg:1 that holds no item (planted)
        conn.execute("INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at) "
                     "VALUES ('planted', 'w', 'tg:1', 1, 1, 0, %s)", (NOW,))
    claim = await pg.claim("w1")
    assert claim is not None and claim.session == "tg:2"
    assert await pg.claim("w1") is None                          # tg:1 is busy: none, and nothing changed
    assert query(pg_url, "SELECT session, state FROM work ORDER BY work_id") == [("tg:1", "pending"),
                                                                                  ("tg:2", "running")]


async def test_two_connections_claiming_at_once_never_share_a_session(pg, pg_url):
    for session in ("tg:1", "tg:2"):
        for i in (1, 2):
            await pg.admit(occurrence(i, session))

    def claims(i: int) -> list[str]:
        got = []
        while True:
            claim = pg.db.run_write(guards.claim, f"w{i}", f"run-{i}-{len(got)}", NOW, NOW)
            if claim is None:
                return got
            got.append(claim.session)
    with ThreadPoolExecutor(4) as pool:
        taken = [s for sessions in pool.map(claims, range(4)) for s in sessions]
    assert sorted(taken) == ["tg:1", "tg:2"]
    assert query(pg_url, "SELECT session, count(DISTINCT run_id) FROM work WHERE state = 'running' "
                         "GROUP BY session ORDER BY session") == [("tg:1", 1), ("tg:2", 1)]


# ---- K13: the sweeper and the owner of a lease at once ---------------------------------------------------------
def outcome(fn: Any) -> Any:
    """What `fn()` returned, or the store error it raised."""
    try:
        return fn()
    except StoreError as exc:
        return exc


def _pausing(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, reached: threading.Event,
             go: threading.Event) -> None:
    """`module.name` signals `reached` once it returned, then waits for `go` (inside its transaction)."""
    original = getattr(module, name)

    def paused(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        reached.set()
        go.wait(10)
        return result
    monkeypatch.setattr(module, name, paused)


async def _k13(pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, first: str) -> tuple[Any, Any]:
    await pg.admit(occurrence(1))
    claim = await pg.claim("w1")
    reached, go = threading.Event(), threading.Event()
    now = pg.now()
    finish = lambda: pg.db.run_write(lambda conn: pg._finish(conn, claim, ReportDraft("answer", destination="tg:1"),  # noqa: E731
                                                             now))
    sweep = lambda: pg.db.run_write(guards.sweep_one, now, pg.attempt_cap)  # noqa: E731

    with ThreadPoolExecutor(2) as pool:
        if first == "owner":
            # the owner passed its fence while the lease was live and holds the run's row; the lease then lapses
            _pausing(monkeypatch, guards, "hold_epoch", reached, go)
            owner = pool.submit(outcome, finish)
            assert await asyncio.to_thread(reached.wait, 10)
            await expired(pg_url, claim.run_id)
            swept = await asyncio.to_thread(outcome, sweep)       # SKIP LOCKED: the run is not the sweeper's
            go.set()
            return owner.result(10), swept
        # the lease lapsed; the sweeper selected the run (and holds its row) while the owner enters its finish
        await expired(pg_url, claim.run_id)
        _pausing(monkeypatch, guards, "hold_epoch", reached, go)
        sweeper = pool.submit(outcome, sweep)
        assert await asyncio.to_thread(reached.wait, 10)
        owner = outcome(finish)                                  # its lease lapsed: refused at once, nothing written
        go.set()
        return owner, sweeper.result(10)


async def test_k13_the_owner_locked_first_its_finish_commits_and_the_sweep_skips_it(pg, pg_url, monkeypatch):
    owner, swept = await _k13(pg, pg_url, monkeypatch, "owner")
    assert owner.report_id == "r1.1" and swept is None
    assert query(pg_url, "SELECT outcome FROM runs") == [("finished",)]
    assert query(pg_url, "SELECT state FROM work") == [("finished",)]


async def test_k13_the_sweeper_locked_first_the_expiry_commits_and_the_finish_is_refused(pg, pg_url, monkeypatch):
    owner, swept = await _k13(pg, pg_url, monkeypatch, "sweeper")
    assert isinstance(owner, NotClaimed) and swept == (True, [1])
    assert query(pg_url, "SELECT outcome FROM runs") == [("expired",)]
    assert query(pg_url, "SELECT state FROM work") == [("pending",)]
    assert query(pg_url, "SELECT count(*) FROM reports") == [(0,)]


async def test_k13_negative_control_an_unfenced_finish_and_the_sweep_do_not_serialise(pg, pg_url, monkeypatch):
    """SQLite's guard alone (`_held`: the items still running under the run) takes no lock on the run: the sweeper
    holding the expired run does not stop the owner's finish from starting its writes, and the two transactions
    collide on each other's rows instead of one waiting for the other (a deadlock the server breaks by aborting one,
    or a refused transition): never the clean "one commits, the other is refused" of the fence."""
    owner, swept = await _k13_unfenced(pg, pg_url, monkeypatch)
    assert isinstance(owner, StoreError) or isinstance(swept, StoreError)
    assert not isinstance(owner, NotClaimed)


async def _k13_unfenced(pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    await pg.admit(occurrence(1))
    claim = await pg.claim("w1")
    await expired(pg_url, claim.run_id)
    reached, go = threading.Event(), threading.Event()
    _pausing(monkeypatch, guards, "hold_epoch", reached, go)   # the sweeper, after it selected and locked the run
    now = pg.now()

    with ThreadPoolExecutor(2) as pool:
        sweeper = pool.submit(outcome, lambda: pg.db.run_write(guards.sweep_one, now, pg.attempt_cap))
        assert await asyncio.to_thread(reached.wait, 10)
        owner = pool.submit(outcome, lambda: pg.db.run_write(       # unfenced: it writes the items, then waits on the
            lambda conn: inbox.finish(conn, claim, ReportDraft("answer", destination="tg:1"), now)))  # run's row
        await _waiting_on_a_lock(pg_url, owner)                   # the owner blocked on the sweeper's run row
        go.set()                                                  # the sweeper now needs the owner's work rows
        return owner.result(15), sweeper.result(15)
