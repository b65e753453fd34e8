"""Deliveries, decisions, proposals and actions through the Outbox, Transaction and ActionOutbox ports (C7, C8,
C11), and the shop and change-notification ports, for every store."""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from store import (
    ActionMove,
    DecisionKind,
    DeliveryState,
    IllegalTransition,
    ItemSpec,
    ManualClock,
    Occurrence,
    Policy,
    ProposalState,
    ReportDraft,
    ReportView,
    Store,
    Taken,
    Transaction,
    WorkKind,
)

from .conftest import opened

SHOP = [ItemSpec("vanilla", "tubs", 2, 8, 12, 300, max_order=20), ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]


async def finished_report(store: Store, body: str = "hello", source: str = "tg:1:1") -> str:
    await store.admit(Occurrence(source, "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    return (await store.finish(claim, ReportDraft(body, destination="tg:1"))).report_id


def states(report: ReportView) -> list[str]:
    return [d.state for d in report.deliveries]


async def report(store: Store, report_id: str) -> ReportView:
    return next(r for r in await store.reports() if r.report == report_id)


async def test_a_part_is_confirmed_only_with_a_receipt_after_sending(store: Store):
    report_id = await finished_report(store)
    [part] = await store.due_deliveries()
    with pytest.raises(IllegalTransition):
        await store.mark_confirmed(part.delivery_id, "555")     # pending -> confirmed is not a move
    await store.mark_sending(part.delivery_id)
    assert await store.due_deliveries() == []
    await store.mark_confirmed(part.delivery_id, "555")
    assert (await report(store, report_id)).deliveries[0].receipt == "555"
    assert await store.check() == []


async def test_not_sent_goes_back_and_flood_control_waits(store: Store, clock: ManualClock):
    await finished_report(store)
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_not_sent(part.delivery_id, "connection refused")
    assert [d.delivery_id for d in await store.due_deliveries()] == [part.delivery_id]
    await store.mark_sending(part.delivery_id)
    await store.mark_not_sent(part.delivery_id, "429", retry_after=7)
    assert await store.due_deliveries() == []
    due = await store.next_delivery_time()
    assert due is not None and round((due - clock.now()).total_seconds()) == 7
    clock.advance(7)
    assert len(await store.due_deliveries()) == 1


async def test_an_unknown_part_is_never_resent_without_a_recorded_decision(store: Store):
    report_id = await finished_report(store)
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_unknown(part.delivery_id, "read timeout")
    assert await store.due_deliveries() == []
    assert (await store.status()).deliveries.unknown == 1
    assert await store.resolve(report_id, "resend", "owner 1") == [part.delivery_id]
    assert [d.delivery_id for d in await store.due_deliveries()] == [part.delivery_id]
    with pytest.raises(IllegalTransition):                    # nothing awaits a decision any more
        await store.resolve(report_id, "delivered", "owner 1")


async def test_i_have_it_confirms_without_a_receipt(store: Store):
    report_id = await finished_report(store)
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_unknown(part.delivery_id, "dropped connection")
    await store.resolve(report_id, "delivered", "owner 1")
    assert states(await report(store, report_id)) == ["confirmed"]
    assert await store.check() == []


async def test_a_revoked_recipient_is_denied_and_a_refusal_fails(store: Store):
    first = await finished_report(store, source="tg:1:1")
    second = await finished_report(store, source="tg:1:2")
    parts = {d.report_id: d for d in await store.due_deliveries()}
    await store.mark_denied(parts[first].delivery_id, "not allow-listed")
    await store.mark_sending(parts[second].delivery_id)
    await store.mark_failed(parts[second].delivery_id, "Forbidden: bot was blocked by the user")
    assert states(await report(store, first)) == ["denied"] and states(await report(store, second)) == ["failed"]


async def test_take_due_reads_and_marks_sending_in_one_transaction_with_the_receipt_it_carries(store: Store):
    """Issue 31: `take_due` takes what `due_deliveries` would list first (chats in `skip_chats` left out), `sending`
    when returned; the receipt it carries is committed whether a part is taken or not; a refused chat's parts are
    denied on the way; nothing due: None."""
    first = await finished_report(store, source="tg:1:1")
    second = await finished_report(store, source="tg:1:2")
    await store.admit(Occurrence("tg:2:1", "tg:2", "stock", WorkKind.AGENT, "tg:2"))
    claim = await store.claim("w1")
    assert claim is not None
    third = (await store.finish(claim, ReportDraft("to chat 2", destination="tg:2"))).report_id
    listed = [d.report_id for d in await store.due_deliveries()]
    assert listed == [first, second, third]
    taken = await store.take_due(skip_chats=[1])            # negative control: chat 1's parts are left for later
    assert taken.delivery is not None and taken.delivery.report_id == third and taken.denied == ()
    assert taken.delivery.state is DeliveryState.SENDING and states(await report(store, third)) == ["sending"]
    assert [d.report_id for d in await store.due_deliveries()] == [first, second]
    taken = await store.take_due(confirms=[(taken.delivery.delivery_id, "71")])
    assert taken.delivery is not None and taken.delivery.report_id == first
    assert states(await report(store, third)) == ["confirmed"] and states(await report(store, first)) == ["sending"]
    refused = await store.take_due(confirms=[(taken.delivery.delivery_id, "72")], refuse=lambda chat_id: chat_id == 1)
    assert refused.delivery is None and [d.report_id for d in refused.denied] == [second]
    assert states(await report(store, first)) == ["confirmed"] and states(await report(store, second)) == ["denied"]
    assert await store.take_due() == Taken()
    assert await store.check() == []


async def report_to(store: Store, chat: int, message: int) -> str:
    await store.admit(Occurrence(f"tg:{chat}:{message}", f"tg:{chat}", "stock", WorkKind.AGENT, f"tg:{chat}"))
    claim = await store.claim("w1")
    assert claim is not None
    return (await store.finish(claim, ReportDraft(f"to {chat}", destination=f"tg:{chat}"))).report_id


async def test_take_due_takes_up_to_its_limit_one_part_per_chat_with_the_receipts_it_carries(store: Store):
    """Issue 31: one look marks several due parts `sending` for the relay to send at once: the oldest first, at most
    `limit`, never two of one chat (sent at once, they could arrive in either order); a refused chat's part is
    denied on the way and counts for nothing; the next look commits all their receipts."""
    first, second = await report_to(store, 1, 1), await report_to(store, 1, 2)
    third, refused, fourth = await report_to(store, 2, 1), await report_to(store, 3, 1), await report_to(store, 4, 1)
    taken = await store.take_due(limit=3, refuse=lambda chat_id: chat_id == 3)
    assert [d.report_id for d in taken.deliveries] == [first, third, fourth]      # chat 1's second report waits
    assert [d.report_id for d in taken.denied] == [refused] and taken.next_wake is None
    assert all(d.state is DeliveryState.SENDING and d.attempts == 1 for d in taken.deliveries)
    assert [states(await report(store, r)) for r in (first, second, third, fourth)] == [
        ["sending"], ["pending"], ["sending"], ["sending"]]
    later, fifth = await report_to(store, 2, 2), await report_to(store, 5, 1)
    await report_to(store, 6, 1)
    receipts = [(d.delivery_id, str(80 + n)) for n, d in enumerate(taken.deliveries)]
    more = await store.take_due(skip_chats=[5, 6], confirms=receipts, limit=3)
    assert [d.report_id for d in more.deliveries] == [second, later]     # chats 5 and 6 left out by pacing
    assert [(await report(store, r)).deliveries[0].receipt for r in (first, third, fourth)] == ["80", "81", "82"]
    assert [d.report_id for d in (await store.take_due(limit=1)).deliveries] == [fifth]   # the limit holds
    assert await store.check() == []


async def test_take_dues_empty_answer_carries_the_next_not_before_time(store: Store, clock: ManualClock):
    """Issue 31: the look that finds nothing due says, from its own transaction, when the next held part is due
    (what `next_delivery_time` says), so the relay sleeps on it without a read of its own; a look that takes a part
    needs none."""
    await finished_report(store)
    taken = await store.take_due()
    assert taken.delivery is not None and taken.next_wake is None
    await store.mark_not_sent(taken.delivery.delivery_id, "429", retry_after=7)
    empty = await store.take_due()
    assert empty.delivery is None and empty.next_wake is not None
    assert empty.next_wake == await store.next_delivery_time()
    assert round((empty.next_wake - clock.now()).total_seconds()) == 7
    clock.advance(7)
    again = await store.take_due()
    assert again.delivery is not None and again.delivery.delivery_id == taken.delivery.delivery_id
    await store.mark_confirmed(again.delivery.delivery_id, "9")
    assert await store.take_due() == Taken((), (), None)           # nothing held: no wake-up time


async def test_atomic_wakes_the_relays_only_for_what_it_wrote_for_them(store: Store):
    """Issue 31: an owner's plain message (its work and its receipt) wakes the worker and the receipt relay, not
    the report relay, whose look would find nothing new; a control item's report (and a resend) wakes it."""
    def drain() -> None:
        for pulse in (store.signals.work, store.signals.deliveries, store.signals.receipts):
            pulse._event.clear()

    def woken() -> set[str]:
        return {name for name in ("work", "deliveries", "receipts")
                if getattr(store.signals, name)._event.is_set()}

    def plain(tx: Transaction) -> None:
        tx.admit(Occurrence("tg:1:5", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
        tx.add_receipt(1, 5, "👀")
    drain()
    await store.atomic(plain)
    assert woken() == {"work", "receipts"}

    def control(tx: Transaction) -> None:
        tx.admit_answered(Occurrence("cb:1:6", "tg:1", "/pending", WorkKind.CONTROL, "tg:1"),
                          lambda tx, work_id: ReportDraft("nothing waits", destination="tg:1"))
    drain()
    await store.atomic(control)
    assert woken() == {"work", "deliveries"}                          # negative control: a report wakes it


async def test_button_nonces_are_random_and_decided_once(store: Store):
    def make(tx: Transaction) -> list[str]:
        return [tx.ask("unknown", "r1.1", 1).nonce for _ in range(20)]
    nonces = await store.atomic(make)
    assert len(set(nonces)) == 20 and all(len(n) * 4 >= 96 for n in nonces)

    def decide(tx: Transaction) -> tuple[bool, bool, str | None]:
        prompt = tx.prompt(nonces[0])
        assert prompt is not None and prompt.target == "r1.1" and prompt.decided_at is None
        return tx.decide_prompt(nonces[0], "resend", "owner 1"), tx.decide_prompt(nonces[0], "delivered", "x"), \
            (tx.prompt(nonces[0]) or prompt).decision
    assert await store.atomic(decide) == (True, False, "resend")


async def test_shop_records_seed_once_and_sync_keeps_counted_stock(store: Store):
    assert await store.seed_shop(SHOP, "shop.toml")
    assert not await store.seed_shop(SHOP, "shop.toml")
    assert sorted(await store.item_names()) == ["chocolate", "vanilla"]
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None and vanilla.on_hand == 2 and vanilla.reorder_point == 8
    changed = [ItemSpec("vanilla", "tubs", 40, 9, 12, 320, max_order=20), SHOP[1]]
    assert await store.sync_shop(changed, "shop.toml")
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None and vanilla.on_hand == 2 and vanilla.reorder_point == 9


async def proposed(store: Store, quantity: int = 6, item: str = "vanilla",
                   expires_at: datetime | None = None) -> tuple[int, str]:
    """A turn that proposes an order and finishes (its proposal becomes approvable)."""
    await store.seed_shop(SHOP, "shop.toml")
    await store.admit(Occurrence(f"tg:1:{item}", "tg:1", f"order {item}", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": item, "quantity": quantity}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", item, quantity,
                                         Policy("Dairy Direct", order_max_cents=5000, day_max_cents=5000,
                                                expires_at=expires_at))
    assert result.state is ProposalState.PROPOSED and result.refusal is None, result
    report_id = (await store.finish(claim, ReportDraft("proposed", destination="tg:1"))).report_id
    return result.proposal_id, report_id


@pytest.mark.parametrize(("minutes", "outcome"), [(-1, DecisionKind.EXPIRED), (1, DecisionKind.APPROVED)])
async def test_an_approval_after_the_proposals_expiry_expires_it(store: Store, clock, minutes, outcome):
    """The expiry is compared as a time on both stores (a timestamptz on PostgreSQL); the approval a minute before it
    is the negative control."""
    proposal_id, _ = await proposed(store, expires_at=clock.now() + timedelta(minutes=minutes))
    decision = await store.atomic(lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01",
                                                                 day_max_cents=5000, destination="supplier:dairy"))
    assert decision.kind is outcome


async def test_an_approval_commits_one_action_with_a_random_key(store: Store):
    proposal_id, _ = await proposed(store)

    def approve(tx: Transaction) -> tuple[bool, bool]:
        first = tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=5000,
                                    destination="supplier:dairy")
        second = tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=5000,
                                     destination="supplier:dairy")
        return first.ok, second.ok
    assert await store.atomic(approve) == (True, False)
    [action] = await store.due_actions()
    assert action.proposal_id == proposal_id and len(action.idempotency_key) == 32
    assert int(action.idempotency_key, 16) != action.action_id
    await store.action_move(ActionMove.MARK_SENDING, action.action_id)
    await store.action_move(ActionMove.MARK_DELIVERED, action.action_id, "order-77")
    assert await store.due_actions() == []
    with pytest.raises(IllegalTransition):
        await store.action_move(ActionMove.MARK_SENDING, action.action_id)


async def approved(store: Store, item: str) -> int:
    proposal_id, _ = await proposed(store, item=item)
    assert (await store.atomic(lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01",
                                                              day_max_cents=5000, destination="supplier:dairy"))).ok
    return next(a.action_id for a in await store.due_actions() if a.proposal_id == proposal_id)


async def test_an_action_moves_only_by_an_action_move_never_by_its_name(store: Store):
    action_id = await approved(store, "vanilla")
    for name in ("mark_sending", "no_such_move"):          # negative control: a name is no move, even a real one
        with pytest.raises(TypeError):
            await store.action_move(name, action_id)  # type: ignore[arg-type]
    assert [a.action_id for a in await store.due_actions()] == [action_id]    # nothing moved
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    assert await store.due_actions() == []
    await store.action_move(ActionMove.MARK_NOT_SENT, action_id, None, "connect refused")
    assert [a.action_id for a in await store.due_actions()] == [action_id]
    await store.action_move(ActionMove.QUARANTINE, action_id, "unknown supplier")
    assert [a.action_id for a in await store.actions(quarantined_only=True)] == [action_id]
    with pytest.raises(IllegalTransition):
        await store.action_move(ActionMove.MARK_FAILED, action_id, "refused")   # quarantined: not sending


async def test_a_proposal_of_an_unfinished_turn_is_void(store: Store):
    await store.seed_shop(SHOP, "shop.toml")
    await store.admit(Occurrence("tg:1:1", "tg:1", "order vanilla", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", "vanilla", 6, Policy("Dairy Direct"))
    await store.release(claim, delay_seconds=0, reason="model timed out")

    def approve(tx: Transaction) -> bool:
        return tx.approve_proposal(result.proposal_id, "owner 1", day="2027-03-01", day_max_cents=None,
                                   destination="supplier:dairy").ok
    assert not await store.atomic(approve)
    assert await store.due_actions() == []


async def test_a_change_committed_by_another_connection_is_noticed(kind: str, tmp_path: Path, clock: ManualClock,
                                                                 location: str | None):
    store = await opened(kind, tmp_path, clock, location)
    other = await opened(kind, tmp_path, clock, location)
    try:
        await store.poll_changes()
        assert not await store.poll_changes()
        await other.admit(Occurrence("till:t1:r1", "till:t1", "{}", WorkKind.AGENT, "till:t1"))
        assert await store.poll_changes()
        assert not await store.poll_changes()
    finally:
        await other.close()
        await store.close()


async def test_on_order_gives_each_order_its_due_time_after_the_lead_time(store: Store, clock):
    """Issue 27: `Insights.on_order` names when each order is due (approval plus the supplier's lead time), on both
    stores, so the agent can say when it is expected."""
    proposal_id, _ = await proposed(store)
    assert await store.on_order() == []                    # awaiting approval is not on order
    assert (await store.atomic(lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01",
                                                              day_max_cents=5000, destination="supplier:dairy",
                                                              lead_time_days=4))).ok
    [order] = await store.on_order("vanilla")
    assert order.proposal_id == proposal_id and order.quantity == 6 and order.unit == "tubs"
    approved_at, due_at = order.decided_at, order.due_at
    assert due_at - approved_at == timedelta(days=4) and approved_at == clock.now()
    assert await store.on_order("chocolate") == []
