"""The turn's context: the system prompt and today's date and time (the history: worker/history.py, C17).

C18: the system prompt is short and byte-identical for every turn of a shop's day (the shop's name, currency, items
with their units, what the stock words mean, opening hours, the daily schedules such as the opening brief): with the
tool definitions it is the prefix a provider caches (Anthropic `cache_control`, OpenAI's automatic cache, llama.cpp's
slot). Today's date and the time in the shop's time zone (`now_block`) head the latest user message, after the
history, so no minute ever changes the prefix; the numbers of that block, of the hours and of the daily schedules'
times are figures of the run (C13), so a model may repeat them. The rules that matter are enforced in code (C11,
C13), not asked for; the prompt's lines for small models only say where figures come from.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, time

from store import ShopItem
from worker.figures import Figure
from worker.money import ShopFormat


@dataclass(frozen=True)
class ShopContext:
    name: str = "the shop"
    fmt: ShopFormat = ShopFormat()
    hours: tuple[tuple[str, str], ...] = ()     # (days, "09:00-18:00" or "closed"), as the shop file has them
    schedules: tuple[tuple[str, str], ...] = ()  # (name, cron) of the shop file's schedules (the opening brief)


def _items_line(items: Iterable[ShopItem]) -> str:
    return ", ".join(f"{i.item} ({i.unit})" for i in items) or "none yet"


def system_text(shop: ShopContext, items: Iterable[ShopItem]) -> str:
    return _system_text(shop, _items_line(items))


@functools.lru_cache(maxsize=8)   # the same text every turn of a shop (C18): made once, not per turn
def _system_text(shop: ShopContext, items_line: str) -> str:
    fmt = shop.fmt
    symbol = fmt.symbol
    lines = [
        f"You are the assistant of {shop.name}, a small shop, talking with its owner in a chat.",
        f"Items and their units: {items_line}.",
        f"Money is in {fmt.currency} ({symbol}); tools show amounts as the owner reads them: repeat them as shown.",
        "On hand: the stock in the shop. Reorder point: an item below it needs ordering. Target: the stock an order "
        "brings it up to. On order: approved supplier orders not yet received; on hand plus on order is the stock "
        "position.",
    ]
    if shop.hours:
        lines.append("Opening hours: " + "; ".join(f"{days} {span}" for days, span in shop.hours) + ".")
    if shop.schedules:
        lines.append("Scheduled: " + "; ".join(
            f"{name} daily at {at.strftime('%H:%M')}" if (at := _daily_time(cron)) else f"{name} (cron {cron})"
            for name, cron in shop.schedules) + ".")
    lines += [
        "Stock, orders, prices and sales always come from a tool: call one before you answer, even when an earlier "
        "answer had them. Every number you write must come from a tool result or the date line of the question; any "
        "other number is blanked out.",
        "When a tool finds nothing, say so plainly (for example: nothing is on order).",
        "Record numbers (proposals, orders) are written with #, like #2; they are not quantities.",
        "A question that is not about the shop gets one polite sentence, without tools.",
        "How fast items sell and how long stock lasts come from the till counts (sales_rate, days_of_cover): give "
        "the basis. When no record says, say you do not know.",
        "You cannot place orders: propose_order only records a proposal the owner approves or rejects with a button.",
        "Which tool: one item's stock, price or orders get_item; every item list_stock; what is low or needs "
        "ordering reorder_need; how long stock lasts days_of_cover; sales sales_rate; what is on order on_order; "
        "proposals waiting open_proposals; to order propose_order.",
        "Answer in one or two short sentences with what was asked, in the owner's language; then stop.",
    ]
    return "\n".join(lines)


def _daily_time(cron: str) -> time | None:
    """The time of a cron that fires once a day at one time ("30 8 * * *"), else None."""
    fields = cron.split()
    if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit() and fields[2:] == ["*", "*", "*"]:
        minute, hour = int(fields[0]), int(fields[1])
        return time(hour, minute) if hour < 24 and minute < 60 else None
    return None


def _hours_figures(shop: ShopContext) -> list[Figure]:
    figures = [Figure(f"{name} runs at", at) for name, cron in shop.schedules if (at := _daily_time(cron))]
    for days, span in shop.hours:
        for n, part in enumerate(span.split("-")[:2] if span != "closed" else ()):
            hour, _, minute = part.strip().partition(":")
            figures.append(Figure(f"{'opens' if n == 0 else 'closes'} {days}", time(int(hour), int(minute or 0))))
    return figures


def now_block(now: datetime, fmt: ShopFormat) -> tuple[str, list[Figure]]:
    """Today's date and the time in the shop's time zone, and their figures."""
    local = fmt.local(now).replace(second=0, microsecond=0)
    text = (f"Today is {fmt.date_words(local.date())} ({local.date().isoformat()}); the time in the shop is "
            f"{local.strftime('%H:%M')} ({fmt.timezone}).")
    return text, [Figure("today", local.date()), Figure("now", local)]


# Repeated at the head of every question, after the history: a small model follows the last lines it read, and the
# system prompt's rule alone did not stop it answering follow-ups from the history (bench/RESULTS.md).
TOOL_FIRST = "Stock, prices, orders and sales: call a tool for them in this turn."


def build_system(shop: ShopContext, items: Sequence[ShopItem],
                 now: datetime) -> tuple[str, str, list[Figure]]:
    """The stable system prompt, the turn's head (today's date and time, for the latest user message) and the
    figures of the context (today, now, opening hours, daily schedules)."""
    head, figures = now_block(now, shop.fmt)
    return system_text(shop, items), f"[{head} {TOOL_FIRST}]", [*figures, *_hours_figures(shop)]
