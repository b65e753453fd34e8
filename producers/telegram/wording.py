"""The owner's words for the store's typed outcomes (an approve/reject decision), with money in the shop's format
and counts with their unit word (store/units.py): the store returns what happened, this module says it. Money
comes through the `ApprovalRules` the composition root builds from the shop (worker/money.py), since producers
import neither worker nor bot."""
from __future__ import annotations

from collections.abc import Callable

from store import Decision, DecisionKind, units

Money = Callable[[int], str]            # minor units -> the shop's format (`ShopFormat.cents`)


def decision_text(decision: Decision, money: Money) -> str:
    pid, kind = decision.proposal_id, decision.kind
    what = (f"{units.count(decision.quantity, decision.unit)} of {decision.item}" if decision.unit
            else f"{decision.quantity} {decision.item}")
    if kind is DecisionKind.APPROVED:
        return (f"Approved #{pid}: {what} for {money(decision.total_cents)}. I am sending the order to the supplier "
                "and will tell you when it is confirmed.")
    if kind is DecisionKind.REJECTED:
        return f"Rejected #{pid}: nothing will be ordered."
    if kind is DecisionKind.NOT_FOUND:
        return "This proposal does not exist."
    if kind is DecisionKind.NOT_AWAITING:
        return f"Proposal #{pid} is no longer awaiting approval (it is {(decision.state or '').replace('_', ' ')})."
    if kind is DecisionKind.EXPIRED:
        return (f"Proposal #{pid} expired before it was approved; nothing was ordered. Ask me to reorder again if "
                "it is still needed.")
    if kind is DecisionKind.OVER_DAY_LIMIT:
        return (f"Approving #{pid} ({money(decision.total_cents)}) would go over today's spending limit of "
                f"{money(decision.day_max_cents or 0)} ({money(decision.reserved_cents)} already approved). Nothing "
                "was ordered; it stays awaiting approval.")
    raise AssertionError(f"no words for {kind!r}")     # pragma: no cover - every kind is worded above
