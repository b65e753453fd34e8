"""C11 on both stores: a proposal refused for a spending limit is recorded as a typed refusal (its kind and amounts
in minor units, in columns), never as a sentence the store wrote: the store does not know how the shop writes
money, and the owner never reads cents."""
from __future__ import annotations

import dataclasses
import re

import pytest

from store import (
    ItemSpec,
    LimitKind,
    Occurrence,
    Policy,
    PolicyRefusal,
    Proposal,
    ProposalState,
    RecordedProposal,
    ReportDraft,
    Store,
    WorkKind,
)

from .test_outbox_contract import SHOP, proposed

MINOR_UNITS = re.compile(r"\bcents?\b|\d{3,}")      # a sentence with money in minor units in it


def vars_of(row: Proposal) -> dict[str, object]:
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}


async def propose(store: Store, item: str, quantity: int, policy: Policy) -> tuple[str, RecordedProposal]:
    await store.admit(Occurrence(f"tg:1:{item}:{quantity}", "tg:1", f"order {item}", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": item, "quantity": quantity}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", item, quantity, policy)
    await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    return claim.run_id, result


async def rows(store: Store, run_id: str) -> list[Proposal]:
    return await store.atomic(lambda tx: tx.run_proposals(run_id))


async def test_over_the_order_limit_is_a_typed_refusal_with_its_amounts(store: Store):
    await store.seed_shop(SHOP, "shop.toml")
    run_id, result = await propose(store, "vanilla", 6, Policy("Dairy Direct", order_max_cents=1500))
    assert result.state is ProposalState.REJECTED_BY_POLICY and result.reason is None
    assert result.to_json() | {"proposal_id": 0} == {       # the journaled result the model reads, as it always was
        "proposal_id": 0, "item": "vanilla", "quantity": 6, "total_cents": 1800, "unit": "tubs", "state": "rejected",
        "reason": None, "refusal": "order_limit", "refusal_limit_cents": 1500, "refusal_spent_cents": 0}
    [row] = await rows(store, run_id)
    assert row.state is ProposalState.REJECTED_BY_POLICY and row.reason is None
    assert row.refusal == PolicyRefusal(LimitKind.ORDER_LIMIT, 1800, 1500, 0)
    assert result.refusal == row.refusal and result.proposal_id == row.proposal_id   # the result and the row agree
    assert row.refusal is not None and row.refusal.kind is LimitKind.ORDER_LIMIT
    assert not any(isinstance(v, str) and MINOR_UNITS.search(v) for k, v in vars_of(row).items()
                   if k not in ("run_id", "created_at", "expires_at"))


async def test_over_the_day_limit_records_what_the_day_already_holds(store: Store):
    await store.seed_shop([SHOP[0], ItemSpec("chocolate", "tubs", 2, 6, 12, 250)], "shop.toml")   # both low
    proposal_id, _ = await proposed(store, 4, "vanilla")              # 1200, approved below
    assert (await store.atomic(lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01",
                                                              day_max_cents=2000,
                                                              destination="supplier:dairy"))).ok
    policy = Policy("Dairy Direct", order_max_cents=5000, day_max_cents=2000, day="2027-03-01")
    run_id, result = await propose(store, "chocolate", 4, policy)     # 1000 more: 2200 > 2000
    [row] = await rows(store, run_id)
    assert row.refusal == PolicyRefusal(LimitKind.DAY_LIMIT, 1000, 2000, 1200)
    assert row.reason is None and result.refusal == row.refusal and result.to_json()["refusal_spent_cents"] == 1200


async def test_a_proposal_within_the_limits_and_other_reasons_carry_no_refusal(store: Store):
    """Negative control: the typed refusal is only a limit's; the other reasons stay words with no money in them."""
    await store.seed_shop(SHOP, "shop.toml")
    run_id, result = await propose(store, "vanilla", 6, Policy("Dairy Direct", order_max_cents=1800))
    assert result.state is ProposalState.PROPOSED and result.refusal is None
    assert result.to_json()["state"] == "awaiting_approval" and "refusal" not in result.to_json()
    [row] = await rows(store, run_id)
    assert row.refusal is None
    run_id, result = await propose(store, "vanilla", 30, Policy("Dairy Direct"))      # over max_order (20)
    [row] = await rows(store, run_id)
    assert row.refusal is None and row.reason is not None and "over the limit of 20 per order" in row.reason


def test_a_refusal_kind_given_as_text_becomes_the_member_and_an_unknown_one_fails():
    assert PolicyRefusal("day_limit", 1, 2, 3).kind is LimitKind.DAY_LIMIT
    with pytest.raises(ValueError):
        PolicyRefusal("the total of 1800 cents is over the limit", 1800, 1500)     # type: ignore[arg-type]


def test_a_proposal_is_recorded_only_proposed_or_rejected_by_policy():
    """Negative control of RecordedProposal's check: a state a fresh row never has is refused where it is made."""
    fields = dict(proposal_id=1, item="vanilla", quantity=6, total_cents=1800, unit="tubs", reason=None, refusal=None)
    assert RecordedProposal(state=ProposalState.PROPOSED, **fields).to_json()["state"] == "awaiting_approval"
    with pytest.raises(ValueError, match="awaiting_approval"):
        RecordedProposal(state=ProposalState.AWAITING_APPROVAL, **fields)
