"""The suggestion math (worker/ordering.py) against examples worked by hand, and the fitting of order quantities to
the supplier's pack, minimum order and limit. z for 95 % is 1.6449 (tables: 1.645), √3 = 1.7321, √10 = 3.1623."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from store import SalesDay, SaleSource
from worker.ordering import OrderingSettings, fit_order, money_lost_per_day, suggest, window, z_value


def days(*quantities: int | None, out: tuple[int, ...] = ()) -> list[SalesDay]:
    return [SalesDay("vanilla", date(2027, 3, 1) + timedelta(days=i), q, None if q is None else SaleSource.TILL,
                     i in out) for i, q in enumerate(quantities)]


def test_z_from_the_service_level():
    assert round(z_value(0.95), 3) == 1.645 and round(z_value(0.99), 3) == 2.326
    with pytest.raises(ValueError):
        z_value(1.0)


def test_the_window_is_the_whole_days_before_today():
    assert window(date(2027, 3, 29), 28) == (date(2027, 3, 1), date(2027, 3, 28))


def test_steady_sales():
    """14 days alternating 2 and 4: d = 3, σ = 1 (population). L = 3, R = 7.
    ROP = 3·3 + 1.6449·1·√3 = 9 + 2.849 = 11.85 -> 12;  S = 3·10 + 1.6449·1·√10 = 30 + 5.202 = 35.20 -> 36."""
    s = suggest("vanilla", days(*[2, 4] * 7), lead_days=3, current_reorder_point=8, current_target=8)
    assert (s.days, s.daily_mean, s.daily_sd) == (14, 3.0, 1.0)
    assert (s.reorder_point, s.target) == (12, 36)
    assert s.to_json() == {"item": "vanilla", "days": 14, "daily_mean": 3.0, "daily_sd": 1.0,
                           "reorder_point": {"current": 8, "suggested": 12},
                           "target": {"current": 8, "suggested": 36}, "reason": s.reason}
    assert "14 counted day(s)" in s.reason and "95%" in s.reason


def test_zero_sale_days_count():
    """28 days: 21 of 0 and 7 of 4. d = 28/28 = 1; E[x²] = 7·16/28 = 4, σ² = 4 − 1 = 3, σ = 1.7321. L = 2, R = 7.
    ROP = 1·2 + 1.6449·1.7321·√2 = 2 + 4.029 = 6.03 -> 7;  S = 1·9 + 1.6449·1.7321·3 = 9 + 8.547 = 17.55 -> 18."""
    s = suggest("chocolate", days(*([0, 0, 0, 4] * 7)), lead_days=2, current_reorder_point=6, current_target=12)
    assert s.days == 28 and s.daily_mean == 1.0 and round(s.daily_sd or 0, 4) == 1.7321
    assert (s.reorder_point, s.target) == (7, 18)


def test_stock_out_days_are_left_out_and_said():
    """14 days of 5 and 2 days out of stock (1 sold each, censored). Counted: the 14 days, d = 5, σ = 0.
    ROP = 5·3 = 15; S = 5·10 = 50. With the two days counted d would be 4.5 and σ > 0."""
    s = suggest("strawberry", days(*([5] * 14), 1, 1, out=(14, 15)), lead_days=3, current_reorder_point=5,
                current_target=5)
    assert (s.days, s.out_of_stock_days, s.daily_mean, s.daily_sd) == (14, 2, 5.0, 0.0)
    assert (s.reorder_point, s.target) == (15, 50)
    assert "2 day(s) out of stock left out" in s.reason


def test_days_without_a_record_do_not_count():
    s = suggest("vanilla", days(*([3] * 14), None, None), lead_days=3, current_reorder_point=8, current_target=8)
    assert s.days == 14 and (s.reorder_point, s.target) == (9, 30)      # 3·3 = 9; 3·10 = 30 (σ = 0)


def test_too_little_history_gives_no_suggestion_and_says_why():
    s = suggest("vanilla", days(*([3] * 13)), lead_days=3, current_reorder_point=8, current_target=8)
    assert (s.reorder_point, s.target) == (None, None)
    assert s.reason == "only 13 counted day(s) of sales in the last 28 (14 needed)"
    # 14 records, but 2 days out of stock: 12 counted, still too few
    s = suggest("vanilla", days(*([3] * 14), out=(0, 1)), lead_days=3, current_reorder_point=8, current_target=8)
    assert s.reorder_point is None and s.reason.endswith("(14 needed); 2 day(s) out of stock left out")
    assert s.to_json()["reorder_point"] == {"current": 8, "suggested": None}


def test_no_sales_gives_no_suggestion():
    s = suggest("vanilla", days(*([0] * 20)), lead_days=3, current_reorder_point=8, current_target=8)
    assert s.reorder_point is None and s.reason == "no sales in 20 counted day(s)"


def test_settings_change_the_answer():
    """d = 3, σ = 1, L = 3, R = 14, 99 % (z = 2.3263): ROP = 9 + 2.3263·√3 = 13.03 -> 14;
    S = 3·17 + 2.3263·√17 = 51 + 9.592 = 60.59 -> 61."""
    settings = OrderingSettings(history_days=28, service_level=0.99, review_days=14)
    s = suggest("vanilla", days(*[2, 4] * 7), lead_days=3, current_reorder_point=8, current_target=8,
                settings=settings)
    assert (s.reorder_point, s.target) == (14, 61)


def test_a_suggestion_differs_by_one_unit_and_ten_percent():
    def make(rop: int, target: int) -> bool:
        s = suggest("v", days(*[2, 4] * 7), lead_days=3, current_reorder_point=rop, current_target=target)
        return s.differs()          # suggested 12 and 36
    assert make(8, 36)              # 12 vs 8
    assert not make(12, 36)         # both equal
    assert not make(11, 35)         # one unit each, but under 10 % of 11 and of 35
    assert make(11, 32)             # 36 vs 32: 4 units, 12.5 %


def test_packs_minimum_order_and_the_limit():
    assert fit_order(13, pack=6).quantity == 18
    assert fit_order(13, pack=6).note == "13 units rounded up to whole packs of 6: 18 units"
    assert fit_order(12, pack=6) == fit_order(12)                           # already whole packs: no note
    assert fit_order(3, min_order=5).quantity == 5
    assert fit_order(3, min_order=5, pack=4, unit="tubs").note == (
        "3 tubs raised to the minimum order of 5, then rounded up to whole packs of 4: 8 tubs")
    down = fit_order(13, pack=6, max_order=15)                               # 18 would pass 15: the last pack under
    assert down.quantity == 12 and "rounded down to 12, the last whole pack under the limit of 15" in (down.note or "")
    assert fit_order(25, pack=6, max_order=20).quantity == 25               # over the limit as asked: policy refuses
    assert fit_order(0, pack=6).quantity == 0
    assert fit_order(5, pack=24, max_order=20).quantity == 0


def test_money_lost_per_day():
    assert money_lost_per_day(2.5, 450, 300) == 1125.0      # the price when known
    assert money_lost_per_day(2.5, None, 300) == 750.0      # else the unit cost


def test_the_shop_file_reads_ordering_and_the_new_item_keys():
    from bot.shop_file import ShopFileError, parse_shop
    base = 'timezone = "UTC"\n[items.vanilla]\non_hand = 1\nreorder_point = 2\ntarget = 4\nunit_cost_cents = 300\n'
    shop = parse_shop(base + "pack = 6\nmin_order = 6\nprice_cents = 450\nmax_order = 24\n"
                      "[ordering]\nhistory_days = 56\nservice_level = 0.99\nreview_days = 14\n")
    (spec,) = shop.items
    assert (spec.pack, spec.min_order, spec.price_cents) == (6, 6, 450)
    assert (shop.ordering.history_days, shop.ordering.service_level, shop.ordering.review_days) == (56, 0.99, 14)
    assert parse_shop(base).ordering == OrderingSettings()
    with pytest.raises(ShopFileError) as bad:
        parse_shop(base + "pack = 30\nmax_order = 24\n[ordering]\nservice_level = 1.5\nhorizon = 3\n")
    text = str(bad.value)
    assert "items.vanilla.pack (30) is over its max_order (24)" in text
    assert "unknown field ordering.horizon" in text
