"""The shop's tools: typed arguments, an effect kind, structured results, and the figures C13 renders.

`read` tools only look; `draft_order` (internal) records a draft tied to the run; `propose_order` (external, C11)
records a typed proposal and completes its operation in the same transaction, and never contacts anyone.
Their figures are collected by the registry from the results themselves (worker/tools/registry.py, C13).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from store import Order, Policy, ShopItem, Store, UnknownTarget
from worker.money import ShopFormat
from worker.ordering import Fitted, OrderingSettings, fit_order
from worker.proposals import rejection_reason
from worker.tools.registry import Tool, ToolError, ToolRegistry


@dataclass
class TurnContext:
    """What a tool may use during one run."""
    store: Store
    run_id: str
    supplier: str
    allowed_items: frozenset[str] | None = None      # a stock episode's turn concerns its item only
    currency: str = "USD"
    completed_calls: set[str] = field(default_factory=set)   # operations a tool already completed itself (C11)
    current_call: str | None = None
    policy: Policy | None = None                              # the shop's rules, checked before the owner sees it
    timezone: str = "UTC"                                     # the shop's time zone (dates the tools give)
    locale: str = "en_US"                                     # how the shop writes money (a refusal's words)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)   # item -> the shop file's other names
    lead_time_days: int = 3                                   # the supplier's lead time (suggestions)
    ordering: OrderingSettings = field(default_factory=OrderingSettings)   # the shop file's [ordering]
    # buttons the reply offers (("order", proposal_id), ("proposal", proposal_id), ("unknown", report_id)): the
    # worker makes them in the finish transaction; a press, never the turn, decides
    offers: list[tuple[str, str]] = field(default_factory=list)
    chat_id: int | None = None                                # the owner's chat the turn answers, when it is one

    def offer(self, kind: str, target: str) -> None:
        if (kind, target) not in self.offers:
            self.offers.append((kind, target))

    def resolve(self, name: str) -> str:
        """An item's name from a name or one of its aliases (lowercase, trimmed); other text as it is."""
        key = name.strip().lower()
        for item, names in self.aliases.items():
            if key in names:
                return item
        return key


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ItemArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(description="item name, e.g. vanilla")


class NeedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str | None = Field(default=None, description="item name; omit for every low item")


class OrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(description="item name")
    quantity: int = Field(gt=0, le=100000, description="how many units")


def _public(item: ShopItem, ctx: TurnContext, orders: list[Order] | None = None) -> dict[str, Any]:
    """What the model sees of an item: stock on hand, what is on order (approved orders not yet received), the
    position (on hand plus on order), which is what reorder decisions look at, and the shop file's other names for
    it (aliases) when it has some."""
    public = {key: getattr(item, key) for key in ("item", "on_hand", "on_order", "position", "reorder_point",
                                                  "target", "unit_cost_cents", "unit", "open_proposal")}
    public["orders"] = [{"order": o.proposal_id, "quantity": o.quantity, "status": o.status}
                        for o in (orders or []) if o.item == item.item]
    if ctx.aliases.get(item.item):
        public["aliases"] = list(ctx.aliases[item.item])
    if item.applied:        # the owner applied a suggestion: the shop file's values beside it
        public["shop_file_reorder_point"], public["shop_file_target"] = item.file_reorder_point, item.file_target
    return public


async def _item(ctx: TurnContext, name: str) -> ShopItem:
    item = await ctx.store.shop_item(ctx.resolve(name))
    if item is None:
        known = ", ".join(i.item for i in await ctx.store.shop_items())
        raise ToolError(f"unknown item {name!r}; the shop has: {known}")
    return item


def _fit(item: ShopItem, quantity: int) -> Fitted:
    """The quantity fitted to the supplier's minimum order and packs within the item's limit (worker/ordering.py)."""
    return fit_order(quantity, pack=item.pack, min_order=item.min_order, max_order=item.max_order, unit=item.unit)


def _need(item: ShopItem) -> dict[str, Any]:
    """What brings the item's position (on hand plus on order) to its target, in whole packs and at least the
    minimum order, never over the limit per order; nothing while its position is at or above the reorder point (an
    order on order is never proposed twice)."""
    low = item.position < item.reorder_point
    fitted = _fit(item, max(0, item.target - item.position) if low else 0)
    need = {"item": item.item, "on_hand": item.on_hand, "on_order": item.on_order,
            "position": item.position, "reorder_point": item.reorder_point, "target": item.target,
            "quantity": fitted.quantity,
            "unit_cost_cents": item.unit_cost_cents, "cost_cents": fitted.quantity * item.unit_cost_cents,
            "below_reorder_point": low, "unit": item.unit}
    if fitted.note:
        need["note"] = fitted.note
    return need


