"""How a proposal reads to the owner: rendered from its record (C11, C13), never from the model's prose.

A turn that proposed orders answers in ONE message, its card: the proposals first (what the owner must decide),
then the turn's answer and its figures, with Approve and Reject under it (one pair per proposal awaiting approval).
"""
from __future__ import annotations

from typing import Any

from worker.money import ShopFormat


def proposal_line(proposal: dict[str, Any], fmt: ShopFormat) -> str:
    """`Order proposal #2 to Dairy Direct: vanilla 6 × $3.00 = $18.00.` (money as the owner reads it, in the shop's
    currency and locale) or the rules' rejection."""
    pid, item, quantity = proposal["proposal_id"], proposal["item"], proposal["quantity"]
    unit, total = fmt.money(fmt.money_of(proposal["unit_cost_cents"])), fmt.money(fmt.money_of(proposal["total_cents"]))
    cost = f"{item} {quantity} × {unit} = {total}"
    if proposal["state"] == "rejected_by_policy":
        return (f"Order proposal #{pid} to {proposal['supplier']} was rejected by the shop's rules: "
                f"{proposal['reason']}. Nothing will be ordered ({cost}).")
    return f"Order proposal #{pid} to {proposal['supplier']}: {cost}."


def proposal_message(proposal: dict[str, Any], fmt: ShopFormat) -> tuple[str, list[list[tuple[str, str]]] | None]:
    """One proposal on its own (a turn whose answer does not go to a Telegram chat tells the owner's chat this)."""
    line = proposal_line(proposal, fmt)
    if proposal["state"] == "rejected_by_policy":
        return line, None
    return f"{line}\nApprove sends it to the supplier; Reject drops it.", None


def card_body(proposals: list[dict[str, Any]], answer: str, fmt: ShopFormat) -> str:
    """The turn's one message: its proposals first, then the answer with its figures."""
    lines = [proposal_line(p, fmt) for p in proposals]
    if any(p["state"] != "rejected_by_policy" for p in proposals):
        lines.append("Approve sends it to the supplier; Reject drops it." if len(proposals) == 1
                     else "Approve sends that order to the supplier; Reject drops it.")
    return "\n".join(lines) + (f"\n\n{answer}" if answer.strip() else "")
