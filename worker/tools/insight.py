"""Tools that answer a shop's questions from its records (all `read`): how fast items sell, how long the stock lasts,
what is on order, the latest till counts, the proposals awaiting a decision.

Sales come from the stock records the till counts already make (store/shared/insights.py): the decreases between
consecutive records of an item; increases are restocks, never negative sales. The rate is units sold per day over
the window, measured from the window's start or from the item's first record when that is later. Days of cover
are stock on hand divided by that rate; an item with no sales in the window has no cover figure ("no sales
recorded"), never an infinite one. Every number of a result becomes a figure through the registry (C13).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from store import ItemSales, OnOrder, to_text
from worker.suggestions import suggestions
from worker.tools.registry import Tool, ToolError
from worker.tools.shop import TurnContext

DEFAULT_WINDOW_DAYS = 14
MIN_BASIS_HOURS = 1.0     # less history than this gives no rate


class WindowArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str | None = Field(default=None, description="item name; omit it for every item")
    days: int = Field(default=DEFAULT_WINDOW_DAYS, ge=1, le=365, description="the last this many days")


class ItemFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str | None = Field(default=None, description="item name; omit it for every item")


class CountsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str | None = Field(default=None, description="item name; omit it for every item")
    limit: int = Field(default=10, ge=1, le=50, description="how many counts, newest first")


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CostArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(description="item name")
    quantity: int = Field(default=1, ge=1, le=100000, description="how many units")


class ItemArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(description="item name")


async def _item_name(ctx: TurnContext, name: str | None) -> str | None:
    if name is None or not name.strip():
        return None
    item = await ctx.store.shop_item(ctx.resolve(name))
    if item is None:
        known = ", ".join(i.item for i in await ctx.store.shop_items())
        raise ToolError(f"unknown item {name!r}; the shop has: {known}")
    return item.item


def _rate(row: ItemSales, since: datetime, now: datetime) -> tuple[float | None, float, datetime | None]:
    """(units sold per day, unrounded, or None; the basis in days; where the basis starts)."""
    if row.first_record_at is None:
        return None, 0.0, None
    start = max(since, row.first_record_at)
    basis_days = (now - start).total_seconds() / 86400
    if basis_days * 24 < MIN_BASIS_HOURS:
        return None, basis_days, start
    return row.sold / basis_days, basis_days, start


async def _sales(ctx: TurnContext, item: str | None, days: int) -> list[dict[str, Any]]:
    now = ctx.store.clock.now()
    since = now - timedelta(days=days)
    zone = ZoneInfo(ctx.timezone)
    rows = []
    for row in await ctx.store.sales(since, now, await _item_name(ctx, item)):
        rate, basis_days, start = _rate(row, since, now)
        entry = {"item": row.item, "unit": row.unit, "sold": row.sold, "restocked": row.restocked,
                 "sold_per_day": None if rate is None else round(rate, 2), "exact_rate": rate,
                 "basis_days": round(basis_days, 1),
                 "since": start.astimezone(zone).date() if start else None, "on_hand": row.on_hand}
        if rate is None:
            entry["note"] = "too little stock history for a rate" if start else "no stock records"
        elif row.sold == 0:
            entry["note"] = "no sales recorded in the window"
        rows.append(entry)
    return rows


async def sales_rate(args: WindowArgs, ctx: TurnContext) -> dict[str, Any]:
    rows = await _sales(ctx, args.item, args.days)
    for row in rows:
        row.pop("on_hand")
        row.pop("exact_rate")
    return {"window_days": args.days, "items": rows, **({} if rows else {"note": "no stock records"})}


async def days_of_cover(args: WindowArgs, ctx: TurnContext) -> dict[str, Any]:
    rows = await _sales(ctx, args.item, args.days)
    ordered: dict[str, int] = {}
    for order in await ctx.store.on_order(await _item_name(ctx, args.item)):
        ordered[order.item] = ordered.get(order.item, 0) + order.quantity
    now = ctx.store.clock.now().astimezone(ZoneInfo(ctx.timezone))
    out = []
    for row in rows:
        rate = row["exact_rate"]
        entry = {"item": row["item"], "unit": row["unit"], "on_hand": row["on_hand"],
                 "on_order": ordered.get(row["item"], 0), "sold_per_day": row["sold_per_day"],
                 "basis_days": row["basis_days"],
                 "since": row["since"]}
        if rate:
            cover = row["on_hand"] / rate
            entry["days_of_cover"] = round(cover, 1)
            entry["runs_out_on"] = (now + timedelta(days=cover)).date()
            if entry["on_order"]:
                entry["days_of_cover_with_on_order"] = round((row["on_hand"] + entry["on_order"]) / rate, 1)
        else:
            entry["days_of_cover"] = None
            entry["note"] = row.get("note", "no sales recorded in the window")
        out.append(entry)
    return {"window_days": args.days, "items": out, **({} if out else {"note": "no stock records"})}


def _order_row(ctx: TurnContext, o: OnOrder) -> dict[str, Any]:
    now = ctx.store.clock.now()
    return {"proposal_id": o.proposal_id, "item": o.item, "unit": o.unit or "",
            "quantity": o.quantity, "total_cents": o.total_cents, "approved_at": to_text(o.decided_at),
            # the day it is expected (approval plus the supplier's lead time), in the shop's time zone
            "expected_on": o.due_at.astimezone(ZoneInfo(ctx.timezone)).date(), "late": o.due_at <= now,
            "delivery": o.action_state.value if o.action_state else "waiting for the supplier"}


async def on_order(args: ItemFilter, ctx: TurnContext) -> dict[str, Any]:
    orders = await ctx.store.on_order(await _item_name(ctx, args.item))
    rows = [_order_row(ctx, o) for o in orders]
    return {"orders": rows, **({} if rows else {"note": "nothing is on order"})}


async def order_cost(args: CostArgs, ctx: TurnContext) -> dict[str, Any]:
    name = await _item_name(ctx, args.item)
    item = await ctx.store.shop_item(name or "")
    if item is None:     # pragma: no cover - _item_name refused it already
        raise ToolError(f"unknown item {args.item!r}")
    return {"item": item.item, "unit": item.unit, "quantity": args.quantity,
            "unit_cost_cents": item.unit_cost_cents, "total_cents": args.quantity * item.unit_cost_cents}


async def offer_received(args: ItemArgs, ctx: TurnContext) -> dict[str, Any]:
    """The item's orders on order, each offered with its Received button under the reply (nothing is received)."""
    name = await _item_name(ctx, args.item)
    orders = [_order_row(ctx, o) for o in await ctx.store.on_order(name)]
    for order in orders:
        ctx.offer("order", str(order["proposal_id"]))
    return {"item": name, "orders": orders,
            "open_proposals": [p.proposal_id for p in await ctx.store.open_proposals() if p.item == name]}


