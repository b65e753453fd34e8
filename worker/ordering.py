"""Ordering that learns from sales: reorder points and targets suggested from demand, and order quantities fitted to
the supplier's pack, minimum and maximum. Pure functions: records in, numbers out; nothing here reads a store.

The method (periodic review, order-up-to level, safety stock for normally distributed daily demand):

    reorder point   ROP = d·L + z·σ_d·√L
    target          S   = d·(L+R) + z·σ_d·√(L+R)
    order quantity  Q   = S − position          (position = on hand + on order), in whole packs

d is the mean and σ_d the population standard deviation of the daily sales of the counted days, L the supplier's
lead time and R the review period in days, z the standard normal quantile of the service level (the probability of
not running out within a cycle: 0.95 gives z = 1.645, `statistics.NormalDist().inv_cdf`). The suggested values are
rounded up (ceil): a fraction of a unit of safety is still a unit on the shelf.

Sources: Silver, Pyke & Thomas, "Inventory and Production Management in Supply Chains" (4th ed., 2017), ch. 6
(safety stock ss = z·σ_L with σ_L = σ_d·√L for independent daily demand) and ch. 7 (the (R, S) order-up-to policy,
protection interval R+L); Nahmias & Olsen, "Production and Operations Analysis" (7th ed.), §5.4-5.6 (type 1 service
level). The same formula (reorder point = sales per day × lead time, plus safety) is what Shopify's Stocky and most
inventory tools describe.

The window is `history_days` whole days before today in shop time (today is not over). A day counts when it has a
sales record (till-derived or imported, 0 included); a day the item stood at 0 on hand is left out (its sales are
censored: they say what there was, not what was wanted) and the suggestion says how many were. Fewer than
`MIN_DAYS` counted days, or no sales at all, give no suggestion, and a sentence why.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from statistics import NormalDist, fmean, pstdev
from typing import Any

from store import SalesDay

MIN_DAYS = 14
_EPSILON = 1e-9          # 12.000000000001 from float arithmetic is 12, not 13


@dataclass(frozen=True)
class OrderingSettings:
    """The shop file's `[ordering]` table."""
    history_days: int = 28
    service_level: float = 0.95
    review_days: int = 7

    @property
    def z(self) -> float:
        return z_value(self.service_level)


def z_value(service_level: float) -> float:
    """The standard normal quantile of the service level: 0.95 -> 1.6449 (the 1.645 of the tables)."""
    if not 0.5 <= service_level < 1:
        raise ValueError(f"a service level is from 0.5 to below 1, got {service_level!r}")
    return NormalDist().inv_cdf(service_level)


def window(today: date, history_days: int) -> tuple[date, date]:
    """The whole days before today: (first, last), last = yesterday."""
    return today - timedelta(days=history_days), today - timedelta(days=1)


def _ceil(value: float) -> int:
    return math.ceil(value - _EPSILON)


def reorder_point(d: float, sd: float, lead_days: int, z: float) -> float:
    """ROP = d·L + z·σ_d·√L (unrounded)."""
    return d * lead_days + z * sd * math.sqrt(lead_days)


def order_up_to(d: float, sd: float, lead_days: int, review_days: int, z: float) -> float:
    """S = d·(L+R) + z·σ_d·√(L+R) (unrounded)."""
    protection = lead_days + review_days
    return d * protection + z * sd * math.sqrt(protection)


