"""Leases through the Inbox port (C15), for every store: `renew` is HELD while the run holds its claim, ENDED once
its own ending write (finish, fail, release) ended it, LAPSED for a run it does not hold (never revived); `ending`
is True only while such a write is in flight; `sweep_expired` never touches a live claim; a store whose claims are
leases says how long (`lease_s`), one whose claims are not (SQLite: one process owns the file) says None. Expiry
itself, and a sweep's ending (LAPSED), are judged by the database clock and shown in
tests/integration/postgres/test_leases.py and tests/acceptance/postgres/; the worker's use of both answers in
tests/integration/postgres/test_lease_keeper.py."""
from __future__ import annotations

import dataclasses

import pytest

from store import Fence, NotClaimed, Occurrence, Renewal, ReportDraft, Store, Transaction, WorkKind


def occ(n: int, session: str = "tg:1") -> Occurrence:
    return Occurrence(f"{session}:{n}", session, "how much vanilla", WorkKind.AGENT, session)


async def test_renew_holds_while_the_run_is_open_and_never_after_it_ended(store: Store, kind: str):
    assert store.lease_s == (None if kind == "sqlite" else 30.0)
    await store.admit(occ(1))
    claim = await store.claim("w1")
    assert claim is not None
    assert await store.renew(claim) is Renewal.HELD
    assert await store.renew(claim) is Renewal.HELD
    await store.finish(claim, ReportDraft("done", destination="tg:1"))
    assert await store.renew(claim) is Renewal.ENDED                   # by its own finish: nothing was lost
    with pytest.raises(NotClaimed):
        await store.op_started(claim.run_id, "c9", "get_item", {}, "read")


async def test_a_released_run_cannot_be_renewed(store: Store):
    await store.admit(occ(1))
    claim = await store.claim("w1")
    assert claim is not None
    await store.release(claim, delay_seconds=0, reason="test", refund=True)
    assert await store.renew(claim) is Renewal.ENDED


async def test_renew_says_ended_after_each_ending_write_of_the_run_and_lapsed_for_a_run_it_does_not_hold(
        store: Store):
    for n, session in enumerate(("tg:1", "tg:2", "tg:3")):
        await store.admit(occ(n, session))
    failed, forgotten, held = [await store.claim("w1") for _ in range(3)]
    assert failed is not None and forgotten is not None and held is not None
    await store.fail(failed, ReportDraft("no", destination="tg:1", is_error=True))
    await store.forget(forgotten.session, "owner")
    assert (await store.finish(forgotten, ReportDraft("late", destination=forgotten.destination))).discarded
    assert [await store.renew(c) for c in (failed, forgotten)] == [Renewal.ENDED, Renewal.ENDED]
    # negative control: a run this claim does not name (never claimed, or another's) is lapsed, not ended
    assert await store.renew(dataclasses.replace(held, run_id="0" * 32)) is Renewal.LAPSED
    assert await store.renew(held) is Renewal.HELD


async def test_ending_is_true_only_while_an_ending_write_of_the_run_is_in_flight(store: Store):
    await store.admit(occ(1))
    await store.admit(occ(1, "tg:2"))
    claim, other = await store.claim("w1"), await store.claim("w1")
    assert claim is not None and other is not None
    seen: list[tuple[bool, bool]] = []

    def apply(tx: Transaction) -> None:              # inside the finish's transaction, in the connection's thread
        seen.append((store.ending(claim), store.ending(other)))
    assert not store.ending(claim)
    await store.finish(claim, ReportDraft("done", destination="tg:1"), apply=apply)
    assert seen == [(True, False)] and not store.ending(claim)
    with pytest.raises(NotClaimed):                  # refused: its answer is back, so it is no longer in flight
        await store.release(claim, delay_seconds=0, reason="late")
    assert not store.ending(claim)


async def test_the_sweep_never_touches_a_live_claim_nor_a_recent_send(store: Store):
    await store.admit(occ(1))
    await store.admit(occ(1, "tg:2"))
    done = await store.claim("w1")
    assert done is not None
    await store.finish(done, ReportDraft("hello", destination="tg:1"))
    assert await store.acquire_leader("relay", "relay-holder", 30) == 1
    await store.mark_sending(1, fence=Fence("relay", "relay-holder", 1))      # a live relay's send (C16)
    live = await store.claim("w1")
    assert live is not None
    summary = await store.sweep_expired()
    assert (summary.released, summary.failed, summary.unknown_deliveries) == ((), (), ())
    assert await store.renew(live) is Renewal.HELD
    status = await store.status()
    assert status.work.running == 1
    await store.finish(live, ReportDraft("still mine", destination="tg:2"))   # the claim is intact
