"""The records the suggestion math needs, read from the store (the math itself is pure: worker/ordering.py). Used by
the `reorder_suggestions` tool, `shopbot reorder-suggestions` and the weekly review."""
from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

from store import SalesDay, ShopRecords
from worker.ordering import OrderingSettings, Suggestion, suggest, window


def shop_today(now: datetime, timezone: str) -> date:
    return now.astimezone(ZoneInfo(timezone)).date()


async def suggestions(store: ShopRecords, *, now: datetime, timezone: str, lead_days: int,
                      settings: OrderingSettings, item: str | None = None) -> list[Suggestion]:
    """One suggestion per item (or for `item`), from its sales history over the window before today (shop time),
    against its current (applied, else the shop file's) reorder point and target."""
    first, last = window(shop_today(now, timezone), settings.history_days)
    records = await store.sales_days(first, last, timezone, item)
    by_item: dict[str, list[SalesDay]] = {}
    for row in records:
        by_item.setdefault(row.item, []).append(row)
    items = await store.shop_items()
    return [suggest(i.item, by_item.get(i.item, []), lead_days=lead_days,
                    current_reorder_point=i.reorder_point, current_target=i.target, settings=settings)
            for i in items if item is None or i.item == item]
