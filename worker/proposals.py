"""How a proposal reads to the owner: rendered from its record (C11, C13), never from the model's prose.

A turn that proposed orders answers in ONE message, its card: the proposals first (what the owner must decide),
then the turn's answer and its figures, with Approve and Reject under it (one pair per proposal awaiting approval).
"""
from __future__ import annotations

from store import LimitKind, PolicyRefusal, Proposal, ProposalState
from worker.money import ShopFormat


def limit_words(kind: LimitKind, total: str, limit: str, spent: str, lang: str = "en") -> str:
    """A spending limit's refusal in the owner's language (English, Spanish), its amounts already written in the
    shop's money format: the one place these words are made (cards, tool results, offline replies)."""
    if kind is LimitKind.ORDER_LIMIT:
        return (f"el total de {total} supera el límite de {limit} por pedido" if lang == "es"
                else f"the total of {total} is over the limit of {limit} per order")
    return (f"el total de {total} superaría el límite de hoy de {limit} ({spent} ya aprobado)" if lang == "es"
            else f"the total of {total} would go over today's limit of {limit} ({spent} already approved)")


def refusal_text(refusal: PolicyRefusal, fmt: ShopFormat, lang: str = "en") -> str:
    """`the total of $72.00 is over the limit of $50.00 per order`: the store's typed refusal, money as the owner
    reads it (never minor units)."""
    return limit_words(refusal.kind, fmt.cents(refusal.total_cents), fmt.cents(refusal.limit_cents),
                       fmt.cents(refusal.spent_cents), lang)


def rejection_reason(refusal: PolicyRefusal | None, reason: str | None, fmt: ShopFormat, lang: str = "en") -> str:
    """Why the shop's rules rejected a proposal (a row or propose_order's result): a limit's typed refusal worded
    now; any other reason, and a row refused before the store typed its limits (migration 0020), as stored."""
    return refusal_text(refusal, fmt, lang) if refusal is not None else (reason or "")


def proposal_line(proposal: Proposal, fmt: ShopFormat) -> str:
    """`Order proposal #2 to Dairy Direct: vanilla 6 × $3.00 = $18.00.` (money as the owner reads it, in the shop's
    currency and locale) or the rules' rejection."""
    pid, item, quantity = proposal.proposal_id, proposal.item, proposal.quantity
    unit, total = fmt.money(fmt.money_of(proposal.unit_cost_cents)), fmt.money(fmt.money_of(proposal.total_cents))
    cost = f"{item} {quantity} × {unit} = {total}"
    if proposal.state is ProposalState.REJECTED_BY_POLICY:
        return (f"Order proposal #{pid} to {proposal.supplier} was rejected by the shop's rules: "
                f"{rejection_reason(proposal.refusal, proposal.reason, fmt)}. Nothing will be ordered ({cost}).")
    return f"Order proposal #{pid} to {proposal.supplier}: {cost}."


def proposal_message(proposal: Proposal, fmt: ShopFormat) -> str:
    """One proposal on its own (a turn whose answer does not go to a Telegram chat tells the owner's chat this)."""
    line = proposal_line(proposal, fmt)
    if proposal.state is ProposalState.REJECTED_BY_POLICY:
        return line
    return f"{line}\nApprove sends it to the supplier; Reject drops it."


def card_body(proposals: list[Proposal], answer: str, fmt: ShopFormat) -> str:
    """The turn's one message: its proposals first, then the answer with its figures."""
    lines = [proposal_line(p, fmt) for p in proposals]
    if any(p.state is not ProposalState.REJECTED_BY_POLICY for p in proposals):
        lines.append("Approve sends it to the supplier; Reject drops it." if len(proposals) == 1
                     else "Approve sends that order to the supplier; Reject drops it.")
    return "\n".join(lines) + (f"\n\n{answer}" if answer.strip() else "")
