"""A proposal reads to the owner in the shop's money, rendered from its record (C11, C13)."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from store import Proposal, ProposalState
from worker.money import ShopFormat
from worker.proposals import card_body, proposal_line, proposal_message

PROPOSAL = Proposal(2, "r1", "Dairy Direct", "vanilla", 6, "tubs", 300, 180050, ProposalState.AWAITING_APPROVAL,
                    None, None, datetime(2027, 3, 1, tzinfo=UTC), None, None, None)


def test_money_reads_in_the_shops_currency_and_locale_never_in_cents() -> None:
    assert proposal_line(PROPOSAL, ShopFormat("USD", "en_US")) == \
        "Order proposal #2 to Dairy Direct: vanilla 6 × $3.00 = $1,800.50."
    german = proposal_line(PROPOSAL, ShopFormat("EUR", "de_DE"))
    assert german == "Order proposal #2 to Dairy Direct: vanilla 6 × 3,00\u00a0€ = 1.800,50\u00a0€."
    assert "cents" not in german


def test_a_rejected_proposal_says_why_and_what_it_would_have_cost() -> None:
    rejected = dataclasses.replace(PROPOSAL, state=ProposalState.REJECTED_BY_POLICY, reason="over the per-order limit")
    text = proposal_message(rejected, ShopFormat())
    assert "rejected by the shop's rules: over the per-order limit" in text
    assert "$1,800.50" in text


def test_the_card_puts_proposals_before_the_answer() -> None:
    body = card_body([PROPOSAL], "Vanilla is low.", ShopFormat())
    assert body.index("Order proposal #2") < body.index("Approve sends it") < body.index("Vanilla is low.")
