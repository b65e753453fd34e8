"""The PostgreSQL guards against concurrent connections (store/postgres/guards.py).

SQLite's single writer makes each check-then-act safe; on PostgreSQL two READ COMMITTED transactions may both read,
then both write. Each test opens the race on purpose: every transaction waits at a barrier right after its check,
so all checks run before any write. With the guard the transactions serialise (the barrier is never full; each
waits out its short timeout alone) and the contract holds; the same race run with SQLite's unguarded statement on
the same database breaks it, which shows the guard is what holds it."""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from store import Admission, DecisionKind, IllegalTransition, Occurrence, ReportDraft, StoreError, WorkKind
from store.postgres import PostgresStore, guards
from store.postgres.connection import PgConnection
from store.shared import actions, inbox, outbox

NOW = "2027-03-01T09:00:00.000000Z"
BARRIER_WAIT_S = 0.5


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
    barrier_after(monkeypatch, inbox, "kept_open_agent_work", 8)
    results = race(pg, 8, lambda conn, i: guards.admit(conn, occurrence(i), NOW, 3))
    assert sorted(r.outcome.value for r in results) == ["accepted"] * 3 + ["refused"] * 5
    assert (await pg.status()).agent_work.pending == 3


async def test_without_the_admission_lock_eight_admitters_overfill_the_queue(pg, monkeypatch):
    barrier_after(monkeypatch, inbox, "kept_open_agent_work", 8)
    results = race(pg, 8, lambda conn, i: inbox.admit(conn, occurrence(i), NOW, 3))
    assert [r.outcome for r in results].count(Admission.ACCEPTED) > 3      # the race the guard closes


async def test_check_catches_a_kept_open_work_count_that_drifted(pg):
    """W1's negative control on PostgreSQL (SQLite's is in tests/integration/sqlite/test_invariants.py)."""
    assert (await pg.admit(occurrence(1))).outcome is Admission.ACCEPTED
    assert await pg.check() == []
    pg.db.run_write(lambda conn: conn.execute("UPDATE open_agent_tally SET n = n - 1 WHERE slot = 3"))
    assert [v.rule for v in await pg.check()] == ["W1"]


async def test_two_connections_admitting_one_identity_give_one_accepted_and_one_duplicate(pg, monkeypatch):
    barrier_after(monkeypatch, guards, "_existing", 2)
    results = race(pg, 2, lambda conn, i: guards.admit(conn, occurrence(7), NOW, 3))
    assert sorted(r.outcome.value for r in results) == ["accepted", "duplicate"]
    assert results[0].work_id == results[1].work_id


async def test_without_on_conflict_the_second_admission_of_one_identity_is_an_error(pg, monkeypatch):
    barrier_after(monkeypatch, inbox, "kept_open_agent_work", 2)
    results = race(pg, 2, lambda conn, i: inbox.admit(conn, occurrence(7), NOW, 3))
    assert any(isinstance(r, StoreError) for r in results)                  # a unique violation, not "duplicate"


def _two_proposals(conn: Any) -> list[int]:
    for item in ("milk", "eggs"):
        conn.execute("INSERT INTO items (item, unit, on_hand, reorder_point, target, unit_cost_cents, updated_at) "
                     "VALUES ($1, 'unit', 1, 2, 10, 60, $2)", (item, NOW))
    conn.execute("INSERT INTO work (source, session, kind, payload, admitted_at) VALUES ('t:1', 't', 'agent', '', $1)",
                 (NOW,))
    conn.execute("INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at) "
                 "VALUES ('run1', 'w', 't', 1, 1, 0, $1)", (NOW,))
    return [conn.execute(
        "INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, created_at, "
        "updated_at) VALUES ('run1', 'dairy', $1, 1, 60, 60, 'awaiting_approval', $2, $2) RETURNING proposal_id",
        (item, NOW)).fetchone()[0] for item in ("milk", "eggs")]


def _approve_both(pg: PostgresStore, approve: Callable[..., Any]) -> list[Any]:
    ids = pg.db.run_write(_two_proposals)
    return race(pg, 2, lambda conn, i: approve(conn, ids[i], "owner", NOW, "2027-03-01", 100, "supplier:dairy"))


async def test_two_approvals_that_fit_the_daily_limit_only_one_at_a_time_approve_one(pg, monkeypatch):
    barrier_after(monkeypatch, actions, "reserved_on", 2)
    results = _approve_both(pg, guards.approve)
    assert sorted(r.ok for r in results) == [False, True]
    assert [r for r in results if not r.ok][0].kind is DecisionKind.OVER_DAY_LIMIT


async def test_without_the_spending_lock_both_approvals_pass_the_daily_limit(pg, monkeypatch):
    barrier_after(monkeypatch, actions, "reserved_on", 2)
    results = _approve_both(pg, actions.approve)
    assert [r.ok for r in results] == [True, True]                          # 120 cents approved against 100


