"""The shop's question tools on a real store: sales rate and days of cover from a seeded history of till counts
(computed here by hand), what is on order, recent counts, open proposals; and their figures (C13)."""
import json
from datetime import date, timedelta

import pytest

from store import ItemSpec, Occurrence, Store
from worker.models.base import ModelTurn, ToolCall
from worker.models.offline import OfflineModel
from worker.models.scripted import ScriptedModel
from worker.money import Money, ShopFormat
from worker.tools.insight import (
    CountsArgs,
    ItemFilter,
    NoArgs,
    WindowArgs,
    days_of_cover,
    insight_tools,
    on_order,
    open_proposals,
    recent_counts,
    sales_rate,
)
from worker.tools.registry import ToolError, typed_result
from worker.tools.shop import TurnContext
from worker.worker import Worker

DAY = 86400
ITEMS = [ItemSpec("vanilla", "tubs", 20, 8, 20, 300), ItemSpec("chocolate", "tubs", 10, 6, 12, 250),
         ItemSpec("strawberry", "tubs", 8, 5, 5, 200)]


async def till_count(store: Store, request_id: str, counts: dict) -> None:
    """A till count admitted as the till API does and applied by the worker (no model)."""
    payload = json.dumps({"counts": counts, "request_id": request_id}, sort_keys=True, separators=(",", ":"))
    await store.admit(Occurrence(f"till:1:{request_id}", "till:1", payload, destination="till:1"))
    await Worker(store, OfflineModel()).drain()


@pytest.fixture
async def history(store, clock):
    """Seeded on day 0; till counts on days 2, 4 (chocolate restocked) and 6; now is day 7, one hour in."""
    await store.seed_shop(ITEMS, "test")
    clock.advance(2 * DAY)
    await till_count(store, "d2", {"vanilla": 14, "chocolate": 7, "strawberry": 8})
    clock.advance(2 * DAY)
    await till_count(store, "d4", {"vanilla": 10, "chocolate": 20})
    clock.advance(2 * DAY)
    await till_count(store, "d6", {"vanilla": 7, "chocolate": 16, "strawberry": 8})
    clock.advance(DAY + 3600)
    return store


def ctx(store):
    return TurnContext(store, "run-x", "supplier", timezone="UTC")


def by_item(result):
    return {row["item"]: row for row in result["items"]}


async def test_sales_are_the_decreases_between_counts_and_restocks_are_never_negative_sales(history):
    rows = by_item(await sales_rate(WindowArgs(), ctx(history)))
    basis = 7 + 1 / 24            # the window (14 days) starts before the first record: measured from the seed
    # vanilla 20 -> 14 -> 10 -> 7: sold 6 + 4 + 3 = 13
    assert rows["vanilla"]["sold"] == 13 and rows["vanilla"]["restocked"] == 0
    assert rows["vanilla"]["sold_per_day"] == round(13 / basis, 2) == 1.85
    # chocolate 10 -> 7 -> 20 -> 16: sold 3 + 4 = 7; the rise of 13 is a restock
    assert rows["chocolate"]["sold"] == 7 and rows["chocolate"]["restocked"] == 13
    assert rows["chocolate"]["sold_per_day"] == round(7 / basis, 2) == 0.99
    # strawberry counted at 8 every time: no sales
    assert rows["strawberry"]["sold"] == 0 and rows["strawberry"]["sold_per_day"] == 0.0
    assert rows["strawberry"]["note"] == "no sales recorded in the window"
    assert rows["vanilla"]["since"] == date(2027, 3, 1) and rows["vanilla"]["basis_days"] == 7.0


async def test_a_short_window_counts_only_the_records_inside_it(history):
    rows = by_item(await sales_rate(WindowArgs(days=3), ctx(history)))
    # (day 4 + 1 h, day 7 + 1 h]: only the day-6 count is inside: vanilla 10 -> 7, chocolate 20 -> 16
    assert (rows["vanilla"]["sold"], rows["vanilla"]["sold_per_day"]) == (3, 1.0)
    chocolate = rows["chocolate"]
    assert (chocolate["sold"], chocolate["restocked"], chocolate["sold_per_day"]) == (4, 0, 1.33)


async def test_days_of_cover_at_the_rate_and_none_for_an_item_that_does_not_sell(history):
    rows = by_item(await days_of_cover(WindowArgs(), ctx(history)))
    basis = 7 + 1 / 24
    cover = 7 / (13 / basis)
    assert rows["vanilla"]["days_of_cover"] == round(cover, 1) == 3.8
    now = history.clock.now()
    assert rows["vanilla"]["runs_out_on"] == (now + timedelta(days=cover)).date() == date(2027, 3, 12)
    assert rows["chocolate"]["days_of_cover"] == round(16 / (7 / basis), 1) == 16.1
    assert rows["strawberry"]["days_of_cover"] is None and "runs_out_on" not in rows["strawberry"]
    assert rows["strawberry"]["note"] == "no sales recorded in the window"


