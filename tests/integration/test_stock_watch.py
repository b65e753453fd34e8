"""The stock watcher on a real store: one work item per low-stock episode, re-arming, capacity, count notices."""
from __future__ import annotations

import json
import sqlite3

import pytest

from producers.stock_watch import StockWatcher
from store import ItemSpec, Occurrence, SqliteStore, StockLevel, Store
from store.shared import shop
from store.sqlite import migrations
from worker.models.offline import OfflineModel
from worker.worker import Worker

OWNER = "tg:42"
ITEMS = (ItemSpec("vanilla", "tubs", 10, 8, 12, 300, 20), ItemSpec("chocolate", "tubs", 12, 6, 12, 250, 20))


@pytest.fixture
async def shop_store(store):
    await store.seed_shop(ITEMS, "test")
    return store


async def set_stock(store: Store, item: str, on_hand: int) -> None:
    """A stock change outside a till count (as `shopbot shop sync --reset-stock` makes)."""
    now = store.now()
    await store.db.write(lambda conn: shop.set_on_hand(conn, item, on_hand, "sync", "test", None, now))


async def till_count(store: Store, till: str, request_id: str, counts: dict) -> None:
    """A till count admitted as the till API does and applied by the worker (without a model)."""
    payload = json.dumps({"counts": counts, "request_id": request_id}, sort_keys=True, separators=(",", ":"))
    source = f"till:{till}:{request_id}"
    await store.admit(Occurrence(source, f"till:{till}", payload, destination=f"till:{till}"))
    await Worker(store, OfflineModel()).drain()
    assert (await store.work_with_report(source)).state == "finished"


def stock_work(raw) -> list[tuple]:
    return [tuple(r) for r in raw.execute(
        "SELECT source, session, payload, destination FROM work WHERE session LIKE 'stock:%' ORDER BY work_id")]


async def test_an_episode_admits_once_rearms_on_recovery_and_a_second_dip_is_new(shop_store, raw):
    store = shop_store
    watcher = StockWatcher(store, OWNER)
    assert await watcher.check() == await watcher.check()       # nothing low: nothing happens
    assert stock_work(raw) == []
    await set_stock(store, "vanilla", 5)
    first = await watcher.check()
    assert first.admitted == ("stock:vanilla:1",)
    assert stock_work(raw) == [("stock:vanilla:1", "stock:vanilla",
                                "Reorder check for vanilla: 5 tubs on hand, below the reorder point of 8. "
                                "Propose an order if needed.", OWNER)]
    for on_hand in (5, 4, 3, 7, 0):                             # many checks while low: nothing more
        await set_stock(store, "vanilla", on_hand)
        assert (await watcher.check()).admitted == ()
    assert len(stock_work(raw)) == 1
    await set_stock(store, "vanilla", 8)                         # on hand >= reorder point: the episode ends
    assert (await watcher.check()).rearmed == ("vanilla",)
    assert (await watcher.check()).rearmed == ()
    assert await store.stock_watch() == [
        StockLevel("chocolate", "tubs", on_hand=12, on_order=0, reorder_point=6, armed=True, episode=1),
        StockLevel("vanilla", "tubs", on_hand=8, on_order=0, reorder_point=8, armed=True, episode=2)]
    await set_stock(store, "vanilla", 2)                         # a second dip is a new episode
    assert (await watcher.check()).admitted == ("stock:vanilla:2",)
    assert [s for s, *_ in stock_work(raw)] == ["stock:vanilla:1", "stock:vanilla:2"]
    # a restarted watcher keeps the episode: the state is in the store
    assert (await StockWatcher(store, OWNER).check()).admitted == ()
    assert await store.check() == []


async def test_a_refusal_for_capacity_leaves_the_item_armed(shop_store, raw):
    store = shop_store
    await store.admit_many([Occurrence(f"tg:7:{i}", "tg:7", f"m{i}", destination="tg:7")
                            for i in range(store.capacity)])
    await set_stock(store, "vanilla", 1)
    watcher = StockWatcher(store, OWNER)
    refused = await watcher.check()
    assert refused.refused == ("stock:vanilla:1",) and refused.admitted == ()
    assert stock_work(raw) == []
    assert (await watcher.check()).refused == ("stock:vanilla:1",)   # still armed: tried again
    await store.forget("tg:7", "test")
    assert (await watcher.check()).admitted == ("stock:vanilla:1",)   # the same episode, once
    assert (await watcher.check()).admitted == ()
    assert [s for s, *_ in stock_work(raw)] == ["stock:vanilla:1"]