# ---- races at a statement: a transaction pauses just before a named statement ---------------------------------
def pause_before(monkeypatch: pytest.MonkeyPatch, statement: str, wait: Callable[[], None]) -> None:
    """Every transaction calls `wait()` just before executing a statement that starts with `statement`."""
    original = PgConnection.execute

    def execute(self: PgConnection, sql: str, params: Any = ()) -> Any:
        if sql.startswith(statement):
            wait()
        return original(self, sql, params)
    monkeypatch.setattr(PgConnection, "execute", execute)


def barrier_wait(barrier: threading.Barrier) -> Callable[[], None]:
    def wait() -> None:
        try:
            barrier.wait(BARRIER_WAIT_S)
        except threading.BrokenBarrierError:
            pass
    return wait


def _pending(pg: PostgresStore, *sources: str) -> None:
    for source in sources:
        pg.db.run_write(lambda conn, s=source: guards.admit(conn, Occurrence(s, "tg:1", s, WorkKind.AGENT, "tg:1"),
                                                            NOW, 10))


async def test_two_workers_claiming_at_once_take_one_turn_between_them(pg, monkeypatch):
    _pending(pg, "tg:1:1", "tg:1:2")
    pause_before(monkeypatch, "UPDATE work SET state = 'running'", barrier_wait(threading.Barrier(2)))
    results = race(pg, 2, lambda conn, i: guards.claim(conn, f"w{i}", f"run{i}", NOW, NOW))
    claims = [r for r in results if r is not None]
    assert len(claims) == 1 and [item.source for item in claims[0].items] == ["tg:1:1", "tg:1:2"]


async def test_without_skip_locked_the_second_claimer_of_a_session_breaks(pg, monkeypatch):
    _pending(pg, "tg:1:1", "tg:1:2")
    pause_before(monkeypatch, "UPDATE work SET state = 'running'", barrier_wait(threading.Barrier(2)))
    with pytest.raises(ValueError):         # it moved no rows: its "turn" has no items
        race(pg, 2, lambda conn, i: inbox.claim(conn, f"w{i}", f"run{i}", NOW, NOW))


def _resolve_race(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch, resolve: Callable[..., Any]) -> list[Any]:
    _pending(pg, "tg:1:1")
    claim = pg.db.run_write(lambda conn: guards.claim(conn, "w", "run", NOW, NOW))
    pg.db.run_write(lambda conn: inbox.finish(conn, claim, ReportDraft("hi", destination="tg:1"), NOW))
    for move in (outbox.mark_sending, outbox.mark_unknown):
        pg.db.run_write(lambda conn, m=move: m(conn, 1, *(("lost",) if m is outbox.mark_unknown else ()), NOW))
    pause_before(monkeypatch, "INSERT INTO resolutions", barrier_wait(threading.Barrier(2)))
    return race(pg, 2, lambda conn, i: resolve(conn, "r1.1", "resend", f"owner {i}", NOW))


async def test_two_resend_decisions_at_once_resend_the_part_once(pg, monkeypatch):
    from store.postgres.store import _resolve
    results = _resolve_race(pg, monkeypatch, _resolve)
    assert sum(isinstance(r, IllegalTransition) for r in results) == 1
    assert pg.db.run_write(lambda conn: conn.execute("SELECT resends FROM deliveries").fetchone()[0]) == 1


async def test_without_the_lock_two_resend_decisions_count_two_resends(pg, monkeypatch):
    _resolve_race(pg, monkeypatch, outbox.resolve)
    assert pg.db.run_write(lambda conn: conn.execute("SELECT resends FROM deliveries").fetchone()[0]) == 2


def _forget_during_finish(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch, finish: Callable[..., Any],
                          forget: Callable[..., Any]) -> list[Any]:
    """The finish pauses before writing history until the forget has committed (at most 1 s); the forget starts once
    the finish has read the epoch."""
    _pending(pg, "tg:1:1")
    claim = pg.db.run_write(lambda conn: guards.claim(conn, "w", "run", NOW, NOW))
    finish_ready, forget_done = threading.Event(), threading.Event()

    def wait() -> None:
        finish_ready.set()
        forget_done.wait(1.0)
    pause_before(monkeypatch, "INSERT INTO history", wait)

    def body(conn: Any, i: int) -> Any:
        if i == 0:
            return finish(conn, claim, ReportDraft("answer", destination="tg:1"), NOW, user_text="question")
        finish_ready.wait(5.0)
        return forget(conn, "tg:1", "owner", NOW)

    def one(i: int) -> Any:
        result = pg.db.run_write(body, i)
        if i == 1:
            forget_done.set()
        return result
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(2)))


