"""C10 recovery from records, C11 void proposals, C14 Little's law on a seeded simulated run."""
from __future__ import annotations

import json
import random

from store import Occurrence, ProposalState, ReportDraft, SqliteStore
from tests.support import ROOT


def occ(n: int, session: str | None = None) -> Occurrence:
    return Occurrence(f"till:1:{n}", session or f"s{n}", "x", destination=None)


async def test_recovery_releases_a_store_only_run_and_fails_one_that_acted_outside(store, raw):
    await store.admit(Occurrence("tg:1:1", "tg:1", "a", destination="tg:1"))
    await store.admit(Occurrence("tg:2:1", "tg:2", "b", destination="tg:2"))
    first = await store.claim("w1")
    second = await store.claim("w1")
    await store.op_started(first.run_id, "c1", "get_item", {"item": "vanilla"}, "read")
    await store.op_finished(first.run_id, "c1", "done", {"on_hand": 2})
    await store.op_started(second.run_id, "c1", "future_tool", {}, "external")
    await store.op_finished(second.run_id, "c1", "done", {}, acted_outside=True)   # none does today (C10)
    summary = await store.recover()
    assert summary.released == (first.items[0].work_id,)
    assert summary.failed == (second.items[0].work_id,)
    assert [tuple(r) for r in raw.execute("SELECT state, attempts FROM work ORDER BY work_id")] == [
        ("pending", 1), ("failed", 1)]
    body = raw.execute("SELECT body FROM reports").fetchone()[0]
    assert "future_tool" in body and "will not redo" in body
    assert [tuple(r) for r in raw.execute("SELECT outcome FROM runs ORDER BY rowid")] == [("released",), ("failed",)]
    assert await store.check() == []


async def test_recovery_turns_sending_into_unknown(store, raw):
    await store.admit(Occurrence("tg:1:1", "tg:1", "a", destination="tg:1"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("hello", destination="tg:1"))
    await store.mark_sending(1)
    summary = await store.recover()
    assert summary.unknown_deliveries == (1,)
    assert raw.execute("SELECT state FROM deliveries").fetchone()[0] == "unknown"


async def test_a_proposal_of_an_unfinished_turn_is_void(store, raw):

    from bot.shop_file import load_shop
    await store.seed_shop(load_shop(ROOT / "shop.example.toml").items, "test")
    await store.admit(Occurrence("tg:1:1", "tg:1", "reorder", destination="tg:1"))
    claim = await store.claim("w1")
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", "vanilla", 6)
    assert result.state is ProposalState.PROPOSED and result.total_cents == 1800
    status, journaled = raw.execute("SELECT status, result FROM operations").fetchone()
    assert status == "done"                                           # one transaction with the proposal
    assert json.loads(journaled) == {                                 # the result the model reads, as it always was
        "proposal_id": result.proposal_id, "item": "vanilla", "quantity": 6, "total_cents": 1800, "unit": "tubs",
        "state": "awaiting_approval", "reason": None}
    await store.recover()
    assert raw.execute("SELECT state FROM proposals").fetchone()[0] == "void"
    # the item is free for a new proposal in the next attempt
    claim = await store.claim("w1")
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    await store.record_proposal(claim.run_id, "c1", "Dairy Direct", "vanilla", 6)
    await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    assert [tuple(r) for r in raw.execute("SELECT state FROM proposals ORDER BY proposal_id")] == [
        ("void",), ("awaiting_approval",)]


async def test_littles_law_holds_on_a_simulated_run(db_path, clock):
    """Seeded arrivals (p = 0.25 per tick) and one worker taking 3 ticks per item, 4,000 ticks, on the real queue."""
    store = await SqliteStore.open(db_path, clock, capacity=1_000_000, debounce_ms=0)
    rng = random.Random(8)
    start = clock.now()
    busy_until, current, n = 0, None, 0
    try:
        for tick in range(4000):
            if rng.random() < 0.25:
                n += 1
                await store.admit(occ(n))
            if current is not None and tick >= busy_until:
                await store.finish(current, ReportDraft("done"))
                current = None
            if current is None:
                current = await store.claim("w1")
                busy_until = tick + 3
            clock.advance(1)
        stats = await store.stats(start, clock.now())
    finally:
        await store.close()
    assert stats.arrivals > 900
    assert abs(stats.l - stats.lam_w) <= 0.05 * stats.l, stats
    assert stats.holds


async def test_stats_count_refusals_beside_accepted_arrivals(db_path, clock):
    store = await SqliteStore.open(db_path, clock, capacity=2, debounce_ms=0)
    try:
        start = clock.now()
        for n in range(5):
            await store.admit(occ(n))
        clock.advance(60)
        stats = await store.stats(start, clock.now())
        assert (stats.arrivals, stats.refused) == (2, 3)
        assert abs(stats.l - 2.0) < 1e-9 and abs(stats.lam_w - 2.0) < 1e-9
    finally:
        await store.close()


async def test_expiring_proposals_with_none_due_never_takes_the_write_lock(store, raw):
    """The action relay asks every second: with nothing due it reads, so another process's write lock does not make
    it wait out the busy timeout (before, it wrote every time and raised StoreBusy here after 5 s)."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        assert await store.expire_proposals() == []
    finally:
        raw.execute("ROLLBACK")
