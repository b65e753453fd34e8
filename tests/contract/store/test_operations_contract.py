"""The operator's reads and retention through the Insights and Admin ports (metrics, health, prune), for every store."""
from __future__ import annotations

from store import ManualClock, Occurrence, ReportDraft, Store, WorkKind


async def answered(store: Store, source: str) -> str:
    await store.admit(Occurrence(source, "till:t1", '{"counts": {}}', WorkKind.AGENT, None))
    claim = await store.claim("w1")
    assert claim is not None
    return (await store.finish(claim, ReportDraft("counted"))).report_id


async def test_metrics_count_work_by_state_and_follow_a_change(store: Store):
    tallies: dict = {}
    await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    first = await store.metrics(tallies=tallies)
    assert first.work[("agent", "pending")] == 1         # counts by (kind, state)
    await answered(store, "till:t1:r1")
    later = await store.metrics(tallies=tallies)          # the same tallies: only what changed is counted again
    assert later.work[("agent", "finished")] == 1 and later.work[("agent", "pending")] == 1


async def test_a_store_that_takes_writes_says_so(store: Store):
    assert await store.writable(0.0) is None


async def test_formerly_bug_prune_keeps_identities_so_a_retried_post_is_still_a_duplicate(
        store: Store, clock: ManualClock):
    await answered(store, "till:t1:old")
    clock.advance(40 * 86400)
    done = await store.prune(older_than_days=30)
    assert done.get("work_payloads", 0) == 1
    again = await store.admit(Occurrence("till:t1:old", "till:t1", '{"counts": {}}', WorkKind.AGENT, None))
    assert again.outcome.value == "duplicate"
    changed = await store.admit(Occurrence("till:t1:old", "till:t1", '{"counts": {"x": 1}}', WorkKind.AGENT, None))
    assert changed.outcome.value == "conflict"
    assert await store.check() == []


async def test_prune_never_takes_less_than_a_day(store: Store):
    try:
        await store.prune(older_than_days=0.5)
    except ValueError as exc:
        assert "at least one day" in str(exc)
    else:
        raise AssertionError("a prune of less than a day was accepted")


async def test_formerly_bug_a_refusal_counted_twice_in_one_minute_adds_up_on_every_store(store: Store):
    """The counts held in memory are written by an upsert that adds to the minute's row; on PostgreSQL the bare
    `count` of its SET was ambiguous, so a second flush in the same minute failed (and was kept waiting)."""
    store.tally("refused_token")
    assert await store.flush_counts() == 1
    store.tally("refused_token", 2)
    assert await store.flush_counts() == 1
    assert (await store.status()).counters["refused_token"] == 3


async def test_a_runs_steps_are_its_journaled_tools_in_order(store: Store):
    await store.admit(Occurrence("tg:1:5", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    assert await store.run_steps(claim.run_id) == []
    await store.op_started(claim.run_id, "c1", "list_stock", {}, "read")
    await store.op_finished(claim.run_id, "c1", "done", {})
    await store.op_started(claim.run_id, "c2", "sales_rate", {"days": 14}, "read")
    assert await store.run_steps(claim.run_id) == ["list_stock", "sales_rate"]
    assert await store.run_steps("no-such-run") == []
