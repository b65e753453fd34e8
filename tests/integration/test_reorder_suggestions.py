"""Reorder suggestions as the model and the owner get them (the `reorder_suggestions` tool, the offline model's
phrases), and packs and minimum orders applied by `reorder_need`, drafts and proposals, on a real store."""
from __future__ import annotations

from datetime import date, timedelta

from store import ItemSpec, Occurrence, SaleLine
from worker.models.offline import OfflineModel
from worker.tools.insight import ItemFilter, reorder_suggestions
from worker.tools.shop import NeedArgs, OrderArgs, TurnContext, draft_order, reorder_need
from worker.worker import Worker, WorkerSettings

ITEMS = [ItemSpec("vanilla", "tubs", 2, 8, 8, 300, max_order=20, pack=6, min_order=6),
         ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]
TODAY = date(2027, 3, 1)        # the clock's START


async def history(store) -> None:
    """vanilla 2, 4, 2, 4 ... over the 28 days before today (d = 3, σ = 1); chocolate 5 days only."""
    await store.seed_shop(ITEMS, "test")
    lines = [SaleLine(n, "vanilla", (TODAY - timedelta(days=n)).isoformat(), 2 if n % 2 else 4) for n in range(1, 29)]
    lines += [SaleLine(100 + n, "chocolate", (TODAY - timedelta(days=n)).isoformat(), 1) for n in range(1, 6)]
    assert (await store.import_sales(lines, "UTC", "test")).added == 33


def ctx(store) -> TurnContext:
    return TurnContext(store, "run-x", "supplier", timezone="UTC", lead_time_days=3)


async def test_the_tool_gives_the_suggestions_beside_the_current_values(store):
    await history(store)
    result = await reorder_suggestions(ItemFilter(), ctx(store))
    rows = {row["item"]: row for row in result["items"]}
    # ROP = 9 + 1.6449·√3 = 11.85 -> 12; S = 30 + 1.6449·√10 = 35.20 -> 36
    assert rows["vanilla"]["reorder_point"] == {"current": 8, "suggested": 12}
    assert rows["vanilla"]["target"] == {"current": 8, "suggested": 36}
    assert rows["chocolate"]["target"]["suggested"] is None and "only 5 counted day(s)" in rows["chocolate"]["reason"]
    assert (result["history_days"], result["review_days"], result["lead_time_days"]) == (28, 7, 3)


async def test_the_offline_model_suggests_in_english_and_spanish(store):
    await history(store)
    for source, text in (("tg:1:1", "suggest reorder points"), ("tg:1:2", "sugiere puntos de pedido")):
        await store.admit(Occurrence(source, "tg:1", text, destination="tg:1"))
        await Worker(store, OfflineModel(), WorkerSettings(shop_timezone="UTC", lead_time_days=3)).drain()
    english, spanish = sorted((await store.reports()), key=lambda r: r.report)
    assert "vanilla: reorder point 8 → 12, target 8 → 36 (28 counted days)" in english.body
    assert "chocolate: no suggestion (only 5 counted day(s)" in english.body
    assert "vanilla: punto de pedido 8 → 12, objetivo 8 → 36 (28 días contados)" in spanish.body


async def test_packs_and_minimum_orders_in_reorder_need_and_drafts(store):
    await store.seed_shop(ITEMS, "test")
    need = await reorder_need(NeedArgs(item="vanilla"), ctx(store))
    # target 8 - position 2 = 6: already the minimum and a whole pack
    assert need["quantity"] == 6 and "note" not in need
    # the reorder point beside the target: without it a small model gave the target as vanilla's reorder point
    assert (need["reorder_point"], need["target"], need["below_reorder_point"]) == (8, 8, True)
    await store.apply_setting("vanilla", 8, 15, "owner")       # 13 needed: three packs, 18 (within 20)
    need = await reorder_need(NeedArgs(item="vanilla"), ctx(store))
    assert need["quantity"] == 18 and need["note"] == "13 tubs rounded up to whole packs of 6: 18 tubs"
    await store.apply_setting("vanilla", 8, 21, "owner")       # 19 -> 24 would pass the limit of 20: 18
    need = await reorder_need(NeedArgs(item="vanilla"), ctx(store))
    assert need["quantity"] == 18 and "rounded down to 18, the last whole pack under the limit of 20" in need["note"]
    run = await store.admit(Occurrence("tg:1:9", "tg:1", "x", destination="tg:1"))
    claim = await store.claim("w1")
    assert run and claim is not None
    draft = await draft_order(OrderArgs(item="vanilla", quantity=4), TurnContext(store, claim.run_id, "supplier"))
    assert draft["quantity"] == 6 and draft["note"] == (
        "4 tubs raised to the minimum order of 6: 6 tubs")
