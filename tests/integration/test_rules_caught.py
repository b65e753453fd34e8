"""Tests written so that breaking a rule's enforcing code fails them (bench/mutations.py breaks each in turn):
C7's part limit on the parts really sent, C11's one open proposal per item refused by the store itself, C11's
idempotency key random and independent of row ids across a restore, C14 (L = λW) on a real run of the queue."""
from __future__ import annotations

import asyncio
import random
import sqlite3
from datetime import timedelta

import pytest

from bot.sandbox.local_setup import OWNER_ID, local_product
from store import (
    ManualClock,
    Occurrence,
    ProposalState,
    RecordedProposal,
    ReportDraft,
    SqliteStore,
    Store,
    WorkKind,
    restore,
)
from store.clock import AcceleratedClock
from tests.conftest import START
from tests.integration.test_worker import SHOP
from worker.models.offline import OfflineModel
from worker.worker import Worker

TELEGRAM_PART_LIMIT = 4000      # C7 as written in docs/contracts.md, not the code's constant


# ---- C7: parts of at most 4,000 characters, split at line boundaries, in order, each with its identity ----------

async def test_every_part_that_reaches_telegram_holds_at_most_4000_characters():
    lines = [f"line {n:05d} " + "x" * (37 + n % 90) for n in range(400)]           # about 38,000 characters
    body = "\n".join(lines)
    async with local_product({"SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_DEBOUNCE_MS": "0"}) as run:
        store = run.app.parts.store
        result = await store.admit_answered(
            Occurrence("test:long-report", f"tg:{OWNER_ID}", "long", WorkKind.CONTROL, f"tg:{OWNER_ID}"),
            lambda tx, work_id: ReportDraft(body, destination=f"tg:{OWNER_ID}"))
        report_id = result.report_id
        parts = await store.db.read(lambda conn: conn.execute(
            "SELECT count(*) FROM deliveries WHERE report_id = $1", (report_id,)).fetchone()[0])

        def sent_parts() -> list[str]:
            return [m.text for m in run.owner_messages() if m.text.rsplit("\n", 1)[-1].startswith(report_id)]
        await run.api.wait_for(lambda: len(sent_parts()) >= parts, timeout=20)
        sent = sent_parts()
    total = len(sent)
    assert total >= 10
    assert all(len(text) <= TELEGRAM_PART_LIMIT for text in sent), [len(t) for t in sent]
    assert [text.rsplit("\n", 1)[-1] for text in sent] == [f"{report_id} ({i}/{total})" for i in range(1, total + 1)]
    bodies = [text.rsplit("\n\n", 1)[0] for text in sent]
    assert "\n".join(bodies) == body                                   # in order, nothing lost, split at lines only
    assert all(part.split("\n")[-1] in lines for part in bodies)


# ---- C11: one open proposal per item, by the store itself ----------------------------------------------------

