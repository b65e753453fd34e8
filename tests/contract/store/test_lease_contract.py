"""Leases through the Inbox port (C15), for every store: `renew` is True while the run holds its claim and False
once it ended (never revived); `sweep_expired` never touches a live claim; a store whose claims are leases says how
long (`lease_s`), one whose claims are not (SQLite: one process owns the file) says None. Expiry itself is judged
by the database clock and shown in tests/integration/postgres/test_leases.py and tests/acceptance/postgres/."""
from __future__ import annotations

import pytest

from store import NotClaimed, Occurrence, ReportDraft, Store, WorkKind


def occ(n: int, session: str = "tg:1") -> Occurrence:
    return Occurrence(f"{session}:{n}", session, "how much vanilla", WorkKind.AGENT, session)


async def test_renew_holds_while_the_run_is_open_and_never_after_it_ended(store: Store, kind: str):
    assert store.lease_s == (None if kind == "sqlite" else 30.0)
    await store.admit(occ(1))
    claim = await store.claim("w1")
    assert claim is not None
    assert await store.renew(claim) is True
    assert await store.renew(claim) is True
    await store.finish(claim, ReportDraft("done", destination="tg:1"))
    assert await store.renew(claim) is False
    with pytest.raises(NotClaimed):
        await store.op_started(claim.run_id, "c9", "get_item", {}, "read")


async def test_a_released_run_cannot_be_renewed(store: Store):
    await store.admit(occ(1))
    claim = await store.claim("w1")
    assert claim is not None
    await store.release(claim, delay_seconds=0, reason="test", refund=True)
    assert await store.renew(claim) is False


async def test_the_sweep_never_touches_a_live_claim_nor_a_recent_send(store: Store):
    await store.admit(occ(1))
    await store.admit(occ(1, "tg:2"))
    done = await store.claim("w1")
    assert done is not None
    await store.finish(done, ReportDraft("hello", destination="tg:1"))
    await store.mark_sending(1)
    live = await store.claim("w1")
    assert live is not None
    summary = await store.sweep_expired()
    assert (summary.released, summary.failed, summary.unknown_deliveries) == ((), (), ())
    assert await store.renew(live) is True
    status = await store.status()
    assert status["work"]["running"] == 1
    await store.finish(live, ReportDraft("still mine", destination="tg:2"))   # the claim is intact
