"""Admission, turns and forgetting through the Inbox port (C1, C4, C5, C6, C9, C10, C12), for every store."""
from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from store import Admission, Claimed, ItemSpec, ManualClock, NotClaimed, Occurrence, ReportDraft, Store, WorkKind
from store.records import WorkCounts

from .conftest import opened


def occ(source: str, text: str = "how much vanilla", session: str | None = None) -> Occurrence:
    session = session or ":".join(source.split(":")[:2])
    return Occurrence(source, session, text, WorkKind.AGENT, session)


async def test_admission_answers_accepted_duplicate_and_conflict(store: Store):
    first = await store.admit(occ("tg:1:1"))
    assert first.outcome is Admission.ACCEPTED and first.work_id is not None
    again = await store.admit(occ("tg:1:1"))
    assert again.outcome is Admission.DUPLICATE and again.work_id == first.work_id
    other = await store.admit(occ("tg:1:1", "something else"))
    assert other.outcome is Admission.CONFLICT and other.work_id == first.work_id
    status = await store.status()
    assert status.work.pending == 1


async def test_capacity_refuses_new_work_but_still_answers_repeats_and_controls(store: Store):
    for n in range(3):
        assert (await store.admit(occ(f"tg:1:{n}"))).outcome is Admission.ACCEPTED
    assert (await store.admit(occ("tg:1:9"))).outcome is Admission.REFUSED
    assert (await store.admit(occ("tg:1:0"))).outcome is Admission.DUPLICATE    # identity before capacity
    control = await store.admit_answered(
        Occurrence("cb:press-1", "tg:1", "status", WorkKind.CONTROL, "tg:1"),
        lambda tx, work_id: ReportDraft("queue is full", destination="tg:1"))
    assert control.outcome is Admission.ACCEPTED and control.report_id is not None
    assert (await store.status()).work.pending == 3


async def test_capacity_is_exact_under_concurrent_admissions_and_the_kept_count_follows_every_move(store: Store):
    """C1 reads the kept open-work count (migration 0019): admitters racing each other (on PostgreSQL, separate
    pooled connections) never overfill the queue, a finished, failed or forgotten item frees exactly its place, and
    `check` (W1) finds the kept count equal to the work table's after every step."""
    results = await asyncio.gather(*(store.admit(occ(f"tg:{n}:1")) for n in range(10)))
    assert sorted(r.outcome.value for r in results) == ["accepted"] * 3 + ["refused"] * 7
    assert await store.check() == []
    claim = await store.claim("w1")
    assert claim is not None
    await store.finish(claim, ReportDraft("done", destination=claim.destination))
    results = await asyncio.gather(*(store.admit(occ(f"tg:{n}:2")) for n in range(10, 15)))
    assert [r.outcome for r in results].count(Admission.ACCEPTED) == 1
    assert (await store.status()).work.pending == 3 and await store.check() == []
    newcomer = 10 + [r.outcome for r in results].index(Admission.ACCEPTED)
    assert await store.forget(f"tg:{newcomer}", "owner") == (0, 1)     # its pending item is cancelled (failed)
    failing = await store.claim("w1")
    assert failing is not None
    await store.fail(failing, ReportDraft("no", destination=failing.destination, is_error=True))
    results = await asyncio.gather(*(store.admit(occ(f"tg:{n}:3")) for n in range(20, 25)))
    assert [r.outcome for r in results].count(Admission.ACCEPTED) == 2
    assert await store.check() == []


async def test_a_conflict_in_a_batch_does_not_undo_the_rest(store: Store):
    await store.admit(occ("tg:1:1"))
    results = await store.admit_many([occ("tg:1:2"), occ("tg:1:1", "changed"), occ("tg:1:3")])
    assert [r.outcome for r in results] == [Admission.ACCEPTED, Admission.CONFLICT, Admission.ACCEPTED]


async def test_an_empty_queue_claims_nothing(store: Store):
    assert await store.claim("w1") is None
    assert await store.next_claim_time() is None


