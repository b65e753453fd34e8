"""On order and proposals through the ports, on both stores (docs/contracts.md, Words, and C11): an approved order
counts from its approval until it is received; nothing proposes an item on order. Every ordering-side method returns
its typed record: aware UTC times, states as enum members (store/order_records.py)."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from store import (
    ActionMove,
    ActionState,
    ActionView,
    CountRequest,
    Draft,
    IllegalTransition,
    ItemSpec,
    ManualClock,
    Occurrence,
    Order,
    OrderState,
    Policy,
    Proposal,
    ProposalState,
    ReceivedOrder,
    RecordedProposal,
    ReportDraft,
    SentMessage,
    Store,
    UnknownReport,
    UnknownTarget,
    WorkKind,
)

# vanilla 2 on hand (reorder point 8, target 8), strawberry 1 (5, 5), chocolate 12 (6, 12)
SHOP = [ItemSpec("vanilla", "tubs", 2, 8, 8, 300, max_order=20), ItemSpec("strawberry", "tubs", 1, 5, 5, 280),
        ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]
DESTINATION = "supplier:Dairy Direct"
_turns = iter(range(1, 10_000))


def aware(moment: object) -> bool:
    return isinstance(moment, datetime) and moment.utcoffset() == timedelta(0)


def typed(record: object) -> None:
    """Every time field of a record is an aware UTC datetime (or None where the column may be NULL)."""
    assert dataclasses.is_dataclass(record) and type(record).__dataclass_params__.frozen   # type: ignore[attr-defined]
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name.endswith("_at") or f.name == "since":
            assert value is None or aware(value), (f.name, value)


async def propose(store: Store, item: str, quantity: int, finish: bool = True) -> RecordedProposal:
    """One turn that proposed `item`; finished, so the proposal awaits approval (C11)."""
    session = "tg:1" if finish else "tg:2"           # an unfinished turn keeps its session busy
    await store.admit(Occurrence(f"{session}:{next(_turns)}", session, "reorder", WorkKind.AGENT, session))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": item, "quantity": quantity}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", item, quantity,
                                         Policy("Dairy Direct", expires_at=datetime(2027, 3, 2, 9, tzinfo=UTC)))
    if finish:
        await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    return result


async def approve(store: Store, proposal_id: int) -> int:
    decision = await store.atomic(lambda tx: tx.approve_proposal(
        proposal_id, "owner:1", day="2027-03-01", day_max_cents=None, destination=DESTINATION, lead_time_days=3))
    assert decision.ok and decision.action_id is not None
    return decision.action_id


async def approved_order(store: Store, item: str = "vanilla", quantity: int = 6) -> tuple[int, int]:
    proposal_id = (await propose(store, item, quantity)).proposal_id
    return proposal_id, await approve(store, proposal_id)


async def confirm(store: Store, action_id: int, receipt: str = "SUP-1") -> None:
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    await store.action_move(ActionMove.MARK_DELIVERED, action_id, receipt)


@pytest.fixture
async def shop(store: Store) -> Store:
    await store.seed_shop(SHOP, "test")
    return store


async def test_a_proposal_reads_as_its_record_in_every_place_it_is_shown(shop: Store, clock: ManualClock):
    result = await propose(shop, "vanilla", 6, finish=False)
    assert isinstance(result, RecordedProposal) and result.state is ProposalState.PROPOSED
    mine = await shop.atomic(lambda tx: tx.proposal(result.proposal_id))
    assert isinstance(mine, Proposal) and mine.state is ProposalState.PROPOSED
    assert (mine.item, mine.quantity, mine.total_cents, mine.unit, mine.reason, mine.refusal) == (
        result.item, result.quantity, result.total_cents, result.unit, result.reason, result.refusal)
    assert await shop.atomic(lambda tx: tx.run_proposals(mine.run_id)) == [mine]
    assert await shop.awaiting_proposals() == []                     # its turn has not finished
    await propose(shop, "strawberry", 4)
    [awaiting] = await shop.awaiting_proposals()
    typed(awaiting)
    assert (awaiting.item, awaiting.unit, awaiting.quantity, awaiting.total_cents) == ("strawberry", "tubs", 4, 1120)
    assert awaiting.state is ProposalState.AWAITING_APPROVAL and awaiting.created_at == clock.now()
    assert awaiting.expires_at == datetime(2027, 3, 2, 9, tzinfo=UTC) and awaiting.decided_at is None
    assert await shop.atomic(lambda tx: tx.awaiting_proposals()) == [awaiting]
    assert await shop.open_proposals() == [awaiting]
    assert await shop.atomic(lambda tx: tx.proposal(999)) is None
    clock.set(datetime(2027, 3, 2, 9, tzinfo=UTC))                  # expired, not yet marked so
    assert await shop.awaiting_proposals() == [] and await shop.open_proposals() == [awaiting]
    await approve_refused(shop, awaiting.proposal_id)
    [expired] = await shop.atomic(lambda tx: tx.run_proposals(awaiting.run_id))
    assert expired.state is ProposalState.EXPIRED and aware(expired.decided_at)


async def approve_refused(store: Store, proposal_id: int) -> None:
    decision = await store.atomic(lambda tx: tx.approve_proposal(
        proposal_id, "owner:1", day="2027-03-02", day_max_cents=None, destination=DESTINATION))
    assert not decision.ok


async def test_an_approved_order_is_on_order_and_counts_in_the_position(shop: Store, clock: ManualClock):
    proposal_id, action_id = await approved_order(shop)
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and (vanilla.on_hand, vanilla.on_order, vanilla.position) == (2, 6, 8)
    [order] = await shop.open_orders("vanilla")
    typed(order)
    assert isinstance(order, Order) and order.state is OrderState.ON_ORDER
    assert (order.proposal_id, order.item, order.quantity, order.unit) == (proposal_id, "vanilla", 6, "tubs")
    assert order.action_state is ActionState.PENDING and order.status == "being sent to the supplier"
    assert order.approved_at == clock.now() and order.due_at == clock.now() + timedelta(days=3)
    await confirm(shop, action_id)
    [order] = await shop.open_orders()
    assert order.action_state is ActionState.DELIVERED and order.receipt == "SUP-1"
    assert order.status == "confirmed by the supplier (their id SUP-1)"
    assert await shop.atomic(lambda tx: tx.open_orders()) == [order]
    assert await shop.atomic(lambda tx: tx.order(proposal_id)) == await shop.order(proposal_id) == order
    assert await shop.open_orders("strawberry") == [] and await shop.order(999) is None


async def test_an_item_on_order_gets_no_second_proposal(shop: Store):
    proposal_id, action_id = await approved_order(shop)
    await confirm(shop, action_id)
    again = await propose(shop, "vanilla", 6)
    assert again.state is ProposalState.REJECTED_BY_POLICY and again.refusal is None
    assert again.reason == (f"vanilla is already on order: 6 tubs, order #{proposal_id}, confirmed by the "
                               "supplier (their id SUP-1)")


async def test_an_item_at_or_above_its_reorder_point_gets_no_proposal(shop: Store):
    result = await propose(shop, "chocolate", 2)
    assert result.state is ProposalState.REJECTED_BY_POLICY and result.reason is not None
    assert "at or above its reorder point of 6: nothing to order" in result.reason


async def test_received_adds_the_ordered_quantity_as_a_received_stock_event(shop: Store, clock: ManualClock):
    proposal_id, action_id = await approved_order(shop)
    await confirm(shop, action_id)
    done = await shop.receive_order(proposal_id, "owner:1")
    assert isinstance(done, ReceivedOrder) and (done.old_on_hand, done.new_on_hand, done.source) == (2, 8, "owner:1")
    typed(done.order)
    assert done.order.state is OrderState.RECEIVED and done.order.settled_by == "owner:1"
    assert done.order.settled_at == clock.now() and done.order.event_id is not None
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and (vanilla.on_hand, vanilla.on_order, vanilla.position) == (8, 0, 8)
    events = await shop.stock_events("vanilla")
    assert [(e.kind, e.old_on_hand, e.new_on_hand) for e in events] == [("seed", None, 2), ("received", 2, 8)]
    with pytest.raises(IllegalTransition, match="is received, not on order"):   # a second Received changes nothing
        await shop.receive_order(proposal_id, "owner:1")
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and vanilla.on_hand == 8
    with pytest.raises(UnknownTarget):
        await shop.receive_order(999, "owner:1")


async def test_received_in_the_owners_transaction_and_with_a_count(shop: Store):
    proposal_id, _ = await approved_order(shop)
    with pytest.raises(ValueError):
        await shop.receive_order(proposal_id, "owner:1", counted=-1)
    order = await shop.order(proposal_id)
    assert order is not None and order.state is OrderState.ON_ORDER
    done = await shop.atomic(lambda tx: tx.receive_order(proposal_id, "owner:1", counted=7))  # one sold since
    assert (done.old_on_hand, done.new_on_hand, done.order.state) == (2, 7, OrderState.RECEIVED)
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and (vanilla.on_hand, vanilla.on_order, vanilla.position) == (7, 0, 7)
    assert [e.kind for e in await shop.stock_events("vanilla")] == ["seed", "received"]


async def counts(store: Store, request_id: str, values: dict[str, int]) -> None:
    source = f"till:1:{request_id}"
    await store.admit(Occurrence(source, "till:1", '{"counts": {}}', WorkKind.AGENT, "till:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.finish_counts(claim, [CountRequest(source, values)], lambda applied: f"{len(applied)} counts")


async def test_a_till_count_that_rose_by_the_ordered_amount_is_a_restock_that_receives_the_order(shop: Store):
    proposal_id, action_id = await approved_order(shop)
    await confirm(shop, action_id)
    await counts(shop, "c1", {"vanilla": 1})          # sold one: a count, still on order
    await counts(shop, "c2", {"vanilla": 5})          # rose by 4 < 6: a count, still on order
    assert await shop.atomic(lambda tx: tx.restocked_orders_after(0)) == []
    await counts(shop, "c3", {"vanilla": 11})         # rose by 6: the order arrived
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and (vanilla.on_hand, vanilla.on_order, vanilla.position) == (11, 0, 11)
    order = await shop.order(proposal_id)
    assert order is not None and (order.state, order.settled_by) == (OrderState.RECEIVED, "till:1:c3")
    kinds = [(e.kind, e.old_on_hand, e.new_on_hand) for e in await shop.stock_events("vanilla")]
    assert kinds == [("seed", None, 2), ("count", 2, 1), ("count", 1, 5), ("restock", 5, 11)]
    [restock] = await shop.atomic(lambda tx: tx.restocked_orders_after(0))
    assert (restock.order, restock.old_on_hand, restock.new_on_hand, restock.source) == (order, 5, 11, "till:1:c3")
    assert order.event_id is not None
    assert await shop.atomic(lambda tx: tx.restocked_orders_after(order.event_id or 0)) == []


async def test_a_failed_order_is_not_on_order(shop: Store):
    proposal_id, action_id = await approved_order(shop)
    await shop.action_move(ActionMove.MARK_SENDING, action_id)
    await shop.action_move(ActionMove.MARK_FAILED, action_id, "the supplier refused: out of stock")
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and vanilla.on_order == 0
    order = await shop.order(proposal_id)
    assert order is not None and order.state is OrderState.CANCELLED and order.action_state is ActionState.FAILED
    assert (await propose(shop, "vanilla", 6)).state is ProposalState.PROPOSED


async def test_a_voided_quarantined_order_is_not_on_order(shop: Store):
    proposal_id, action_id = await approved_order(shop)
    await shop.action_move(ActionMove.QUARANTINE, action_id, "unknown destination")
    [order] = await shop.open_orders()
    assert order.status == "held back, not sent"                    # held, still counted: it may be released
    [view] = await shop.actions(quarantined_only=True)
    assert isinstance(view, ActionView) and view.state is ActionState.QUARANTINED
    assert (view.action_id, view.proposal_id, view.item, view.quantity, view.total_cents, view.reason) == (
        action_id, proposal_id, "vanilla", 6, 1800, "unknown destination")
    await shop.decide_action(action_id, "void", "operator")
    cancelled = await shop.order(proposal_id)
    assert await shop.open_orders() == [] and cancelled is not None and cancelled.state is OrderState.CANCELLED
    assert [a.state for a in await shop.actions()] == [ActionState.VOIDED]
    assert await shop.actions(quarantined_only=True) == []


async def test_not_arrived_stops_counting_the_order_and_leaves_the_stock(shop: Store):
    proposal_id, _ = await approved_order(shop)
    done = await shop.order_not_arrived(proposal_id, "owner:1")
    assert isinstance(done, Order) and done.state is OrderState.NOT_ARRIVED and aware(done.settled_at)
    vanilla = await shop.shop_item("vanilla")
    assert vanilla is not None and (vanilla.on_hand, vanilla.on_order) == (2, 0)
    with pytest.raises(IllegalTransition):
        await shop.receive_order(proposal_id, "owner:1")
    with pytest.raises(IllegalTransition):
        await shop.atomic(lambda tx: tx.order_not_arrived(proposal_id, "owner:1"))
    second, _ = await approved_order(shop, "strawberry", 4)
    late = await shop.atomic(lambda tx: tx.order_not_arrived(second, "owner:1"))
    assert late.state is OrderState.NOT_ARRIVED


async def test_an_order_is_overdue_only_after_the_lead_time(shop: Store, clock: ManualClock):
    proposal_id, _ = await approved_order(shop)
    assert await shop.atomic(lambda tx: tx.overdue_orders()) == []
    clock.advance(3 * 86400)
    [late] = await shop.atomic(lambda tx: tx.overdue_orders())
    typed(late)
    assert late.proposal_id == proposal_id and late.due_at <= clock.now()


async def test_a_draft_is_costed_from_the_catalog(shop: Store):
    await shop.admit(Occurrence("tg:1:d", "tg:1", "draft", WorkKind.AGENT, "tg:1"))
    claim = await shop.claim("w1")
    assert claim is not None
    draft = await shop.record_draft(claim.run_id, "vanilla", 4)
    assert isinstance(draft, Draft) and (draft.item, draft.quantity, draft.cost_cents, draft.unit) == (
        "vanilla", 4, 1200, "tubs")
    with pytest.raises(UnknownTarget):
        await shop.record_draft(claim.run_id, "menta", 1)


async def test_an_unknown_report_and_a_sent_message_read_as_records(store: Store, clock: ManualClock):
    await store.admit(Occurrence("tg:7:1", "tg:7", "stock", WorkKind.AGENT, "tg:7"))
    claim = await store.claim("w1")
    assert claim is not None
    body = "Vanilla is low.\nShall I order?"
    report_id = (await store.finish(claim, ReportDraft(body, destination="tg:7"))).report_id
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_confirmed(part.delivery_id, "555")
    sent = await store.atomic(lambda tx: tx.sent_message(7, 555))
    assert isinstance(sent, SentMessage) and sent.report_id == report_id and sent.text == body
    assert sent.asks == ()           # what a report asks reads back: tests/contract/store/test_asks_contract.py
    assert await store.atomic(lambda tx: tx.sent_message(7, 556)) is None
    assert await store.atomic(lambda tx: tx.unknown_reports()) == []
    await store.admit(Occurrence("tg:7:2", "tg:7", "again", WorkKind.AGENT, "tg:7"))
    claim = await store.claim("w1")
    assert claim is not None
    lost = (await store.finish(claim, ReportDraft("Lost reply", destination="tg:7"))).report_id
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_unknown(part.delivery_id, "read timeout")
    [unknown] = await store.atomic(lambda tx: tx.unknown_reports())
    typed(unknown)
    assert isinstance(unknown, UnknownReport) and unknown.kind is WorkKind.AGENT
    assert (unknown.report_id, unknown.chat_id, unknown.preview, unknown.resends) == (lost, 7, "Lost reply", 0)
    assert unknown.since == clock.now() and unknown.created_at == clock.now()


async def test_an_approval_wakes_the_action_relay_after_its_commit_on_the_event_loop(shop: Store):
    """Found by an audit: `approve_proposal` set the action relay's asyncio event from inside the transaction, in
    the database driver's thread and before the commit (an event is the loop's own: a wake-up could be lost, and the
    relay looked before the action was there). It is woken once the commit returned, on the loop."""
    store = shop
    proposal_id = (await propose(store, "vanilla", 6)).proposal_id
    actions = store.signals.actions  # type: ignore[attr-defined]
    await actions.wait(0)                              # no earlier wake-up left over
    inside: list[bool] = []

    def approving(tx):  # type: ignore[no-untyped-def]
        decision = tx.approve_proposal(proposal_id, "owner:1", day="2027-03-01", day_max_cents=None,
                                       destination=DESTINATION, lead_time_days=3)
        inside.append(actions._event.is_set())         # in the driver's thread, before the commit
        return decision
    decision = await store.atomic(approving)
    assert decision.action_id is not None
    assert inside == [False]
    assert await actions.wait(0)                       # woken after the commit
