"""Money as the owner reads it, through Babel (CLDR): every currency the shop file may name, the right number of
minor units (KWD has 3), and a refusal at start of a currency Babel cannot format."""
from __future__ import annotations

import pytest

from bot.shop_file import ShopFileError, parse_shop
from worker.money import Money, ShopFormat

SHOP = 'timezone = "Europe/London"\ncurrency = "{}"\n[items.vanilla]\non_hand = 1\nreorder_point = 1\ntarget = 1\n' \
       'unit_cost_cents = 1\n'


@pytest.mark.parametrize("currency,locale,cents,shown", [
    ("USD", "en_US", 180050, "$1,800.50"),
    ("EUR", "de_DE", 123456, "1.234,56\u00a0€"),
    ("EUR", "fr_FR", 300, "3,00\u00a0€"),
    ("JPY", "en_US", 300, "¥300"),                    # no minor unit
    ("KWD", "en_US", 1000, "KWD1.000"),               # 1000 fils are one dinar, not 10.00
    ("GBP", "en_GB", -250, "-£2.50"),
])
def test_money_reads_in_the_shops_locale_with_the_currencys_own_places(currency, locale, cents, shown):
    fmt = ShopFormat(currency, locale)
    assert fmt.money(Money(cents, currency)) == shown == fmt.cents(cents)
    assert "cent" not in shown


def test_the_exponent_is_cldrs():
    assert (Money(1, "USD").exponent, Money(1, "JPY").exponent, Money(1, "KWD").exponent) == (2, 0, 3)
    assert Money(1000, "KWD").major == 1.0


def test_a_currency_babel_cannot_format_is_refused_at_start():
    assert parse_shop(SHOP.format("KWD")).currency == "KWD"
    with pytest.raises(ShopFileError, match="Babel"):
        parse_shop(SHOP.format("XYZ"))                  # three letters, but no currency: once accepted
    with pytest.raises(ValueError, match="Babel"):
        ShopFormat("XYZ")