async def test_too_little_history_gives_no_rate(store, clock):
    await store.seed_shop(ITEMS, "test")
    clock.advance(60)
    rows = by_item(await sales_rate(WindowArgs(), ctx(store)))
    assert rows["vanilla"]["sold_per_day"] is None and rows["vanilla"]["note"] == "too little stock history for a rate"


async def test_an_unknown_item_is_a_tool_error_naming_the_items(history):
    with pytest.raises(ToolError, match="unknown item 'pistachio'; the shop has: chocolate, strawberry, vanilla"):
        await sales_rate(WindowArgs(item="pistachio"), ctx(history))


async def test_recent_counts_newest_first(history):
    counts = (await recent_counts(CountsArgs(item="chocolate", limit=2), ctx(history)))["counts"]
    assert [(c["before"], c["counted"], c["till_request"]) for c in counts] == [(20, 16, "till:1:d6"),
                                                                                (7, 20, "till:1:d4")]


async def test_the_results_numbers_become_figures_with_labels_and_units(history):
    payload, figures = typed_result(await days_of_cover(WindowArgs(item="vanilla"), ctx(history)),
                                    ShopFormat("USD", "en_GB", "UTC"))
    lines = {(f.label, f.value, f.unit) for f in figures}
    assert ("vanilla days of cover", 3.8, "days") in lines
    assert ("vanilla sold per day", 1.85, "tubs a day") in lines
    assert ("vanilla on hand", 7, "tubs") in lines
    assert ("vanilla runs out on", date(2027, 3, 12), "") in lines
    assert ("window days", 14, "days") in lines
    assert payload["items"][0]["runs_out_on"] == "2027-03-12"


async def test_on_order_and_open_proposals_come_from_the_proposal_records(history):
    await history.admit(Occurrence("tg:7:1", "tg:7", "order vanilla", destination="tg:7"))
    model = ScriptedModel([ModelTurn("", (ToolCall("c1", "propose_order", '{"item": "vanilla", "quantity": 6}'),
                                          ToolCall("c2", "propose_order", '{"item": "chocolate", "quantity": 2}'))),
                           ModelTurn("Proposed.", ())])
    await Worker(history, model).drain()
    proposals = (await open_proposals(NoArgs(), ctx(history)))["proposals"]
    # chocolate's position is at or above its reorder point: policy rejects that proposal, so only vanilla waits
    assert [(p["item"], p["quantity"], p["total_cents"]) for p in proposals] == [("vanilla", 6, 1800)]
    assert (await on_order(ItemFilter(), ctx(history)))["orders"] == []   # proposed is not on order
    await history.atomic(lambda tx: tx.approve_proposal(proposals[0]["proposal_id"], "owner", day="2027-03-08",
                                                        day_max_cents=None, destination="supplier:supplier"))
    (order,) = (await on_order(ItemFilter(), ctx(history)))["orders"]
    assert (order["item"], order["quantity"], order["total_cents"], order["delivery"]) == ("vanilla", 6, 1800,
                                                                                         "pending")
    cover = by_item(await days_of_cover(WindowArgs(item="vanilla"), ctx(history)))["vanilla"]
    assert cover["on_order"] == 6 and cover["days_of_cover_with_on_order"] == round(13 / (13 / (7 + 1 / 24)), 1)
    payload, figures = typed_result({"orders": [order]}, ShopFormat())
    assert payload["orders"][0]["total"] == "$18.00"
    assert any(f.value == Money(1800) and f.label == "vanilla total" for f in figures)


def test_every_insight_tool_only_reads():
    assert {t.effect for t in insight_tools()} == {"read"}


def test_numbers_in_a_tools_sentence_are_figures_and_cents_read_as_money():
    payload, figures = typed_result({"item": "vanilla", "till_request": "till:1:d6",
                                     "reason": "the total of 1800 cents is over the limit of 1500 cents (r12.1)"},
                                    ShopFormat())
    assert payload["reason"] == "the total of $18.00 is over the limit of $15.00 (r12.1)"
    assert payload["till_request"] == "till:1:d6"                       # an identifier, not a sentence
    assert [(f.value, f.subject) for f in figures] == [(Money(1800), None), (Money(1500), None)]
