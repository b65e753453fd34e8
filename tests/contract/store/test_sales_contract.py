"""The sales history (till days and imported days, never both), the import's all-or-nothing checks, and the owner's
applied reorder point and target, on every store (store/shared/sales.py)."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from store import ItemSpec, ManualClock, Occurrence, SaleLine, SalesDay, SaleSource, Store, Transaction, WorkKind

SHOP = [ItemSpec("vanilla", "tubs", 20, 8, 12, 300, max_order=40), ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]
DAY = 86400
D0 = date(2027, 3, 1)        # the clock's START (09:00 UTC)


async def count(store: Store, request: str, counts: dict[str, int]) -> None:
    """A till turn: admitted, claimed and finished with its counts applied (as the worker does, no model)."""
    source = f"till:1:{request}"
    await store.admit(Occurrence(source, "till:1", request, WorkKind.AGENT, "till:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.finish_counts(claim, [(source, {"counts": counts})], lambda applied: "counted")


def day(n: int) -> str:
    return (D0 + timedelta(days=n)).isoformat()


def rows(found: list[SalesDay]) -> list[tuple]:
    """The days as plain values, each checked for its types on the way (a date, a SaleSource member or None)."""
    assert all(isinstance(r, SalesDay) and isinstance(r.day, date) and (r.source is None or type(r.source) is
                                                                           SaleSource) for r in found)
    return [(r.item, r.day.isoformat(), r.quantity, r.source, r.out_of_stock) for r in found]


async def test_till_days_are_decreases_between_counts_and_restocks_are_never_negative(store: Store,
                                                                                      clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")               # day 0: vanilla 20 (a seed is no till count)
    for n, on_hand in ((1, 15), (2, 15), (3, 30), (4, 0), (6, 10)):
        clock.set(clock.now().replace(day=1 + n))
        await count(store, f"d{n}", {"vanilla": on_hand})
    found = rows(await store.sales_days(D0, D0 + timedelta(days=6), "UTC", "vanilla"))
    assert found == [
        ("vanilla", day(1), 5, "till", False),
        ("vanilla", day(2), 0, "till", False),             # counted, nothing sold: a record of 0
        ("vanilla", day(3), 0, "till", False),             # a restock (15 -> 30) is never a negative sale
        ("vanilla", day(4), 30, "till", True),             # sold out that day: it stood at 0
        ("vanilla", day(5), None, None, True),             # no count, started at 0
        ("vanilla", day(6), 0, "till", True),              # started at 0, then restocked
    ]
    # the window's edges: a shop-local day (New York is 5 hours behind: 09:00 UTC is 04:00 there, the same day)
    assert rows(await store.sales_days(D0 + timedelta(days=1), D0 + timedelta(days=1), "America/New_York",
                                       "vanilla")) == [("vanilla", day(1), 5, "till", False)]


async def test_import_is_all_or_nothing_idempotent_and_refuses_conflicts(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    clock.set(clock.now().replace(day=3))
    await count(store, "d2", {"vanilla": 17})              # the till recorded day 2: 3 sold
    lines = [SaleLine(2, "vanilla", "2027-02-27", 4), SaleLine(3, "chocolate", "2027-02-27", 0),
             SaleLine(4, "vanilla", "2027-02-28", 6), SaleLine(5, "vanilla", day(2), 3)]
    first = await store.import_sales(lines, "UTC", "import:a.csv")
    assert (first.added, first.unchanged, first.problems) == (3, 1, ())    # day 2 agrees with the till: unchanged
    again = await store.import_sales(lines, "UTC", "import:a.csv")
    assert (again.added, again.unchanged, again.problems) == (0, 4, ())
    before = rows(await store.sales_days(date(2027, 2, 26), D0 + timedelta(days=3), "UTC"))
    bad = [SaleLine(2, "vanilla", "2027-02-26", 1),                        # new, but the file is refused
           SaleLine(3, "vanilla", "2027-02-27", 5),                        # imported before as 4
           SaleLine(4, "vanilla", day(2), 2),                              # the till counted 3
           SaleLine(5, "pistachio", "2027-02-27", 1)]
    refused = await store.import_sales(bad, "UTC", "import:b.csv")
    assert (refused.added, refused.unchanged) == (0, 0)
    assert [line for line, _ in refused.problems] == [3, 4, 5]
    assert "already recorded as 4 (imported before), not 5" in refused.problems[0][1]
    assert "counted by the till" in refused.problems[1][1] and "unknown item" in refused.problems[2][1]
    assert rows(await store.sales_days(date(2027, 2, 26), D0 + timedelta(days=3), "UTC")) == before


async def test_an_imported_day_takes_the_place_of_the_tills(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    assert (await store.import_sales([SaleLine(2, "vanilla", day(1), 4)], "UTC", "import:x")).added == 1
    clock.set(clock.now().replace(day=2))
    await count(store, "d1", {"vanilla": 11})              # the till says 9 for the same day: the import stands
    assert rows(await store.sales_days(D0, D0 + timedelta(days=1), "UTC", "vanilla")) == [
        ("vanilla", day(1), 4, "import", False)]


async def test_applied_values_replace_the_files_until_reset(store: Store):
    await store.seed_shop(SHOP, "shop.toml")
    await store.apply_setting("vanilla", 25, 30, "owner 1")
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None
    assert (vanilla.reorder_point, vanilla.target, vanilla.file_reorder_point, vanilla.file_target) == (
        25, 30, 8, 12)
    assert vanilla.applied_by == "owner 1"
    watched = {row.item: row for row in await store.stock_watch()}
    assert watched["vanilla"].reorder_point == 25       # the stock watcher sees it at once
    changes = await store.sync_shop([ItemSpec("vanilla", "tubs", 20, 9, 12, 300, max_order=40), SHOP[1]],
                                    "shop.toml")
    assert any("reorder_point 8 -> 9 in the file; the applied 25 stays in force" in c for c in changes), changes
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None and (vanilla.reorder_point, vanilla.file_reorder_point) == (25, 9)
    with pytest.raises(ValueError, match="at least the reorder point"):
        await store.apply_setting("vanilla", 10, 5, "owner 1")
    assert getattr(await store.shop_item("vanilla"), "reorder_point", None) == 25     # nothing changed
    assert await store.reset_setting("vanilla")
    assert not await store.reset_setting("vanilla")
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None and (vanilla.reorder_point, vanilla.target, vanilla.applied_by) == (9, 12, None)


async def test_an_applied_value_inside_a_transaction_with_its_decision(store: Store):
    await store.seed_shop(SHOP, "shop.toml")

    def press(tx: Transaction) -> None:
        nonce = tx.create_prompt("apply", "chocolate:7:15", 1)
        assert tx.decide_prompt(nonce, "apply", "owner 1")
        tx.apply_setting("chocolate", 7, 15, "owner 1", nonce)
    await store.atomic(press)
    chocolate = await store.shop_item("chocolate")
    assert chocolate is not None and (chocolate.reorder_point, chocolate.target) == (7, 15)


async def test_status_lists_the_applied_values_beside_the_files(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    assert (await store.status()).applied == ()
    await store.apply_setting("vanilla", 25, 30, "owner 1")
    clock.advance(60)
    await store.atomic(lambda tx: tx.apply_setting("chocolate", 7, 15, "owner:2"))
    applied = (await store.status()).applied
    assert [(a.item, a.reorder_point, a.target, a.shop_file_reorder_point, a.shop_file_target, a.decided_by)
            for a in applied] == [("chocolate", 7, 15, 6, 12, "owner:2"), ("vanilla", 25, 30, 8, 12, "owner 1")]
    assert applied[1].decided_at == clock.now() - timedelta(seconds=60)
    assert applied[0].to_json()["decided_at"].endswith("Z")
    assert (await store.atomic(lambda tx: tx.status())).applied == applied     # the same read in a transaction
    assert await store.reset_setting("vanilla")
    assert [a.item for a in (await store.status()).applied] == ["chocolate"]
