"""C1, C4, C5, C6, C9, C12 on a real SQLite file."""
from __future__ import annotations

import sqlite3

import pytest

from store import Admission, NotClaimed, Occurrence, ReportDraft, SqliteStore, WorkKind, faults


def occ(source: str, text: str = "stock", session: str = "tg:1", dest: str | None = "tg:1", kind=WorkKind.AGENT):
    return Occurrence(source, session, text, kind, dest)


async def test_admission_outcomes(store, raw):
    assert (await store.admit(occ("tg:1:1"))).outcome is Admission.ACCEPTED
    assert (await store.admit(occ("tg:1:1"))).outcome is Admission.DUPLICATE
    assert (await store.admit(occ("tg:1:1", "other text"))).outcome is Admission.CONFLICT
    assert (await store.admit(occ("tg:1:1", session="tg:2"))).outcome is Admission.CONFLICT
    # the same text under another identity is another occurrence
    assert (await store.admit(occ("tg:1:2"))).outcome is Admission.ACCEPTED
    rows = raw.execute("SELECT source, payload, state FROM work ORDER BY work_id").fetchall()
    assert [tuple(r) for r in rows] == [("tg:1:1", "stock", "pending"), ("tg:1:2", "stock", "pending")]


async def test_capacity_refuses_without_a_row_and_repeats_are_still_answered(store, raw):
    for i in range(5):
        assert (await store.admit(occ(f"till:1:{i}", session="till:1"))).outcome is Admission.ACCEPTED
    refused = await store.admit(occ("till:1:99", session="till:1"))
    assert refused.outcome is Admission.REFUSED and refused.work_id is None
    assert raw.execute("SELECT count(*) FROM work WHERE source = 'till:1:99'").fetchone()[0] == 0
    assert raw.execute("SELECT sum(count) FROM counters WHERE kind = 'refused_capacity'").fetchone()[0] == 1
    # identity before capacity: a repeat on a full queue is a duplicate, a changed repeat a conflict
    assert (await store.admit(occ("till:1:0", session="till:1"))).outcome is Admission.DUPLICATE
    assert (await store.admit(occ("till:1:0", "x", session="till:1"))).outcome is Admission.CONFLICT
    # control items bypass capacity and finish inside their admission
    result = await store.admit_answered(occ("cb:1", "press", kind=WorkKind.CONTROL),
                                        lambda tx, work_id: ReportDraft("done", destination="tg:1"))
    assert result.outcome is Admission.ACCEPTED and result.report_id == f"r{result.work_id}.1"
    assert raw.execute("SELECT state FROM work WHERE source = 'cb:1'").fetchone()[0] == "finished"


async def test_batch_conflict_does_not_roll_back_the_batch(store, raw):
    await store.admit(occ("tg:1:1"))
    results = await store.admit_many([occ("tg:1:2"), occ("tg:1:1", "changed"), occ("tg:1:3")])
    assert [r.outcome for r in results] == [Admission.ACCEPTED, Admission.CONFLICT, Admission.ACCEPTED]
    assert raw.execute("SELECT count(*) FROM work").fetchone()[0] == 3


@pytest.mark.parametrize("sql", [
    "UPDATE work SET state = 'finished' WHERE work_id = 1",          # pending -> finished
    "UPDATE work SET state = 'running' WHERE work_id = 1",           # agent running without a claim
    "UPDATE work SET payload = 'changed' WHERE work_id = 1",          # an occurrence never changes
    ("INSERT INTO work (source, session, kind, payload, state, admitted_at) "
     "VALUES ('x', 's', 'agent', 'p', 'finished', 'now')"),
])
async def test_database_refuses_illegal_work_moves_from_another_connection(store, raw, sql):
    await store.admit(occ("tg:1:1"))
    with pytest.raises(sqlite3.IntegrityError, match="C[1-9]"):
        raw.execute(sql)


async def test_nothing_leaves_finished_or_failed(store, raw):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("answer", destination="tg:1"))
    for target in ("pending", "running", "failed"):
        with pytest.raises(sqlite3.IntegrityError, match="C4"):
            raw.execute(f"UPDATE work SET state = '{target}' WHERE work_id = 1")
    await store.admit(occ("tg:1:2"))
    raw.execute("UPDATE work SET state = 'failed' WHERE work_id = 2")   # pending -> failed is a legal cancel
    with pytest.raises(sqlite3.IntegrityError, match="C4"):
        raw.execute("UPDATE work SET state = 'pending' WHERE work_id = 2")


