"""The real-model benchmark's question set and its checker (bench/real_model.py), committed before any prompt tuning.

The shop is bench/agent_eval.py's (seeded the same way: two weeks of till counts, an approved vanilla order; the
seed's chocolate proposal is refused by the ordering policy, chocolate being above its reorder point, so no proposal
awaits approval). Every expected answer is read from the shop's records at the moment of the question (`Facts`),
never written here as a number: a reply is right when its prose (the report without its Figures block) says what
the records say; where they hold nothing (no order for an item, no open proposal), when it says so.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from store import OnOrder, Proposal, ShopItem, Store
from worker.tools.insight import WindowArgs, days_of_cover, sales_rate
from worker.tools.shop import TurnContext


@dataclass
class Facts:
    """The shop's records, read right before a question."""
    items: dict[str, ShopItem]
    rates: dict[str, float | None]           # sold per day over the last 14 days
    cover: dict[str, float | None]           # days the stock on hand lasts at that rate
    on_order: list[OnOrder]
    proposals: list[Proposal]
    proposals_made: list[Proposal] = field(default_factory=list)   # proposals the question's turn recorded

    @property
    def low(self) -> list[str]:
        return [name for name, i in self.items.items() if i.position < i.reorder_point]


async def read_facts(store: Store) -> Facts:
    ctx = TurnContext(store, "bench", "supplier", timezone="Europe/London")
    items = {i.item: i for i in await store.shop_items()}
    rates = {r["item"]: r["sold_per_day"] for r in (await sales_rate(WindowArgs(), ctx))["items"]}
    cover = {r["item"]: r["days_of_cover"] for r in (await days_of_cover(WindowArgs(), ctx))["items"]}
    return Facts(items, rates, cover, await store.on_order(), await store.open_proposals())


_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:[.,]\d+)?")


def numbers(prose: str) -> list[float]:
    found = []
    for match in _NUMBER.finditer(prose):
        text = match.group(0)
        text = text.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", text) else text.replace(",", ".")
        found.append(float(text))
    return found


def says(prose: str, value: float | None) -> bool:
    """The prose writes `value` (a count, an amount in major units, a rate or days, rounded as people round)."""
    if value is None:
        return False
    for n in numbers(prose):
        if abs(n - value) < 0.051 or (abs(value) >= 5 and abs(n - round(value)) < 0.001 and abs(n - value) < 0.5):
            return True
    return False


def names(prose: str, *items: str) -> bool:
    lowered = prose.lower()
    return all(re.search(rf"\b{re.escape(i.lower())}", lowered) for i in items)


NEGATIVE = re.compile(r"\b(nothing|no|not|none|isn't|aren't|zero|nada|ningun[oa]?)\b", re.IGNORECASE)

Check = Callable[[str, Facts, tuple[str, ...]], bool]


@dataclass(frozen=True)
class Question:
    category: str
    text: str
    check: Check
    expects: str      # what a right answer says, in words (printed with a wrong answer)


def on_hand(item: str) -> Check:
    return lambda prose, f, tools: says(prose, f.items[item].on_hand)


def cost(item: str) -> Check:
    return lambda prose, f, tools: says(prose, f.items[item].unit_cost_cents / 100)


def rate(item: str) -> Check:
    return lambda prose, f, tools: says(prose, f.rates[item])


def cover(item: str) -> Check:
    return lambda prose, f, tools: says(prose, f.cover[item])


def low(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
    return bool(f.low) and names(prose, *f.low)


def on_order(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
    return bool(f.on_order) and all(names(prose, o.item) and says(prose, o.quantity) for o in f.on_order)


def item_on_order(item: str) -> Check:
    def check(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
        orders = [o for o in f.on_order if o.item == item]
        if not orders:
            return bool(NEGATIVE.search(prose)) and "—" not in prose
        return all(says(prose, o.quantity) for o in orders)
    return check


def proposals(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
    if not f.proposals:   # none open (the seed's is refused by policy): a right answer says so
        return bool(NEGATIVE.search(prose)) and "—" not in prose
    return all(names(prose, p.item) and says(prose, p.quantity) for p in f.proposals)


def proposed(item: str, quantity: int) -> Check:
    return lambda prose, f, tools: any(p.item == item and p.quantity == quantity for p in f.proposals_made)


def brief(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
    return low(prose, f, tools) and bool(tools)


def reorder_point(item: str) -> Check:
    return lambda prose, f, tools: says(prose, f.items[item].reorder_point)


def off_topic(prose: str, f: Facts, tools: tuple[str, ...]) -> bool:
    return not tools and "—" not in prose and len(prose) < 400


# Single questions, each in a chat of its own.
SINGLE = [
    Question("stock", "How much vanilla do we have?", on_hand("vanilla"), "vanilla on hand"),
    Question("stock", "How many cones are left?", on_hand("cones"), "cones on hand"),
    Question("low", "What is running low?", low, "every item whose position is below its reorder point"),
    Question("cover", "How long will the chocolate last?", cover("chocolate"), "chocolate's days of cover"),
    Question("sales", "How fast does vanilla sell?", rate("vanilla"), "vanilla sold per day"),
    Question("prices", "What does a tub of chocolate cost?", cost("chocolate"), "chocolate's unit cost"),
    Question("on order", "What is on order?", on_order, "every order on order, its item and quantity"),
    Question("on order", "Is anything on order for cones?", item_on_order("cones"), "that nothing is on order"),
    Question("proposals", "Which proposals are waiting for my approval?", proposals,
             "every open proposal, its item and quantity (none: that none is)"),
    Question("order", "Propose an order of 5 tubs of strawberry.", proposed("strawberry", 5),
             "a proposal of 5 strawberry recorded"),
    Question("brief", "Give me the opening brief.", brief, "the low items, from the tools"),
    Question("spanish", "¿Cuánta vainilla tenemos?", on_hand("vanilla"), "vanilla on hand"),
    Question("off-topic", "What is the capital of France?", off_topic, "one polite sentence, no tools, no blank"),
]

# One conversation of 10 turns in one chat: follow-ups lean on the history.
CONVERSATION = [
    Question("conv", "How much strawberry do we have?", on_hand("strawberry"), "strawberry on hand"),
    Question("conv", "And chocolate?", on_hand("chocolate"), "chocolate on hand"),
    Question("conv", "Which items are below their reorder point?", low, "the low items"),
    Question("conv", "What does a tub of vanilla cost?", cost("vanilla"), "vanilla's unit cost"),
    Question("conv", "How fast does chocolate sell?", rate("chocolate"), "chocolate sold per day"),
    Question("conv", "Is any vanilla on order?", item_on_order("vanilla"), "the vanilla order's quantity"),
    Question("conv", "How many days will the strawberry last?", cover("strawberry"), "strawberry's days of cover"),
    Question("conv", "How many cones do we have?", on_hand("cones"), "cones on hand"),
    Question("conv", "What is the reorder point for vanilla?", reorder_point("vanilla"), "vanilla's reorder point"),
    Question("conv", "So how much vanilla do we have now?", on_hand("vanilla"), "vanilla on hand"),
]
