"""The offline model's reading of one line (pure functions): item matching with case, plurals, typos and aliases,
the ambiguous typo, periods of cover questions, the owner's language; and the shop file's `aliases`."""
from datetime import date
from pathlib import Path

import pytest

from bot.shop_file import ShopFileError, load_shop, parse_shop
from worker.models.offline_understand import Catalogue, Period, allowed_distance, distance, singulars, understand

SHOP = Catalogue(("vanilla", "chocolate", "strawberry", "mint chip", "peach", "pear"),
                 (("vainilla", "vanilla"), ("choc", "chocolate"), ("fresa", "strawberry")))
MONDAY = date(2027, 3, 8)


def test_distance_counts_a_swap_of_neighbours_as_one_edit_and_stops_beyond_its_limit():
    assert distance("vanilla", "vanilla", 2) == 0
    assert distance("vnailla", "vanilla", 2) == 1          # swapped
    assert distance("vanla", "vanilla", 2) == 2            # two dropped
    assert distance("vx", "vanilla", 2) == 3               # beyond the limit: limit + 1
    assert [allowed_distance(n) for n in ("pea", "pear", "peach", "vanilla", "strawberry")] == [0, 1, 1, 2, 3]
    assert "strawberry" in singulars("strawberries") and "peach" in singulars("peaches")


@pytest.mark.parametrize("text,item", [
    ("VANILLA?", "vanilla"), ("vanila", "vanilla"), ("Chocolates", "chocolate"), ("strawberries", "strawberry"),
    ("strawbery", "strawberry"), ("mint", "mint chip"), ("Mint Chip", "mint chip"), ("peaches", "peach"),
    ("vainilla", "vanilla"), ("fresas", "strawberry"), ("peras", "pear"),
])
def test_an_item_is_found_in_any_case_in_the_plural_misspelt_or_by_its_alias(text, item):
    assert understand(text, SHOP).items == (item,)


def test_an_ambiguous_typo_names_the_candidates_and_no_item():
    read = understand("how much peah", SHOP)
    assert (read.intent, read.items, read.candidates) == ("ambiguous", (), ("peach", "pear"))


def test_a_typo_too_far_from_every_name_matches_nothing():
    read = understand("how much vnla", SHOP)       # 3 edits from vanilla, which allows 2
    assert read.intent == "stock" and read.items == () and read.word == "vnla"


def test_without_item_names_a_line_that_may_name_one_waits_for_them():
    assert understand("how much vanilla", None).needs_items
    assert not understand("hola", None).needs_items and understand("hola", None).intent == "greet"


@pytest.mark.parametrize("text,period", [
    ("enough vanilla for the weekend?", Period(until=date(2027, 3, 14), words="weekend")),
    ("enough vanilla until friday", Period(until=date(2027, 3, 12), words="friday")),
    ("enough vanilla until monday", Period(until=MONDAY, words="monday")),
    ("enough vanilla for 3 days", Period(days=3, words="n_days")),
    ("enough vanilla for 2 weeks", Period(days=14, words="n_days")),
    ("will the vanilla last till tomorrow", Period(until=date(2027, 3, 9), words="tomorrow")),
    ("¿alcanza la vainilla hasta el viernes?", Period(until=date(2027, 3, 12), words="viernes")),
    ("¿suficiente vainilla para el fin de semana?", Period(until=date(2027, 3, 14), words="weekend")),
    ("how long will the vanilla last", None),
])
def test_the_period_of_a_cover_question(text, period):
    read = understand(text, SHOP, MONDAY)
    assert (read.intent, read.item, read.period) == ("cover", "vanilla", period)


@pytest.mark.parametrize("text,lang", [("how much vanilla", "en"), ("¿cuánta vainilla hay?", "es"),
                                       ("hola", "es"), ("pide más fresa", "es"), ("order more fresa", "en")])
def test_the_answer_language_follows_the_owner(text, lang):
    assert understand(text, SHOP).lang == lang


def test_order_more_with_or_without_a_quantity():
    assert understand("order more vanilla", SHOP).quantity is None
    read = understand("order 10 vanilla", SHOP)
    assert (read.intent, read.item, read.quantity) == ("order", "vanilla", 10)


SHOP_FILE = """timezone = "UTC"
[items.vanilla]
on_hand = 1
reorder_point = 2
target = 3
unit_cost_cents = 100
{extra}
[items.chocolate]
on_hand = 1
reorder_point = 2
target = 3
unit_cost_cents = 100
"""


def test_the_shop_file_gives_each_items_aliases():
    shop = parse_shop(SHOP_FILE.format(extra='aliases = ["vainilla", "van", "vainilla"]'))
    assert shop.aliases == (("vanilla", ("vainilla", "van")),)
    assert parse_shop(SHOP_FILE.format(extra="")).aliases == ()
    example = load_shop(Path(__file__).parents[2] / "shop.example.toml")
    assert dict(example.aliases)["vanilla"] == ("vainilla",)


@pytest.mark.parametrize("extra,message", [
    ('aliases = "vainilla"', "must be a list"),
    ('aliases = ["Vainilla"]', "lowercase"),
    ("aliases = [3]", "lowercase"),
    ('aliases = ["chocolate"]', "already names chocolate"),
    ("aliases = [" + ", ".join(f'"a{n}"' for n in range(11)) + "]", "at most 10"),
])
def test_bad_aliases_are_refused_with_the_field(extra, message):
    with pytest.raises(ShopFileError, match=message) as caught:
        parse_shop(SHOP_FILE.format(extra=extra))
    assert "items.vanilla.aliases" in str(caught.value)


@pytest.mark.parametrize("text,intent", [("hi", "greet"), ("Hello there!", "greet"), ("good morning", "greet"),
                                         ("buenos días", "greet"), ("thank you so much", "thanks"),
                                         ("muchas gracias", "thanks"), ("good vanilla", "stock")])
def test_a_greeting_or_thanks_alone(text, intent):
    assert understand(text, SHOP).intent == intent


def test_a_greeting_or_thanks_before_a_question_answers_the_question():
    assert understand("hi, what's low?", SHOP).intent == "low"
    assert understand("hi, what's low?", None).needs_items      # the stock's names first, as for any question
    read = understand("thanks! how much vanila", SHOP)
    assert (read.intent, read.item) == ("stock", "vanilla")
    assert understand("hola, ¿cuánta vainilla hay?", SHOP).lang == "es"
    assert understand("thanks, lovely", SHOP).intent == "thanks"     # nothing else asked


@pytest.mark.parametrize("text,lang", [("ok", "en"), ("OK!", "en"), ("got it", "en"), ("great, thanks", "en"),
                                       ("sounds good", "en"), ("vale", "es"), ("perfecto, gracias", "es"),
                                       ("de acuerdo", "es")])
def test_an_acknowledgement_is_answered_in_kind_not_as_a_line_not_understood(text, lang):
    read = understand(text, SHOP)
    assert (read.intent, read.lang) == ("ack", lang)


def test_an_acknowledgement_before_a_question_answers_the_question():
    read = understand("ok, how much vanilla?", SHOP)
    assert (read.intent, read.item) == ("stock", "vanilla")
    assert understand("great, order 6 vanilla", SHOP).intent == "order"


@pytest.mark.parametrize("text,intent", [("order what we need", "reorder"), ("pide lo que falta", "reorder"),
                                         ("what do I need to order", "low"), ("¿qué hay que pedir?", "low"),
                                         ("order more vanilla", "order")])
def test_an_order_without_an_item_reorders_what_is_low_and_a_question_lists_it(text, intent):
    assert understand(text, SHOP).intent == intent