async def test_claim_finish_report_and_deliveries(store, raw):
    assert await store.claim("w1") is None   # an empty queue returns no claim
    await store.admit(occ("tg:1:1", "how much vanilla"))
    claim = await store.claim("w1")
    assert [i.work_id for i in claim.items] == [1] and claim.attempt == 1
    row = raw.execute("SELECT state, attempts, worker_id, run_id FROM work").fetchone()
    assert tuple(row) == ("running", 1, "w1", claim.run_id)
    outcome = await store.finish(claim, ReportDraft("vanilla: 2 tubs", destination="tg:1"),
                                 user_text="how much vanilla")
    assert outcome.report_id == "r1.1"
    assert raw.execute("SELECT state FROM work").fetchone()[0] == "finished"
    delivery = raw.execute("SELECT chat_id, text, state FROM deliveries").fetchone()
    assert tuple(delivery) == (1, "vanilla: 2 tubs\n\nr1.1", "pending")
    assert await store.history("tg:1") == [("user", "how much vanilla"), ("assistant", "vanilla: 2 tubs")]


async def test_a_worker_cannot_finish_work_it_did_not_claim(store):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    from dataclasses import replace
    with pytest.raises(NotClaimed):
        await store.finish(replace(claim, worker_id="w2"), ReportDraft("x"))
    with pytest.raises(NotClaimed):
        await store.finish(replace(claim, run_id="other"), ReportDraft("x"))
    await store.finish(claim, ReportDraft("x"))
    with pytest.raises(NotClaimed):   # and not twice
        await store.finish(claim, ReportDraft("y"))


async def test_failure_between_the_writes_of_finish_leaves_neither(store, raw):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")

    faults.arm("finish-writes:raise")      # stopped between finishing the items and writing the report
    try:
        with pytest.raises(faults.FaultInjected):
            await store.finish(claim, ReportDraft("x", destination="tg:1"))
    finally:
        faults.arm("")
    assert raw.execute("SELECT state FROM work").fetchone()[0] == "running"
    assert raw.execute("SELECT count(*) FROM reports").fetchone()[0] == 0
    assert (await store.finish(claim, ReportDraft("x", destination="tg:1"))).report_id == "r1.1"


async def test_report_body_is_immutable_and_generations_are_allocated(store, raw):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("first", destination="tg:1"))
    with pytest.raises(sqlite3.IntegrityError, match="C6"):
        raw.execute("UPDATE reports SET body = 'edited' WHERE report_id = 'r1.1'")
    with pytest.raises(sqlite3.IntegrityError, match="C6"):
        raw.execute("DELETE FROM reports WHERE report_id = 'r1.1'")
    # a later result for the same anchor is a new generation (allocated by the store)
    from store.shared import outbox
    second = await store.db.write(lambda conn: outbox.insert_report(conn, [1], ReportDraft("second"), store.now(),
                                                                     run_id=None))
    assert second == "r1.2"
    assert raw.execute("SELECT body FROM reports WHERE report_id = 'r1.1'").fetchone()[0] == "first"


async def test_generations_are_counted_per_anchor_and_a_generation_taken_twice_is_refused(store, raw):
    """Migration 0022 dropped reports' UNIQUE (anchor, generation): the next generation is read through report_items
    (every report links its anchor item), and the key r<anchor>.<generation> is the alarm. Negative control: a report
    r1.3 planted without its item link is not seen, so the store's own r1.3 is refused by the key, nothing written."""
    from store.errors import StoreError
    from store.shared import outbox
    await store.admit(occ("tg:1:1"))
    await store.admit(occ("tg:1:2"))
    claim = await store.claim("w1")
    assert [i.work_id for i in claim.items] == [1, 2]
    assert (await store.finish(claim, ReportDraft("first", destination="tg:1"))).report_id == "r1.1"

    def report(ids):
        return lambda conn: outbox.insert_report(conn, ids, ReportDraft("again"), store.now(), run_id=None)
    assert await store.db.write(report([1, 2])) == "r1.2"
    assert await store.db.write(report([2])) == "r2.1"      # item 2's other reports are anchored at 1: not counted
    raw.execute("INSERT INTO reports (report_id, anchor, generation, body, created_at) "
                "VALUES ('r1.3', 1, 3, 'planted', '2027-03-01T09:00:00.000000Z')")
    with pytest.raises(StoreError, match="UNIQUE constraint failed: reports.report_id"):
        await store.db.write(report([1]))
    assert raw.execute("SELECT count(*) FROM report_items WHERE report_id = 'r1.3'").fetchone()[0] == 0