def _history(pg: PostgresStore) -> list[Any]:
    return pg.db.run_write(lambda conn: conn.execute("SELECT role FROM history").fetchall())


async def test_a_forget_during_a_finish_leaves_no_history_c12(pg, monkeypatch):
    from store.postgres.store import _finish, _forget
    _forget_during_finish(pg, monkeypatch, _finish, _forget)
    assert _history(pg) == []


async def test_without_the_epoch_share_lock_a_forgotten_conversation_keeps_its_history(pg, monkeypatch):
    _forget_during_finish(pg, monkeypatch, inbox.finish, inbox.forget)
    assert len(_history(pg)) == 2                 # written after the forget committed: C12 broken


def _notice(conn: Any, i: int, admit_answered: Callable[..., Any]) -> Any:
    occ = Occurrence("notice:restart:1", "notice:restart", "restarted", WorkKind.NOTICE, "tg:1")
    return admit_answered(conn, occ, NOW, lambda work_id: ReportDraft("restarted", destination="tg:1"))


async def test_one_notice_admitted_by_two_connections_at_once_is_one_accepted_and_one_duplicate(pg, monkeypatch):
    pause_before(monkeypatch, "INSERT INTO work", barrier_wait(threading.Barrier(2)))
    results = race(pg, 2, lambda conn, i: _notice(conn, i, guards.admit_answered))
    assert sorted(r.outcome.value for r in results) == ["accepted", "duplicate"]


async def test_without_the_identity_lock_the_second_notice_is_an_error(pg, monkeypatch):
    pause_before(monkeypatch, "INSERT INTO work", barrier_wait(threading.Barrier(2)))
    results = race(pg, 2, lambda conn, i: _notice(conn, i, inbox.admit_answered))
    assert any(isinstance(r, StoreError) for r in results)


def _advance_cursor(producer_state: type, conn: Any, i: int) -> None:
    """A producer's step: read the schedule's cursor, then move it on by i+1 hours."""
    from datetime import timedelta
    state = producer_state(conn, NOW)
    cursor, _ = state.get_cursor("daily")
    state.set_cursor("daily", cursor + timedelta(hours=i + 1), None)


def _cursor_race(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch, producer_state: type) -> Any:
    from datetime import UTC, datetime
    pg.db.run_write(lambda conn: producer_state(conn, NOW).set_cursor("daily", datetime(2027, 3, 1, tzinfo=UTC),
                                                                       None))
    pause_before(monkeypatch, "INSERT INTO schedule_cursors", barrier_wait(threading.Barrier(2)))
    race(pg, 2, lambda conn, i: _advance_cursor(producer_state, conn, i))
    return pg.db.run_write(lambda conn: producer_state(conn, NOW).get_cursor("daily"))[0]


async def test_two_producers_moving_one_cursor_at_once_both_count(pg, monkeypatch):
    assert _cursor_race(pg, monkeypatch, guards.ProducerState).hour == 3      # 1 h then 2 h, in turn


async def test_without_the_cursor_lock_one_producer_step_is_lost(pg, monkeypatch):
    from store.shared.producer_state import ProducerState
    assert _cursor_race(pg, monkeypatch, ProducerState).hour in (1, 2)        # both moved on from the same reading


async def test_generations_are_counted_per_anchor_and_a_generation_taken_twice_is_refused(pg):
    """Report generations (C6) on PostgreSQL since migration 0022 dropped UNIQUE (anchor, generation): counted per
    anchor through report_items, the key r<anchor>.<generation> the alarm. Negative control: a report r1.3 planted
    without its item link is not counted, and the store's own r1.3 is refused by the key, nothing written."""
    for n in (1, 2):
        await pg.admit(Occurrence(f"tg:1:{n}", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    claim = await pg.claim("w1")
    assert claim is not None and [i.work_id for i in claim.items] == [1, 2]
    assert (await pg.finish(claim, ReportDraft("first", destination="tg:1"))).report_id == "r1.1"

    def report(ids: list[int]) -> Callable[[Any], str]:
        return lambda conn: outbox.insert_report(conn, ids, ReportDraft("again"), NOW, run_id=None)
    assert await pg.db.write(report([1, 2])) == "r1.2"
    assert await pg.db.write(report([2])) == "r2.1"          # item 2's other reports are anchored at 1: not counted
    await pg.db.write(lambda conn: conn.execute(
        "INSERT INTO reports (report_id, anchor, generation, body, created_at) VALUES ('r1.3', 1, 3, 'planted', $1)",
        (NOW,)))
    with pytest.raises(StoreError, match="reports_pkey"):
        await pg.db.write(report([1]))
    assert await pg.db.read(lambda conn: conn.execute(
        "SELECT count(*) FROM report_items WHERE report_id = 'r1.3'").fetchone()[0]) == 0
