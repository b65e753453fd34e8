"""No product text renders "1 <plural>" or "<n≠1> <singular>" for any unit of the example shop (issue 27): the texts
that write a count with a unit, for 1 and for 2, in English and (where the shop names them) Spanish."""
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.shop_file import load_shop
from producers.stock_watch import count_notice, overdue_notice, reorder_prompt
from store import ActionState, Order, OrderState, units
from store.shared.orders import describe
from worker.figures import Figure, figure_line
from worker.models.offline_results import _count

ROOT = Path(__file__).resolve().parents[2]
SHOP = load_shop(ROOT / "shop.example.toml")


def disagreements(text: str, words: units.UnitWords) -> list[str]:
    """Every "1 <plural>" and "<n≠1> <singular>" in `text` (English and Spanish forms)."""
    found = []
    pairs = [(words.one, words.other)] + ([(words.es_one, words.es_other)] if words.es_one else [])
    for one, other in pairs:
        found += re.findall(rf"(?<![\d.,])1 {re.escape(other)}\b", text)
        if one != other:
            found += [m.group(0) for m in re.finditer(rf"(?<![\d.,])(\d+(?:[.,]\d+)?) {re.escape(one)}\b", text)
                      if float(m.group(1).replace(",", ".")) != 1]
    return found


def texts(n: int, unit: str) -> list[str]:
    order = Order(2, "vanilla", n, unit, OrderState.ON_ORDER, datetime(2027, 3, 1, 9, tzinfo=UTC),
                  datetime(2027, 3, 4, 9, tzinfo=UTC), None, None, None, None, None, 1, ActionState.DELIVERED, None,
                  None)
    return [reorder_prompt("vanilla", unit, n, 8, n), overdue_notice(order), describe(order),
            count_notice("1", "r1", "vanilla", unit, int(n), int(n), 0),
            figure_line(Figure("vanilla on hand", n, unit)), figure_line(Figure("vanilla sold per day", n,
                                                                                f"{unit} a day")),
            _count({"unit": unit}, n), _count({"unit": unit}, n, "es")]


@pytest.fixture
def shop_words():
    units.use(SHOP.unit_words)
    yield {w.other: w for w in SHOP.unit_words}


def test_every_text_agrees_with_its_number_for_every_unit_of_the_example_shop(shop_words):
    assert shop_words                                      # the example shop names its units
    for unit, words in shop_words.items():
        for n in (1, 2, 0, 1.5):
            for text in texts(n, unit):
                assert disagreements(text, words) == [], text
    spanish = _count({"unit": "tubs"}, 1, "es") + " / " + _count({"unit": "tubs"}, 3, "es")
    assert spanish == "1 tarrina / 3 tarrinas"


def test_the_check_catches_a_text_that_disagrees(shop_words):
    """Negative control: the texts as they were ("1 tubs") and a singular after another number are caught."""
    words = shop_words["tubs"]
    assert disagreements("strawberry: 1 tubs on hand", words) == ["1 tubs"]
    assert disagreements("vanilla 2 tub, 1 tub, 1.5 tubs, 11 tubs", words) == ["2 tub"]
    assert disagreements("1 tarrinas", words) == ["1 tarrinas"]
    old = f"- vanilla on hand: 1 {'tubs'}"                  # figure_line before the unit words
    assert disagreements(old, words) and not disagreements(figure_line(Figure("vanilla on hand", 1, "tubs")), words)
