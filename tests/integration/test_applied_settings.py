"""Applying a suggestion: the owner's Apply press (a recorded decision) makes the suggested reorder point and target
the item's at once, for the stock watcher, `reorder_need`, the stock answers, `shopbot status` and /ops; Keep
records the decision and changes nothing; a second press is no longer valid."""
from __future__ import annotations

from producers.stock_watch import StockWatcher
from producers.telegram.owner import Press, admit_press
from store import ItemSpec
from worker.ordering import Suggestion
from worker.review import setting_buttons
from worker.tools.shop import ItemArgs, NeedArgs, TurnContext, get_item, reorder_need

ITEMS = [ItemSpec("vanilla", "tubs", 10, 8, 12, 300), ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]


async def buttons(store, item: str, rop: int, target: int) -> tuple[str, str]:
    offer = Suggestion(item, 28, 0, 3.0, 1.0, 8, 12, rop, target, "from the sales")
    rows = await store.atomic(lambda tx: setting_buttons(tx, offer, 1))
    (apply, keep), = rows
    assert apply[0] == f"Apply {item}" and keep[0] == f"Keep {item}"
    return apply[1], keep[1]


async def test_apply_is_used_by_the_stock_watcher_and_reorder_at_once(store, raw):
    await store.seed_shop(ITEMS, "test")
    watcher = StockWatcher(store, "tg:1")
    assert (await watcher.check()).admitted == ()            # vanilla 10 is at or above 8
    apply, _ = await buttons(store, "vanilla", 12, 36)
    pressed = await store.atomic(lambda tx: admit_press(tx, Press("cb1", 1, 1, apply, None)))
    assert pressed.decided
    assert pressed.answer.startswith("Applied: vanilla's reorder point is now 12 and its target 36")
    # the next check, without a restart, sees 10 < 12
    assert (await watcher.check()).admitted == ("stock:vanilla:1",)
    need = await reorder_need(NeedArgs(item="vanilla"), TurnContext(store, "r", "supplier"))
    assert (need["quantity"], need["target"]) == (26, 36)
    shown = await get_item(ItemArgs(item="vanilla"), TurnContext(store, "r", "supplier"))
    assert (shown["reorder_point"], shown["target"]) == (12, 36)
    assert (shown["shop_file_reorder_point"], shown["shop_file_target"]) == (8, 12)
    assert tuple(raw.execute("SELECT decided_by, prompt FROM item_settings").fetchone()) == ("owner:1", apply[6:])
    again = await store.atomic(lambda tx: admit_press(tx, Press("cb2", 1, 1, apply, None)))
    assert again.answer == "This button is no longer valid." and not again.decided


async def test_keep_changes_nothing_and_closes_apply(store, raw):
    await store.seed_shop(ITEMS, "test")
    apply, keep = await buttons(store, "chocolate", 9, 20)
    kept = await store.atomic(lambda tx: admit_press(tx, Press("cb1", 1, 1, keep, None)))
    assert kept.decided and kept.answer.startswith("Kept: chocolate stays as it is")
    late = await store.atomic(lambda tx: admit_press(tx, Press("cb2", 1, 1, apply, None)))
    assert late.answer == "This button is no longer valid."
    chocolate = await store.shop_item("chocolate")
    assert chocolate is not None and (chocolate["reorder_point"], chocolate["target"]) == (6, 12)
    assert raw.execute("SELECT count(*) FROM item_settings").fetchone()[0] == 0


async def test_a_press_from_another_chat_is_no_longer_valid(store):
    await store.seed_shop(ITEMS, "test")
    apply, _ = await buttons(store, "vanilla", 12, 36)
    stranger = await store.atomic(lambda tx: admit_press(tx, Press("cb1", 2, 2, apply, None)))
    assert stranger.answer == "This button is no longer valid."
    assert (await store.shop_item("vanilla") or {})["reorder_point"] == 8