async def test_claim_finish_and_report_in_one_turn(store: Store):
    await store.admit(occ("tg:1:1", "first"))
    await store.admit(occ("tg:1:2", "second"))
    await store.admit(occ("tg:2:1", "other chat"))
    claim = await store.claim("w1")
    assert claim is not None and claim.session == "tg:1" and [i.source for i in claim.items] == ["tg:1:1", "tg:1:2"]
    assert claim.attempt == 1
    outcome = await store.finish(claim, ReportDraft("vanilla: 2 tubs", destination="tg:1"), user_text="first")
    assert outcome.report_id == f"r{claim.anchor}.1" and not outcome.discarded
    [report] = [r for r in await store.reports() if r.report == outcome.report_id]
    assert report.sources == ("tg:1:1", "tg:1:2") and report.body == "vanilla: 2 tubs"
    assert [d.report_id for d in await store.due_deliveries()] == [outcome.report_id]
    assert await store.history("tg:1") == [("user", "first"), ("assistant", "vanilla: 2 tubs")]
    assert await store.check() == []


async def test_history_keeps_the_models_prose_and_exchange_and_forget_empties_it(store: Store):
    """C17: with `model_said` the answer's row is the model's own prose and the exchange as JSON, never the report."""
    await store.admit(occ("tg:1:1", "first"))
    claim = await store.claim("w1")
    exchange = '[{"role":"user","text":"[Today] first"},{"role":"assistant","text":"Vanilla: 2 tubs."}]'
    body = "Vanilla: 2 tubs.\n\nFigures:\n- vanilla on hand: 2 tubs"
    await store.finish(claim, ReportDraft(body, destination="tg:1"), user_text="first",
                       model_said=("Vanilla: 2 tubs.", exchange))
    await store.admit(occ("tg:1:2", "second"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("old style", destination="tg:1"), user_text="second")
    assert await store.exchanges("tg:1") == [("user", "first", None), ("assistant", "Vanilla: 2 tubs.", exchange),
                                             ("user", "second", None), ("assistant", "old style", None)]
    assert await store.exchanges("tg:1", limit=2) == [("user", "second", None), ("assistant", "old style", None)]
    assert await store.history("tg:1") == [("user", "first"), ("assistant", "Vanilla: 2 tubs."),
                                           ("user", "second"), ("assistant", "old style")]
    await store.forget("tg:1", "owner")
    assert await store.exchanges("tg:1") == []


async def test_a_claim_carries_its_turns_set_up_read_in_the_same_transaction(store: Store):
    """Issue 31: with `history_limit` a claim (and the next claim a finish makes) carries the session's last exchanges
    and the shop's items, equal to what `exchanges` and `shop_items` read after it; without it, nothing is read."""
    await store.seed_shop([ItemSpec("vanilla", "tubs", 2, 8, 12, 300)], "shop.toml")
    await store.admit(occ("tg:1:1", "first"))
    plain = await store.claim("w1")
    assert plain is not None and plain.setup is None
    await store.admit(occ("tg:1:2", "second"))
    outcome = await store.finish(plain, ReportDraft("vanilla: 2 tubs", destination="tg:1"), user_text="first",
                                 claim_next="w1", history_limit=1)
    following = outcome.next_claim
    assert following is not None and following.setup is not None
    assert list(following.setup.exchanges) == await store.exchanges("tg:1", limit=1) == [
        ("assistant", "vanilla: 2 tubs", None)]
    assert list(following.setup.shop_items) == await store.shop_items()
    assert following.setup.shop_items[0].item == "vanilla"
    await store.finish(following, ReportDraft("still 2 tubs", destination="tg:1"), user_text="second")
    await store.admit(occ("tg:1:3", "third"))
    claim = await store.claim("w1", history_limit=20)
    assert claim is not None and claim.setup is not None
    assert [text for _, text, _ in claim.setup.exchanges] == ["first", "vanilla: 2 tubs", "second", "still 2 tubs"]
    assert claim == dataclasses.replace(claim, setup=None)        # the set-up is carried, not part of the turn


async def test_the_owners_sessions_are_claimed_before_the_producers(store: Store, clock):
    await store.admit(Occurrence("stock:vanilla:1", "stock:vanilla", "check", WorkKind.AGENT, "tg:1"))
    clock.advance(1)
    await store.admit(occ("tg:2:1", "question"))
    clock.advance(1)
    await store.admit(occ("tg:3:1", "another"))
    sessions = []
    while (claim := await store.claim("w1")) is not None:
        sessions.append(claim.session)
    assert sessions == ["tg:2", "tg:3", "stock:vanilla"]


async def test_a_turn_can_be_finished_only_by_its_own_run_and_only_once(store: Store):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    assert claim is not None
    with pytest.raises(NotClaimed):
        await store.finish(replace(claim, run_id="another-run"), ReportDraft("x"))
    with pytest.raises(NotClaimed):
        await store.finish(replace(claim, worker_id="w2"), ReportDraft("x"))
    await store.finish(claim, ReportDraft("x"))
    with pytest.raises(NotClaimed):
        await store.finish(claim, ReportDraft("y"))


async def test_debounce_runs_from_the_oldest_pending_item(kind: str, tmp_path: Path, clock: ManualClock,
                                                         location: str | None):
    store = await opened(kind, tmp_path, clock, location, debounce_ms=300)
    try:
        await store.admit(occ("tg:1:1"))
        clock.advance(0.2)
        await store.admit(occ("tg:1:2"))
        assert await store.claim("w1") is None
        due = await store.next_claim_time()
        assert due is not None and abs((due - clock.now()).total_seconds() - 0.1) < 1e-3
        clock.advance(0.1)
        claim = await store.claim("w1")
        assert claim is not None and len(claim.items) == 2      # not reset by the later item
    finally:
        await store.close()


async def test_a_claim_passes_over_every_session_that_is_not_due_to_the_first_that_is(
        kind: str, tmp_path: Path, clock: ManualClock, location: str | None):
    """C5 as the claim walks the waiting work in its order (migration 0023): an owner's session in its debounce
    window, one whose turn runs (its newer item waits), one on a back-off and one skipped are each passed over, and
    the first due session after them, a producer's, is claimed; then the owners' come first again, oldest first."""
    store = await opened(kind, tmp_path, clock, location, capacity=20, debounce_ms=300)
    try:
        await store.admit(occ("tg:1:1"))                               # will run, its newer item waiting behind it
        await store.admit(occ("tg:2:1"))                               # will be on a back-off
        await store.admit(occ("tg:3:1"))                               # will be skipped
        clock.advance(0.3)
        running = await store.claim("w1", ["tg:2", "tg:3"])
        assert running is not None and running.session == "tg:1"
        backing_off = await store.claim("w1", ["tg:3"])
        assert backing_off is not None and backing_off.session == "tg:2"
        assert await store.release(backing_off, delay_seconds=60, reason="model unavailable") is None
        await store.admit(occ("tg:1:2"))
        await store.admit(Occurrence("stock:vanilla:1", "stock:vanilla", "check", WorkKind.AGENT, "tg:1"))
        clock.advance(0.3)
        await store.admit(occ("tg:4:1"))                               # in its debounce window
        claim = await store.claim("w1", ["tg:3"])
        assert claim is not None and claim.session == "stock:vanilla"
        assert (await store.claim("w1", ["tg:3"])) is None
        clock.advance(0.3)
        assert [c.session for c in [await store.claim("w1"), await store.claim("w1")] if c] == ["tg:3", "tg:4"]
        assert await store.claim("w1") is None                         # tg:1 runs, tg:2 backs off
    finally:
        await store.close()


async def test_the_next_claim_time_is_the_earliest_due_session_not_the_oldest_item(
        kind: str, tmp_path: Path, clock: ManualClock, location: str | None):
    """C5's wake-up: an item waiting behind its session's running turn is not a due time, a back-off is one, and the
    earliest of the sessions' due times is the answer however they are ordered by admission."""
    store = await opened(kind, tmp_path, clock, location, capacity=20, debounce_ms=300)
    start = clock.now()
    try:
        await store.admit(occ("tg:1:1"))
        await store.admit(occ("tg:2:1"))
        clock.advance(0.3)
        running = await store.claim("w1", ["tg:2"])
        backing_off = await store.claim("w1")
        assert running is not None and backing_off is not None and backing_off.session == "tg:2"
        await store.release(backing_off, delay_seconds=10, reason="model unavailable")
        await store.admit(occ("tg:1:2"))                               # behind tg:1's running turn: no due time
        clock.advance(0.1)
        await store.admit(occ("tg:3:1"))
        assert await store.next_claim_time() == start + timedelta(seconds=0.7)       # tg:3's, not tg:1:2's 0.6
        clock.advance(0.3)
        assert (await store.claim("w1")) is not None and await store.next_claim_time() == start + timedelta(
            seconds=10.3)                                              # tg:2's back-off
        await store.finish(running, ReportDraft("done", destination="tg:1"))
        assert await store.next_claim_time() == start + timedelta(seconds=0.6)       # tg:1:2, now its session's oldest
    finally:
        await store.close()


async def test_after_a_backward_step_an_item_stamped_ahead_makes_the_next_claim_time_now(
        kind: str, tmp_path: Path, clock: ManualClock, location: str | None):
    """C5 under a backward clock step: work admitted before the step is stamped ahead of the clock and is due at once,
    even when an older-stamped item (admitted after the step) still waits out its debounce."""
    store = await opened(kind, tmp_path, clock, location, capacity=20, debounce_ms=300)
    try:
        await store.admit(occ("tg:1:1"))
        clock.set(clock.now() - timedelta(hours=1))
        await store.admit(occ("tg:2:1"))
        due = await store.next_claim_time()
        assert due is not None and due <= clock.now()
        claim = await store.claim("w1")
        assert claim is not None and claim.session == "tg:1"
        assert await store.next_claim_time() == clock.now() + timedelta(seconds=0.3)   # tg:2's own debounce
    finally:
        await store.close()


async def test_release_waits_out_its_delay_and_the_cap_fails_the_turn_visibly(store: Store, clock: ManualClock):
    await store.admit(occ("tg:1:1"))
    for attempt in (1, 2):
        claim = await store.claim("w1")
        assert claim is not None and claim.attempt == attempt
        assert await store.release(claim, delay_seconds=30, reason="model timed out") is None
        assert await store.claim("w1") is None
        clock.advance(30)
    claim = await store.claim("w1")
    assert claim is not None and claim.attempt == 3
    report_id = await store.release(claim, delay_seconds=30, reason="model timed out")
    assert report_id is not None
    [report] = [r for r in await store.reports() if r.report == report_id]
    assert report.is_error and "3 attempts" in report.body
    assert (await store.status()).work.failed == 1
    assert await store.check() == []


async def test_a_refunded_release_does_not_count_the_attempt(store: Store):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.release(claim, delay_seconds=0, reason="stopping", refund=True)
    again = await store.claim("w1")
    assert again is not None and again.attempt == 1


async def test_fail_stores_an_error_report(store: Store):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    assert claim is not None
    report_id = await store.fail(claim, ReportDraft("the model refused", destination="tg:1", is_error=True))
    [report] = [r for r in await store.reports() if r.report == report_id]
    assert report.is_error
    assert await store.check() == []


async def test_forget_cancels_waiting_work_and_discards_a_running_turn(store: Store):
    await store.admit(occ("tg:1:1", "first"))
    running = await store.claim("w1")
    assert running is not None
    await store.admit(occ("tg:1:2", "second"))
    _, cancelled = await store.forget("tg:1", "owner 1")
    assert cancelled == 1
    outcome = await store.finish(running, ReportDraft("late answer", destination="tg:1"), user_text="first")
    assert outcome.discarded
    assert all(r.body != "late answer" for r in await store.reports())
    assert await store.history("tg:1") == []
    assert (await store.status()).work.failed == 2        # nothing deleted silently
    assert await store.check() == []


async def test_formerly_bug_a_forgotten_turn_that_is_released_is_not_run_again(store: Store):
    await store.admit(occ("tg:1:1"))
    running = await store.claim("w1")
    assert running is not None
    await store.forget("tg:1", "owner 1")
    assert await store.release(running, delay_seconds=0, reason="model timed out") is not None
    assert await store.claim("w1") is None
    assert (await store.status()).work == WorkCounts(failed=1)


async def test_formerly_bug_recovery_does_not_rerun_a_turn_forgotten_while_it_ran(store: Store):
    await store.admit(occ("tg:1:1"))
    assert await store.claim("w1") is not None
    await store.forget("tg:1", "owner 1")
    summary = await store.recover()                            # the process died during the turn
    assert summary.released == () and len(summary.failed) == 1
    assert await store.claim("w1") is None


async def test_recovery_releases_a_turn_that_only_read(store: Store):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "stock", {"item": "vanilla"}, "read")
    await store.op_finished(claim.run_id, "c1", "done", {"on_hand": 2})
    summary = await store.recover()
    assert summary.released == (claim.anchor,)
    again = await store.claim("w1")
    assert again is not None and again.attempt == 2