async def proposed(store: Store, item: str, n: int) -> RecordedProposal:
    await store.admit(Occurrence(f"tg:1:{item}{n}", "tg:1", f"order {item}", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    await store.op_started(claim.run_id, f"c{n}", "propose_order", {"item": item, "quantity": 6}, "external")
    result = await store.record_proposal(claim.run_id, f"c{n}", "Dairy Direct", item, 6)
    await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    return result


async def test_the_store_refuses_a_second_open_proposal_for_an_item(store, raw):
    await store.seed_shop(SHOP.items, "test")
    first = await proposed(store, "vanilla", 1)
    second = await proposed(store, "vanilla", 2)                      # with no policy given: the store's own check
    assert first.state is ProposalState.PROPOSED
    assert second.state is ProposalState.REJECTED_BY_POLICY and second.reason == (
        f"vanilla already has an open proposal (#{first.proposal_id})")
    assert [tuple(r) for r in raw.execute("SELECT item, state FROM proposals ORDER BY proposal_id")] == [
        ("vanilla", "awaiting_approval"), ("vanilla", "rejected_by_policy")]


async def test_the_database_refuses_a_second_open_proposal_from_another_connection(store, raw):
    await store.seed_shop(SHOP.items, "test")
    first = await proposed(store, "vanilla", 1)
    run_id = raw.execute("SELECT run_id FROM proposals WHERE proposal_id = ?", (first.proposal_id,)).fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        raw.execute("INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, "
                    "created_at, updated_at) VALUES (?, 'Dairy Direct', 'vanilla', 1, 300, 300, 'awaiting_approval', "
                    "'x', 'x')", (run_id,))


# ---- C11: the idempotency key is random, never derived from a row id (row ids repeat after a restore) ----------

async def approved_key(store: Store, item: str, n: int) -> tuple[int, str]:
    p = await proposed(store, item, n)
    decision = await store.atomic(lambda tx: tx.approve_proposal(p.proposal_id, "owner:1", day="2027-03-01",
                                                                 day_max_cents=None,
                                                                 destination="supplier:Dairy Direct"))
    assert decision.ok, decision
    row = await store.db.read(lambda conn: conn.execute(
        "SELECT action_id, idempotency_key FROM actions WHERE action_id = $1", (decision.action_id,)).fetchone())
    return row[0], row[1]


async def test_the_idempotency_key_is_random_and_not_reused_when_row_ids_repeat_after_a_restore(tmp_path):
    clock = ManualClock(START)
    db, backup = tmp_path / "shop.sqlite3", tmp_path / "backup.sqlite3"
    store = await SqliteStore.open(db, clock, debounce_ms=0)
    await store.seed_shop(SHOP.items, "test")
    first = await approved_key(store, "vanilla", 1)
    await store.backup(backup)
    # (only items below their reorder point may be ordered: vanilla and strawberry in the example shop)
    lost = await approved_key(store, "strawberry", 2)                 # sent to the supplier, then the disk is lost
    await store.close()
    restore(backup, db, clock)
    store = await SqliteStore.open(db, clock, debounce_ms=0)
    try:
        again = await approved_key(store, "strawberry", 3)
    finally:
        await store.close()
    assert again[0] == lost[0]                                        # the same row id, a different order
    assert again[1] != lost[1]                                        # so never the key the supplier already has
    keys = [first[1], lost[1], again[1]]
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys) and len(set(keys)) == 3
    assert not any(str(row_id) in key for row_id, key in (first, lost, again) if len(str(row_id)) > 1)


# ---- C14: L = λW on a real run of the queue (the real worker, the real store, accelerated time) --------------

async def test_littles_law_holds_on_a_real_run_of_the_queue(db_path):
    """Poisson arrivals, one session each, the real worker (offline model) behind a 2 s debounce, 240 simulated
    seconds at 60x. L is also sampled independently from the queue itself and must agree with the store's λW."""
    clock = AcceleratedClock(START, 60.0)
    store = await SqliteStore.open(db_path, clock, capacity=10_000, debounce_ms=2000)
    await store.seed_shop(SHOP.items, "test")
    worker = Worker(store, OfflineModel())
    running = asyncio.create_task(worker.run())
    rng = random.Random(21)
    start = clock.now()
    end = start + timedelta(seconds=240)
    samples: list[int] = []

    async def sample() -> None:
        while clock.now() < end:
            samples.append(await store.db.read(lambda conn: conn.execute(
                "SELECT count(*) FROM work WHERE kind = 'agent' AND state IN ('pending', 'running')").fetchone()[0]))
            await clock.sleep(0.5)
    sampler = asyncio.create_task(sample())
    try:
        n = 0
        while clock.now() < end - timedelta(seconds=20):
            n += 1
            await store.admit(Occurrence(f"tg:{n}:1", f"tg:{n}", "how much vanilla", WorkKind.AGENT, f"tg:{n}"))
            await clock.sleep(rng.expovariate(1.0))
        await sampler
        stats = await store.stats(start, end)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
        await store.close()
    assert stats.arrivals > 100
    assert stats.w >= 2.0, stats                                      # no item is claimed inside its debounce
    assert stats.holds, stats                                         # |L - λW| <= 5 % of L
    sampled = sum(samples) / len(samples)
    assert abs(sampled - stats.lam_w) <= 0.2 * stats.lam_w, (sampled, stats)


# ---- C12: forgetting deletes the history that existed (found by bench/mutations.py: no test had any) ----------

async def test_forget_deletes_the_history_the_conversation_had(store, raw):
    await store.admit(Occurrence("tg:1:1", "tg:1", "how much vanilla", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("2 tubs", destination="tg:1"), user_text="how much vanilla")
    assert await store.history("tg:1") == [("user", "how much vanilla"), ("assistant", "2 tubs")]   # there is some
    deleted, cancelled = await store.forget("tg:1", "owner 1")
    assert (deleted, cancelled) == (2, 0)
    assert await store.history("tg:1") == []
    assert raw.execute("SELECT count(*) FROM history").fetchone()[0] == 0