async def test_debounce_makes_one_turn_and_sessions_never_mix(db_path, clock):
    store = await SqliteStore.open(db_path, clock, capacity=10, debounce_ms=500)
    try:
        await store.admit(occ("tg:1:1", "a"))
        clock.advance(0.2)
        await store.admit(occ("tg:1:2", "b"))
        await store.admit(occ("tg:2:1", "c", session="tg:2", dest="tg:2"))
        clock.advance(0.2)
        await store.admit(occ("tg:1:3", "d"))
        assert await store.claim("w1") is None            # the oldest item is 0.4 s old: still inside the window
        assert (await store.next_claim_time()) == clock.now() + __import__("datetime").timedelta(seconds=0.1)
        clock.advance(0.1)
        turn = await store.claim("w1")                     # not reset by later items: due at 0.5 s
        assert turn.session == "tg:1" and [i.work_id for i in turn.items] == [1, 2, 4]
        assert await store.claim("w2") is None             # tg:2 is only 0.3 s old
        clock.advance(0.2)
        other = await store.claim("w2")
        assert other.session == "tg:2" and [i.work_id for i in other.items] == [3]
        # a session with a running turn is not claimed again, newer items wait
        await store.admit(occ("tg:1:5", "e"))
        clock.advance(1)
        assert await store.claim("w3") is None
        await store.finish(turn, ReportDraft("answer", destination="tg:1"))
        nxt = await store.claim("w3")
        assert [i.work_id for i in nxt.items] == [5]
    finally:
        await store.close()


async def test_release_backoff_and_attempt_cap(store, raw, clock):
    await store.admit(occ("tg:1:1"))
    for attempt in (1, 2):
        claim = await store.claim("w1")
        assert claim.attempt == attempt
        assert await store.release(claim, delay_seconds=30, reason="model timed out") is None
        assert await store.claim("w1") is None              # not before 30 s
        clock.advance(30)
    claim = await store.claim("w1")
    assert claim.attempt == 3
    report_id = await store.release(claim, delay_seconds=30, reason="model timed out")
    assert report_id == "r1.1"
    row = raw.execute("SELECT state, attempts FROM work").fetchone()
    assert tuple(row) == ("failed", 3)
    body, is_error = raw.execute("SELECT body, is_error FROM reports").fetchone()
    assert is_error == 1 and "3 attempts" in body and "model timed out" in body


async def test_release_with_refund_does_not_count_the_attempt(store, raw):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    await store.release(claim, delay_seconds=0, reason="shutdown", refund=True)
    assert tuple(raw.execute("SELECT state, attempts FROM work").fetchone()) == ("pending", 0)


async def test_fail_writes_an_error_report(store, raw):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    report_id = await store.fail(
        claim, ReportDraft("the model refused this request", destination="tg:1", is_error=True))
    assert raw.execute("SELECT state FROM work").fetchone()[0] == "failed"
    assert raw.execute("SELECT is_error FROM reports WHERE report_id = ?", (report_id,)).fetchone()[0] == 1


async def test_forget_cancels_pending_and_discards_a_running_turn(store, raw):
    await store.admit(occ("tg:1:1", "first"))
    running = await store.claim("w1")
    await store.admit(occ("tg:1:2", "second"))
    deleted, cancelled = await store.forget("tg:1", "owner 1")
    assert cancelled == 1
    assert raw.execute("SELECT state FROM work WHERE work_id = 2").fetchone()[0] == "failed"
    outcome = await store.finish(running, ReportDraft("late answer", destination="tg:1"), user_text="first")
    assert outcome.discarded
    assert raw.execute("SELECT state FROM work WHERE work_id = 1").fetchone()[0] == "failed"
    assert raw.execute("SELECT count(*) FROM reports WHERE body = 'late answer'").fetchone()[0] == 0
    assert await store.history("tg:1") == []
    assert raw.execute("SELECT count(*) FROM work").fetchone()[0] == 2   # nothing deleted silently
    assert await store.check() == []


async def test_two_processes_admitting_the_same_identity(db_path, store):
    """Two real processes race to admit one occurrence: one accepted, one duplicate, one row."""
    import subprocess
    import sys
    code = ("import asyncio, sys; from store import SqliteStore, SystemClock, Occurrence\n"
            "async def main():\n"
            "    s = await SqliteStore.open(sys.argv[1], SystemClock())\n"
            "    r = await s.admit(Occurrence('till:1:same', 'till:1', 'payload'))\n"
            "    print(r.outcome.value); await s.close()\n"
            "asyncio.run(main())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outcomes = sorted(p.communicate(timeout=30)[0].strip() for p in procs)
    assert outcomes == ["accepted", "duplicate"]
    conn = sqlite3.connect(str(db_path))
    assert conn.execute("SELECT count(*) FROM work WHERE source = 'till:1:same'").fetchone()[0] == 1
    conn.close()