async def test_an_empty_claim_and_a_finish_that_found_none_carry_the_next_wake(kind: str, tmp_path: Path,
                                                                               clock: ManualClock,
                                                                               location: str | None):
    """Issue 31: `claim_or_wake` claims as `claim` does; when nothing is due, its answer carries what
    `next_claim_time` says, read in the claim's own transaction (the worker's idle look is no read of its own), and
    so does a finish whose `claim_next` found no turn due (`looked`). Nothing waiting: no wake-up time."""
    store = await opened(kind, tmp_path, clock, location, debounce_ms=300)
    try:
        assert await store.claim_or_wake("w1") == Claimed(None, None)
        await store.admit(occ("tg:1:1"))
        clock.advance(0.2)
        empty = await store.claim_or_wake("w1")
        assert empty.claim is None and empty.next_wake == await store.next_claim_time()
        assert empty.next_wake is not None and abs((empty.next_wake - clock.now()).total_seconds() - 0.1) < 1e-3
        clock.advance(0.1)
        claimed = await store.claim_or_wake("w1", history_limit=5)
        assert claimed.claim is not None and claimed.claim.setup is not None and claimed.next_wake is None
        await store.admit(occ("tg:2:1"))                                 # debounced: not due at the finish
        outcome = await store.finish(claimed.claim, ReportDraft("x", destination="tg:1"), claim_next="w1")
        assert outcome.next_claim is None and outcome.looked
        assert outcome.next_wake == await store.next_claim_time() == clock.now() + timedelta(milliseconds=300)
        # a transient failure's back-off is a wake-up time too (the not-before time, past the debounce)
        clock.advance(0.3)
        turn = await store.claim("w1")
        assert turn is not None
        await store.release(turn, delay_seconds=30, reason="model unavailable")
        again = await store.claim_or_wake("w1")
        assert again.claim is None and again.next_wake == clock.now() + timedelta(seconds=30)
        # negative controls: a finish not asked to claim, or that claimed the next turn, did not look
        await store.admit(occ("tg:3:1"))
        await store.admit(occ("tg:4:1"))
        clock.advance(0.3)
        first = await store.claim("w1")
        assert first is not None
        plain = await store.finish(first, ReportDraft("y", destination=first.destination))
        assert not plain.looked and plain.next_wake is None
        second = await store.claim("w1")
        assert second is not None
        await store.admit(occ("tg:5:1"))
        clock.advance(0.3)
        chained = await store.finish(second, ReportDraft("z", destination=second.destination), claim_next="w1")
        assert chained.next_claim is not None and not chained.looked and chained.next_wake is None
    finally:
        await store.close()