async def list_stock(args: NoArgs, ctx: TurnContext) -> dict[str, Any]:
    orders = await ctx.store.open_orders()
    items = [_public(i, ctx, orders) for i in await ctx.store.shop_items()]
    return {"items": items, "currency": ctx.currency, **({} if items else {"note": "the shop has no items yet"})}


async def get_item(args: ItemArgs, ctx: TurnContext) -> dict[str, Any]:
    item = await _item(ctx, args.item)
    public = _public(item, ctx, await ctx.store.open_orders(item.item))
    if not public["orders"]:   # an empty result says so: a small model reads [] as "no information"
        public["note"] = f"nothing is on order for {item.item}"
    return public


async def reorder_need(args: NeedArgs, ctx: TurnContext) -> dict[str, Any]:
    if args.item:
        return _need(await _item(ctx, args.item))
    needs = [_need(i) for i in await ctx.store.shop_items() if i.position < i.reorder_point]
    return {"items": needs, "total_cents": sum(n["cost_cents"] for n in needs), "currency": ctx.currency,
            **({} if needs else {"note": "no item is below its reorder point: nothing needs ordering"})}


def _check_allowed(ctx: TurnContext, item: str) -> None:
    if ctx.allowed_items is not None and item not in ctx.allowed_items:
        raise ToolError(f"this turn is a stock check for {', '.join(sorted(ctx.allowed_items))} only; "
                        f"it cannot order {item}")


def _noted(result: dict[str, Any], fitted: Fitted) -> dict[str, Any]:
    if fitted.note:
        result["note"] = fitted.note
    return result


async def draft_order(args: OrderArgs, ctx: TurnContext) -> dict[str, Any]:
    spec = await _item(ctx, args.item)
    _check_allowed(ctx, spec.item)
    fitted = _fit(spec, args.quantity)          # whole packs, the minimum order, within the limit (said)
    if fitted.quantity <= 0:
        raise ToolError(fitted.note or f"nothing to order: {args.quantity}")
    return _noted(dataclasses.asdict(await ctx.store.record_draft(ctx.run_id, spec.item, fitted.quantity)), fitted)


async def propose_order(args: OrderArgs, ctx: TurnContext) -> dict[str, Any]:
    spec = await _item(ctx, args.item)
    item = spec.item
    _check_allowed(ctx, item)
    assert ctx.current_call is not None
    fitted = _fit(spec, args.quantity)          # the same fitting as reorder_need and drafts
    if fitted.quantity <= 0:
        raise ToolError(fitted.note or f"nothing to order: {args.quantity}")
    try:
        recorded = await ctx.store.record_proposal(ctx.run_id, ctx.current_call, ctx.supplier, item,
                                                   fitted.quantity, ctx.policy)
    except UnknownTarget as exc:
        raise ToolError(str(exc)) from None
    ctx.completed_calls.add(ctx.current_call)
    result: dict[str, Any] = recorded.to_json()      # the journaled result's shape (C11)
    if recorded.refusal is not None:   # a spending limit's typed refusal, worded for the model with the shop's money
        result["reason"] = rejection_reason(recorded.refusal, recorded.reason,
                                            ShopFormat(ctx.currency, ctx.locale, ctx.timezone))
    return _noted(result, fitted)


def shop_registry() -> ToolRegistry:
    return ToolRegistry([
        # short descriptions: the definitions are most of the prompt, and a small model reads every word of them
        Tool("list_stock", "Every item: on hand, on order, reorder point, target, unit cost.", NoArgs, list_stock,
             "read"),
        Tool("get_item", "One item: on hand, on order, reorder point, target, unit cost.", ItemArgs, get_item,
             "read"),
        Tool("reorder_need", "What to order to bring an item (without one: every low item) to its target, and the "
             "cost.", NeedArgs, reorder_need, "read"),
        Tool("draft_order", "Record a draft order line (nothing is sent).", OrderArgs, draft_order, "internal"),
        Tool("propose_order", "Propose an order for the owner to approve (nothing is sent before).", OrderArgs,
             propose_order, "external"),
    ])


def tool_context(store: Store, run_id: str, **kwargs: Any) -> TurnContext:
    return TurnContext(store=store, run_id=run_id, **kwargs)
