"""The weekly review: a report the product writes from the records, without a model call (every number in it is a
record or computed from records by worker/ordering.py), with a chart of the last four weeks (worker/review_chart.py).

Per item: units sold in the last 7 days against the 7 before; days out of stock in the last 7; the items at risk,
whose stock position (on hand plus on order) lasts less than the supplier's lead time at their daily demand, ranked by
the money a day out of stock loses (`price_cents`, else the unit cost, times the daily demand); and the suggested
reorder points and targets that differ from the current ones by at least one unit and 10 %, each with Apply and Keep.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from statistics import fmean

from store import SalesDay, ShopItem, ShopRecords, Transaction, asks, units
from worker.money import ShopFormat
from worker.ordering import OrderingSettings, Suggestion, money_lost_per_day
from worker.review_chart import sales_chart
from worker.suggestions import shop_today, suggestions

CHART_DAYS = 28
WEEKLY_REVIEW = "weekly_review"      # producers/schedule.py's default schedule: its turns are written here


@dataclass(frozen=True)
class Review:
    text: str
    chart: bytes
    caption: str
    offers: tuple[Suggestion, ...]      # the suggestions offered with Apply / Keep


@dataclass(frozen=True)
class _Week:
    item: str
    unit: str
    last: int | None             # units sold in the last 7 days (None: no record in them)
    before: int | None
    out_days: int


def _sum(rows: Sequence[SalesDay]) -> int | None:
    recorded = [r.quantity for r in rows if r.quantity is not None]
    return sum(recorded) if recorded else None


def _weeks(items: Sequence[ShopItem], by_day: dict[tuple[str, date], SalesDay], today: date) -> list[_Week]:
    out = []
    for item in items:
        def rows(start: int, end: int, name: str = item.item) -> list[SalesDay]:
            days = [today - timedelta(days=n) for n in range(start, end + 1)]
            return [by_day[(name, d)] for d in days if (name, d) in by_day]
        last, before = rows(1, 7), rows(8, 14)
        out.append(_Week(item.item, item.unit, _sum(last), _sum(before),
                         sum(1 for r in last if r.out_of_stock)))
    return out


def _demand(suggestion: Suggestion | None, week: list[SalesDay]) -> float | None:
    """Daily demand: the suggestion's mean over its counted days, else the last 7 days' counted days."""
    if suggestion is not None and suggestion.daily_mean:
        return suggestion.daily_mean
    counted = [r.quantity for r in week if r.quantity is not None and not r.out_of_stock]
    return fmean(counted) if counted and any(counted) else None


def compose(items: Sequence[ShopItem], records: Sequence[SalesDay], found: Sequence[Suggestion], *,
            today: date, lead_days: int, fmt: ShopFormat) -> Review:
    """The review from its records (pure): the text, the chart, its caption and the suggestions offered."""
    by_day = {(r.item, r.day): r for r in records}
    first, last = today - timedelta(days=CHART_DAYS), today - timedelta(days=1)
    lines = [f"Weekly review for the week to {fmt.date_words(last)} (every figure is from the records).", "",
             "Sold in the last 7 days (the 7 days before):"]
    weeks = _weeks(items, by_day, today)
    for w in weeks:
        last_text = "no record" if w.last is None else units.count(w.last, w.unit)
        lines.append(f"{w.item}: {last_text} ({'no record' if w.before is None else w.before})")
    out = [f"{w.item} {w.out_days}" for w in weeks if w.out_days]
    lines += ["", f"Days out of stock in the last 7 days: {', '.join(out)}." if out
              else "No item was out of stock in the last 7 days."]
    by_item = {s.item: s for s in found}
    risks = []
    for item in items:
        week = [by_day[(item.item, today - timedelta(days=n))] for n in range(1, 8)
                if (item.item, today - timedelta(days=n)) in by_day]
        demand = _demand(by_item.get(item.item), week)
        if demand is None:
            continue
        cover = item.position / demand
        if cover < lead_days:
            lost = money_lost_per_day(demand, item.price_cents, item.unit_cost_cents)
            risks.append((lost, item, demand, cover))
    risks.sort(key=lambda r: (-r[0], r[1].item))
    lines += ["", f"At risk (the stock lasts less than the supplier's lead time of {lead_days} days), the most money "
              "lost per day first:" if risks else f"No item's stock runs out within the lead time of {lead_days} days."]
    for lost, item, demand, cover in risks:
        stock = units.count(item.position, item.unit)
        lines.append(f"{item.item}: {stock} on hand and on order, {demand:.2f} sold a "
                     f"day, about {cover:.1f} days; {fmt.money(fmt.money_of(round(lost)))} a day lost when out")
    offers = tuple(s for s in found if s.reorder_point is not None and s.differs())
    lines += ["", "Suggested reorder points and targets (they differ from the current ones by at least one unit and "
              "10 %):" if offers else "The current reorder points and targets agree with the sales (no suggestion "
              "differs by at least one unit and 10 %)."]
    for s in offers:
        lines.append(f"{s.item}: reorder point {s.current_reorder_point} → {s.reorder_point}, target "
                     f"{s.current_target} → {s.target} ({s.reason})")
    if offers:
        lines.append("Apply makes them the item's values (in place of the shop file's); Keep leaves them.")
    days = [first + timedelta(days=n) for n in range(CHART_DAYS)]
    series = {i.item: [getattr(by_day.get((i.item, d)), "quantity", None) for d in days] for i in items}
    gone = {i.item: [getattr(by_day.get((i.item, d)), "out_of_stock", False) for d in days]
            for i in items}
    caption = f"Daily sales per item, {fmt.date_words(first)} to {fmt.date_words(last)}"
    chart = sales_chart(days, series, gone, f"Units sold a day, {first:%d %b} to {last:%d %b}")
    return Review("\n".join(lines), chart, caption, offers)


def setting_buttons(tx: Transaction, offer: Suggestion, chat_id: int) -> list[list[tuple[str, str]]]:
    """Apply / Keep for one suggestion: a fresh nonce whose target carries the values shown (item:point:target),
    so what Apply applies is exactly what the owner read (producers/telegram/owner.py decides the press)."""
    nonce = tx.create_prompt("setting", f"{offer.item}:{offer.reorder_point}:{offer.target}", chat_id)
    return [asks.answers("setting", nonce, offer.item)]


async def weekly_review(store: ShopRecords, *, now: datetime, timezone: str, lead_days: int,
                        settings: OrderingSettings, fmt: ShopFormat) -> Review:
    """The review as of `now` (shop time): its reads, then `compose`."""
    today = shop_today(now, timezone)
    records = await store.sales_days(today - timedelta(days=CHART_DAYS), today - timedelta(days=1), timezone)
    found = await suggestions(store, now=now, timezone=timezone, lead_days=lead_days, settings=settings)
    return compose(await store.shop_items(), records, found, today=today, lead_days=lead_days, fmt=fmt)