async def test_a_till_count_below_the_reorder_point_starts_an_episode(shop_store, raw):
    store = shop_store
    watcher = StockWatcher(store, OWNER, count_tolerance=20)
    await till_count(store, "1", "r1", {"vanilla": 3})
    assert (await store.shop_item("vanilla")).on_hand == 3
    result = await watcher.check()
    assert result.admitted == ("stock:vanilla:1",) and result.notices == ()
    # the worker runs the reorder check; its turn concerns vanilla only, and the report goes to the owner
    await Worker(store, OfflineModel()).drain()
    [(state, destination)] = raw.execute(
        "SELECT w.state, r.destination FROM work w JOIN report_items i USING (work_id) JOIN reports r "
        "USING (report_id) WHERE w.source = 'stock:vanilla:1'").fetchall()
    assert (state, destination) == ("finished", OWNER)
    assert [tuple(r) for r in raw.execute("SELECT DISTINCT chat_id FROM deliveries")] == [(42,)]


async def test_a_count_far_from_the_expected_stock_gets_one_notice(shop_store, raw):
    store = shop_store
    watcher = StockWatcher(store, OWNER, count_tolerance=2)
    await till_count(store, "1", "r1", {"chocolate": 10})           # 12 expected: within the tolerance
    await till_count(store, "1", "r2", {"vanilla": 3, "chocolate": 9})
    # the process dies before the check; a new watcher at startup still announces the count, once
    result = await StockWatcher(store, OWNER, count_tolerance=2).check()
    assert result.notices == ("notice:count:1:r2:vanilla",)
    notices = raw.execute(
        "SELECT w.source, w.kind, w.state, r.body, r.destination FROM work w JOIN report_items i USING (work_id) "
        "JOIN reports r USING (report_id) WHERE w.kind = 'notice' ORDER BY w.work_id").fetchall()
    assert [n[0] for n in notices] == ["notice:count:1:r2:vanilla"]   # chocolate 10 -> 9 is within 2
    source, kind, state, text, destination = notices[0]
    assert (kind, state, destination) == ("notice", "finished", OWNER)
    assert "Till 1" in text and "vanilla" in text and "3 tubs" in text and "10 tubs were expected" in text
    assert (await watcher.check()).notices == ()                    # never twice
    assert (await StockWatcher(store, OWNER, count_tolerance=2).check()).notices == ()
    assert raw.execute("SELECT count(*) FROM work WHERE kind = 'notice'").fetchone()[0] == 1
    assert raw.execute("SELECT count(*) FROM deliveries WHERE chat_id = 42 AND text LIKE 'Till 1 counted%'"
                       ).fetchone()[0] == 1
    assert await store.check() == []


async def test_counts_applied_before_the_migration_are_not_announced(db_path, clock):
    """A database at schema 2 with a till count already applied: migration 0003 marks it as read."""
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    for number, name, sql in migrations.available()[:2]:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                     "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
        for statement in migrations.split_statements(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (number, name))
        conn.execute("COMMIT")
    conn.execute("INSERT INTO items VALUES ('vanilla', 'tubs', 0, 8, 12, 300, 20, 'then')")
    conn.execute("INSERT INTO stock_events (item, kind, old_on_hand, new_on_hand, source, created_at) "
                 "VALUES ('vanilla', 'count', 10, 0, 'till:1:old', 'then')")
    conn.close()
    store = await SqliteStore.open(db_path, clock, capacity=5, debounce_ms=0, migrate=True)
    try:
        assert await store.schema_version() == migrations.LATEST
        watcher = StockWatcher(store, OWNER, count_tolerance=0)
        assert (await watcher.check()).notices == ()
        await till_count(store, "1", "new", {"vanilla": 4})
        assert (await watcher.check()).notices == ("notice:count:1:new:vanilla",)
    finally:
        await store.close()