@dataclass(frozen=True)
class Suggestion:
    item: str
    days: int                    # counted days
    out_of_stock_days: int       # days left out: the item stood at 0
    daily_mean: float | None
    daily_sd: float | None
    current_reorder_point: int
    current_target: int
    reorder_point: int | None    # None: no suggestion (see reason)
    target: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The shape `shopbot reorder-suggestions --json` prints (docs/owner-guide.md)."""
        return {"item": self.item, "days": self.days,
                "daily_mean": None if self.daily_mean is None else round(self.daily_mean, 3),
                "daily_sd": None if self.daily_sd is None else round(self.daily_sd, 3),
                "reorder_point": {"current": self.current_reorder_point, "suggested": self.reorder_point},
                "target": {"current": self.current_target, "suggested": self.target},
                "reason": self.reason}

    def differs(self) -> bool:
        """Worth the owner's attention: a suggestion that differs from a current value by at least one unit and
        at least 10 % of it (the weekly review offers only these)."""
        pairs = ((self.reorder_point, self.current_reorder_point), (self.target, self.current_target))
        return any(new is not None and abs(new - old) >= 1 and abs(new - old) >= 0.1 * old for new, old in pairs)


def suggest(item: str, records: Iterable[SalesDay], *, lead_days: int, current_reorder_point: int,
            current_target: int, settings: OrderingSettings = OrderingSettings()) -> Suggestion:
    """One item's suggestion from its day records in the window (store `sales_days`)."""
    rows = list(records)
    out = sum(1 for r in rows if r.out_of_stock)
    sold = [r.quantity for r in rows if r.quantity is not None and not r.out_of_stock]
    left_out = f"; {out} day(s) out of stock left out" if out else ""

    def none(reason: str, d: float | None = None, sd: float | None = None) -> Suggestion:
        return Suggestion(item, len(sold), out, d, sd, current_reorder_point, current_target, None, None, reason)
    if len(sold) < MIN_DAYS:
        return none(f"only {len(sold)} counted day(s) of sales in the last {settings.history_days} "
                    f"({MIN_DAYS} needed){left_out}")
    d, sd = fmean(sold), pstdev(sold)
    if d == 0:
        return none(f"no sales in {len(sold)} counted day(s){left_out}", d, sd)
    rop = _ceil(reorder_point(d, sd, lead_days, settings.z))
    target = max(rop, _ceil(order_up_to(d, sd, lead_days, settings.review_days, settings.z)))
    reason = (f"{len(sold)} counted day(s){left_out}: {d:.2f} a day on average (sd {sd:.2f}), lead time "
              f"{lead_days} day(s), review every {settings.review_days} day(s), service level "
              f"{settings.service_level:.0%}")
    return Suggestion(item, len(sold), out, d, sd, current_reorder_point, current_target, rop, target, reason)


@dataclass(frozen=True)
class Fitted:
    quantity: int
    note: str | None         # what changed the quantity and why, in words; None when nothing did


def fit_order(quantity: int, *, pack: int | None = None, min_order: int | None = None,
              max_order: int | None = None, unit: str = "units") -> Fitted:
    """An order quantity fitted to the supplier: at least `min_order`, then up to whole packs; a pack rounding never
    passes `max_order`: it rounds down to the last whole pack under it, and says so. A quantity already over the
    maximum is left as it is (policy refuses it, with the reason). 0 stays 0 (nothing to order)."""
    if quantity <= 0 or (max_order is not None and quantity > max_order):
        return Fitted(quantity, None)
    notes = []
    wanted = quantity
    if min_order is not None and quantity < min_order:
        quantity = min_order
        notes.append(f"raised to the minimum order of {min_order}")
    if pack is not None and quantity % pack:
        quantity = math.ceil(quantity / pack) * pack
        notes.append(f"rounded up to whole packs of {pack}")
    if max_order is not None and quantity > max_order:
        under = max_order // pack * pack if pack else max_order
        if under == 0 or (min_order is not None and under < min_order):
            return Fitted(0, f"{wanted} {unit} cannot be ordered: the limit of {max_order} per order is below "
                             f"{'a pack of ' + str(pack) if pack and under == 0 else 'the minimum order'}")
        quantity = under
        notes.append(f"rounded down to {under}, the last whole pack under the limit of {max_order} per order")
    if quantity == wanted:
        return Fitted(quantity, None)
    return Fitted(quantity, f"{wanted} {unit} {', then '.join(notes)}: {quantity} {unit}")


def money_lost_per_day(daily_demand: float, price_cents: int | None, unit_cost_cents: int) -> float:
    """What a day out of stock costs at the current rate: the selling price (else the unit cost) times the demand."""
    return daily_demand * (price_cents if price_cents is not None else unit_cost_cents)