async def waiting_for_owner(args: NoArgs, ctx: TurnContext) -> dict[str, Any]:
    """What /pending lists: proposals awaiting approval, orders to receive, replies that may not have arrived in
    this chat; each offered with the buttons /pending has."""
    proposals = (await open_proposals(NoArgs(), ctx))["proposals"]
    orders = [_order_row(ctx, o) for o in await ctx.store.on_order()]
    unknown = sorted({u.report_id for u in (await ctx.store.status()).unknown
                      if ctx.chat_id is None or u.chat_id == ctx.chat_id})
    for p in proposals:
        ctx.offer("proposal", str(p["proposal_id"]))
    for o in orders:
        ctx.offer("order", str(o["proposal_id"]))
    for report in unknown:
        ctx.offer("unknown", report)
    return {"proposals": proposals, "orders": orders, "unsure_replies": unknown}


async def recent_counts(args: CountsArgs, ctx: TurnContext) -> dict[str, Any]:
    counts = await ctx.store.recent_counts(await _item_name(ctx, args.item), args.limit)
    return {"counts": [{"item": c.item, "unit": c.unit, "before": c.old_on_hand, "counted": c.new_on_hand,
                        "at": to_text(c.created_at), "till_request": c.source} for c in counts],
            **({} if counts else {"note": "no till counts recorded"})}


async def open_proposals(args: NoArgs, ctx: TurnContext) -> dict[str, Any]:
    rows = await ctx.store.open_proposals()
    return {"proposals": [{"proposal_id": p.proposal_id, "item": p.item, "unit": p.unit, "quantity": p.quantity,
                           "total_cents": p.total_cents, "proposed_at": to_text(p.created_at),
                           "expires_at": to_text(p.expires_at) if p.expires_at else None} for p in rows],
            **({} if rows else {"note": "no proposal is awaiting approval"})}


async def reorder_suggestions(args: ItemFilter, ctx: TurnContext) -> dict[str, Any]:
    """Suggested reorder points and targets from each item's sales history (worker/ordering.py has the method)."""
    rows = await suggestions(ctx.store, now=ctx.store.clock.now(), timezone=ctx.timezone,
                             lead_days=ctx.lead_time_days, settings=ctx.ordering,
                             item=await _item_name(ctx, args.item))
    return {"history_days": ctx.ordering.history_days, "service_level": ctx.ordering.service_level,
            "review_days": ctx.ordering.review_days, "lead_time_days": ctx.lead_time_days,
            "items": [row.to_json() for row in rows]}


def insight_tools() -> list[Tool]:
    return [
        Tool("sales_rate", "Units sold per day over the last N days (default 14), from the till counts.", WindowArgs,
             sales_rate, "read"),
        Tool("days_of_cover", "How many days the stock lasts at the recent sales rate, and what is on order.",
             WindowArgs, days_of_cover, "read"),
        Tool("on_order", "Approved supplier orders not yet received, with the day each is expected.", ItemFilter,
             on_order, "read"),
        Tool("order_cost", "What an item costs: its unit cost, and the total for a quantity.", CostArgs, order_cost,
             "read"),
        Tool("recent_counts", "The latest till counts, newest first.", CountsArgs, recent_counts, "read"),
        Tool("open_proposals", "Order proposals awaiting the owner's approval.", NoArgs, open_proposals, "read"),
        Tool("waiting_for_owner", "Everything waiting for the owner (what /pending lists): proposals awaiting "
             "approval, orders to receive, replies that may not have arrived; the reply carries their buttons.",
             NoArgs, waiting_for_owner, "read"),
        Tool("offer_received", "When the owner says an item's delivery came: its orders on order, with their "
             "Received button under the reply. It receives nothing: the owner's press does.", ItemArgs,
             offer_received, "read"),
        Tool("reorder_suggestions", "Reorder points and targets suggested from each item's daily sales over the "
             "last weeks, the supplier's lead time and the shop's service level, beside the current ones; no "
             "suggestion (and why) with too little history.", ItemFilter, reorder_suggestions, "read"),
    ]
