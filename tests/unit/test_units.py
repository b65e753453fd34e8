"""Words that agree with numbers (store/units.py)."""
import pytest

from store import units
from store.units import UnitWords


@pytest.fixture(autouse=True)
def _no_shop_forms():
    units.use(())
    yield
    units.use(())


@pytest.mark.parametrize("plural, one", [("tubs", "tub"), ("boxes", "box"), ("berries", "berry"), ("kg", "kg"),
                                         ("units", "unit"), ("bunches", "bunch"), ("glass", "glass"),
                                         ("bottles", "bottle"), ("potatoes", "potato"), ("Tubs", "Tub")])
def test_the_english_rule_derives_the_singular(plural, one):
    assert units.singular(plural) == one


def test_one_takes_the_singular_and_every_other_number_the_plural():
    assert units.count(1, "tubs") == "1 tub"
    assert units.count(1.0, "tubs") == "1.0 tub"
    assert [units.count(n, "tubs") for n in (0, 2, 1.5, 0.5)] == ["0 tubs", "2 tubs", "1.5 tubs", "0.5 tubs"]
    assert units.count(1, "boxes") == "1 box" and units.count(3, "") == "3"
    assert units.count(1, "tubs", shown="1,0") == "1,0 tub"


def test_spanish_words_only_when_the_shop_names_them():
    assert units.count(1, "tubs", "es") == "1 tub"          # no Spanish forms given: the shop's own word
    units.use([UnitWords("tub", "tubs", "tarrina", "tarrinas"), UnitWords("loaf", "loaves")])
    assert units.count(1, "tubs", "es") == "1 tarrina" and units.count(4, "tubs", "es") == "4 tarrinas"
    assert units.count(1, "loaves") == "1 loaf"             # the rule would say "loave": the file's form wins
    assert units.count(2, "tubs") == "2 tubs"


def test_the_forms_are_replaced_not_merged():
    units.use([UnitWords("loaf", "loaves")])
    units.use([])
    assert units.count(1, "loaves") == "1 loave"            # negative control: without the file's form, the rule


SHOP = """timezone = "UTC"
[items.vanilla]
unit = "tubs"
unit_es = ["tarrina", "tarrinas"]
on_hand = 1
reorder_point = 2
target = 4
unit_cost_cents = 300
[items.bread]
unit = ["loaf", "loaves"]
on_hand = 1
reorder_point = 2
target = 4
unit_cost_cents = 300
[items.cones]
on_hand = 1
reorder_point = 2
target = 4
unit_cost_cents = 300
"""


def test_the_shop_file_gives_a_units_forms_and_old_files_keep_working():
    from bot.shop_file import parse_shop
    shop = parse_shop(SHOP)
    assert {i.item: i.unit for i in shop.items} == {"vanilla": "tubs", "bread": "loaves", "cones": "units"}
    assert set(shop.unit_words) == {UnitWords("tub", "tubs", "tarrina", "tarrinas"), UnitWords("loaf", "loaves"),
                                    UnitWords("unit", "units")}


@pytest.mark.parametrize("line, error", [
    ('unit_es = "tarrinas"', "items.vanilla.unit_es must be [\"singular\", \"plural\"]"),
    ('unit_es = ["tarrina"]', "items.vanilla.unit_es must be"),
    ('unit_es = ["tarrina", ""]', "items.vanilla.unit_es must be a line of text"),
])
def test_a_malformed_unit_is_refused_with_its_path(line, error):
    from bot.shop_file import ShopFileError, parse_shop
    with pytest.raises(ShopFileError, match=error.replace("[", r"\[")):
        parse_shop(SHOP.replace('unit_es = ["tarrina", "tarrinas"]', line))


def test_one_unit_reads_one_way_across_items():
    from bot.shop_file import ShopFileError, parse_shop
    clash = SHOP.replace('[items.bread]\nunit = ["loaf", "loaves"]', '[items.bread]\nunit = ["tubby", "tubs"]')
    with pytest.raises(ShopFileError, match="one unit reads one way"):
        parse_shop(clash)
    # the Spanish forms given on one item serve the other items with that unit
    shared = SHOP.replace('[items.bread]\nunit = ["loaf", "loaves"]', '[items.bread]\nunit = "tubs"')
    assert [w for w in parse_shop(shared).unit_words if w.other == "tubs"] == [
        UnitWords("tub", "tubs", "tarrina", "tarrinas")]
