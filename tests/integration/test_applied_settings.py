"""Applying a suggestion: the owner's Apply press (a recorded decision) makes the suggested reorder point and target
the item's at once, for the stock watcher, `reorder_need`, the stock answers, `shopbot status` and /ops; Keep
records the decision and changes nothing; a second press is no longer valid. In the running product the press runs
the stock watcher's check right after its commit, as a till count does: the reorder check and its proposal come
without waiting for the scheduled check."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.sandbox.local_setup import OWNER_ID, LocalRun, local_product
from producers.stock_watch import StockWatcher
from producers.telegram.owner import Press, admit_press
from store import ItemSpec, Occurrence, ReportDraft, Transaction, WorkKind
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
    assert chocolate is not None and (chocolate.reorder_point, chocolate.target) == (6, 12)
    assert raw.execute("SELECT count(*) FROM item_settings").fetchone()[0] == 0


async def test_a_press_from_another_chat_is_no_longer_valid(store):
    await store.seed_shop(ITEMS, "test")
    apply, _ = await buttons(store, "vanilla", 12, 36)
    stranger = await store.atomic(lambda tx: admit_press(tx, Press("cb1", 2, 2, apply, None)))
    assert stranger.answer == "This button is no longer valid."
    assert getattr(await store.shop_item("vanilla"), "reorder_point", None) == 8


# The product's example shop, with a stock watcher schedule that does not fire during a test (29 February): an
# episode can only come from the check the press runs. Chocolate: 12 on hand, reorder point 6 in the file.
FAR_CRON = '[stock_watch]\ncron = "0 0 29 2 *"'
CHOCOLATE = Suggestion("chocolate", 28, 0, 3.5, 1.0, 6, 12, 13, 20, "from the sales")


@pytest.fixture
def quiet_shop(tmp_path: Path) -> Path:
    example = (Path(__file__).parents[2] / "bot" / "sandbox" / "shop.example.toml").read_text()
    shop = example.replace('[stock_watch]\ncron = "*/15 * * * *"', FAR_CRON)
    assert shop != example
    (tmp_path / "shop.toml").write_text(shop)
    return tmp_path / "shop.toml"


async def press_apply(run: LocalRun) -> None:
    """The owner presses Apply under a suggestion (13 and 20 for chocolate) in the running product; returns once the
    poller confirmed the press's update, that is after the press's commit and everything it runs after it."""
    parts = run.app.parts
    assert parts.producers is not None
    await asyncio.wait_for(parts.producers.started.wait(), 15)      # the start-up check is behind us

    def offer(tx: Transaction) -> None:
        rows = setting_buttons(tx, CHOCOLATE, OWNER_ID)
        tx.admit_answered(Occurrence("notice:suggestion:chocolate", "notice:suggestion", "suggestion",
                                     WorkKind.NOTICE, f"tg:{OWNER_ID}"),
                          lambda t, work_id: ReportDraft("chocolate: reorder point 6 → 13, target 12 → 20",
                                                         destination=f"tg:{OWNER_ID}", buttons=rows))
    await parts.store.atomic(offer)
    parts.store.signals.deliveries.notify()
    await run.api.wait_for(lambda: any(m.text.startswith("chocolate: reorder point") for m in run.owner_messages()),
                           timeout=15)
    card = next(m for m in run.owner_messages() if m.text.startswith("chocolate: reorder point"))
    apply = card.reply_markup["inline_keyboard"][0][0]
    assert apply["text"] == "Apply chocolate"
    update = run.api.post_callback(OWNER_ID, OWNER_ID, apply["callback_data"], card.message_id)
    await run.admitted(update["update_id"], timeout=15)
    chocolate = await parts.store.shop_item("chocolate")
    assert chocolate is not None and (chocolate.on_hand, chocolate.reorder_point) == (12, 13)


def chocolate_proposed(run: LocalRun) -> bool:
    return any(m.text.startswith("Order proposal") and "chocolate" in m.text.splitlines()[0]
               for m in run.owner_messages())


async def test_apply_runs_the_stock_watchers_check_at_once_in_the_running_product(quiet_shop):
    async with local_product({"SHOPBOT_SHOP_FILE": str(quiet_shop), "SHOPBOT_DEBOUNCE_MS": "0",
                              "SHOPBOT_CHAT_PACE_MS": "0"}) as run:
        await press_apply(run)
        # the episode was admitted by the check the press ran after its commit, before the poller went on
        episode = await run.app.parts.store.work_with_report("stock:chocolate:1")
        assert episode is not None
        # and the worker's reorder check turns it into a proposal card, with no scheduled check in between
        await run.api.wait_for(lambda: chocolate_proposed(run), timeout=20)


async def test_negative_control_without_the_press_check_the_episode_waits_for_the_schedule(quiet_shop):
    """The same press with the Ingress's check removed: the value is applied, yet no episode until a check runs
    (here the scheduled one, called by hand), so the test above sees the press's own check."""
    async with local_product({"SHOPBOT_SHOP_FILE": str(quiet_shop), "SHOPBOT_DEBOUNCE_MS": "0",
                              "SHOPBOT_CHAT_PACE_MS": "0"}) as run:
        parts = run.app.parts
        assert parts.ingress is not None and parts.producers is not None
        parts.ingress.on_stock_change = None
        await press_apply(run)
        assert await parts.store.work_with_report("stock:chocolate:1") is None
        assert not chocolate_proposed(run)
        assert (await parts.producers.watcher.check()).admitted == ("stock:chocolate:1",)
