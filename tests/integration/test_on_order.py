"""On order with the parts above the store (docs/contracts.md, Words, and C11): the stock watcher, the owner's
presses and commands, the worker. The store's own behaviour runs on both stores in
tests/contract/store/test_orders_contract.py; the SQL checks here plant violations on a raw SQLite connection to
show the schema refuses them."""
from __future__ import annotations

import sqlite3

import pytest

from bot.shop_file import load_shop
from producers.stock_watch import StockWatcher
from producers.telegram.owner import Press, admit_press
from store import ActionMove, Occurrence, OrderState, Policy, RecordedProposal, ReportDraft, asks
from tests.support import ROOT
from worker.models.offline import OfflineModel
from worker.worker import Worker, WorkerSettings

SHOP = load_shop(ROOT / "shop.example.toml")
POLICY = Policy("Dairy Direct")
DESTINATION = "supplier:Dairy Direct"


@pytest.fixture
async def shop(store):
    """The example shop: vanilla 2 on hand (reorder point 8, target 8), strawberry 1 (5, 5), chocolate 12 (6, 12)."""
    await store.seed_shop(SHOP.items, "test")
    return store


_turns = iter(range(1, 10_000))


async def propose(store, item: str, quantity: int) -> RecordedProposal:
    """One finished turn that proposed `item` (so the proposal awaits approval, C11)."""
    n = next(_turns)
    await store.admit(Occurrence(f"tg:1:{n}", "tg:1", "reorder", destination="tg:1"))
    claim = await store.claim("w1")
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": item, "quantity": quantity}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", item, quantity, POLICY)
    await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    return result


async def approve(store, proposal_id: int):
    return await store.atomic(lambda tx: tx.approve_proposal(
        proposal_id, "owner:1", day="2027-03-01", day_max_cents=None, destination=DESTINATION, lead_time_days=3))


async def approved_order(store, item="vanilla", quantity=6) -> tuple[int, int]:
    proposal = await propose(store, item, quantity)
    decision = await approve(store, proposal.proposal_id)
    assert decision.ok
    return proposal.proposal_id, decision.action_id


async def confirm(store, action_id: int, receipt="SUP-1") -> None:
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    await store.action_move(ActionMove.MARK_DELIVERED, action_id, receipt)


async def test_the_stock_watcher_never_checks_an_item_whose_position_reaches_its_reorder_point(shop, raw):
    watcher = StockWatcher(shop, "tg:1")
    first = await watcher.check()
    assert first.admitted == ("stock:strawberry:1", "stock:vanilla:1")
    proposal_id, action_id = await approved_order(shop)            # vanilla: 2 + 6 on order = 8 >= 8
    await confirm(shop, action_id)
    check = await watcher.check()
    assert check.rearmed == ("vanilla",) and check.admitted == ()
    assert (await watcher.check()).admitted == ()                  # many checks later: still nothing
    await shop.receive_order(proposal_id, "owner:1")
    assert (await watcher.check()).admitted == ()                  # 8 on hand, position unchanged
    rows = raw.execute("SELECT source FROM work WHERE session LIKE 'stock:%' ORDER BY work_id").fetchall()
    assert [r[0] for r in rows] == ["stock:strawberry:1", "stock:vanilla:1"]


async def test_a_late_order_is_asked_about_once_with_received_and_not_arrived(shop, clock, raw):
    watcher = StockWatcher(shop, "tg:1")
    proposal_id, _ = await approved_order(shop)
    assert (await watcher.check()).overdue == ()
    clock.advance(3 * 86400 + 60)
    assert (await watcher.check()).overdue == (f"notice:order_due:{proposal_id}",)
    assert (await watcher.check()).overdue == ()                   # once only
    body, buttons = raw.execute("SELECT r.body, r.buttons FROM reports r JOIN work w ON w.work_id = r.anchor "
                                "WHERE w.source = ?", (f"notice:order_due:{proposal_id}",)).fetchone()
    assert f"Order #{proposal_id} (6 tubs of vanilla" in body and "still not received" in body
    assert [a.verbs for a in asks.from_json(buttons)] == [("received", "not_arrived")]


async def press_button(store, stored: str, verb: str, callback: str):
    """Press the `verb` answer of what a stored report asks (its `buttons` column)."""
    [ask] = [a for a in asks.from_json(stored) if verb in a.verbs]
    press = Press(callback, 1, 1, asks.press_data(verb, ask.nonce), None)
    return await store.atomic(lambda tx: admit_press(tx, press))


async def test_the_owner_presses_received_on_the_approval_and_a_second_press_is_no_longer_valid(shop, raw):
    proposal = await propose(shop, "vanilla", 6)
    nonce = await shop.atomic(lambda tx: tx.ask("proposal", str(proposal.proposal_id), 1).nonce)
    approved = await shop.atomic(lambda tx: admit_press(tx, Press("cb1", 1, 1, f"approve:{nonce}", None)))
    assert approved.decided
    [buttons] = raw.execute("SELECT buttons FROM reports WHERE report_id = ?",
                            (approved.admission.report_id,)).fetchone()
    received = await press_button(shop, buttons, "received", "cb2")
    assert received.decided and received.answer.startswith(f"Received order #{proposal.proposal_id}: 6 tubs")
    assert (await shop.shop_item("vanilla")).on_hand == 8
    again = await press_button(shop, buttons, "received", "cb3")
    assert not again.decided and again.answer == "This button is no longer valid."
    assert (await shop.shop_item("vanilla")).on_hand == 8


async def test_reorder_after_an_approved_order_proposes_nothing_for_that_item(shop, raw):
    worker = Worker(shop, OfflineModel(), WorkerSettings(supplier="Dairy Direct"))
    proposal_id, action_id = await approved_order(shop)            # vanilla on order; strawberry still low
    await confirm(shop, action_id)
    await shop.admit(Occurrence("tg:1:500", "tg:1", "reorder", destination="tg:1"))
    await worker.drain()
    rows = raw.execute("SELECT item, state FROM proposals ORDER BY proposal_id").fetchall()
    assert [tuple(r) for r in rows] == [("vanilla", "approved"), ("strawberry", "awaiting_approval")]
    await shop.admit(Occurrence("tg:1:501", "tg:1", "stock vanilla", destination="tg:1"))
    await worker.drain()
    body = raw.execute("SELECT body FROM reports ORDER BY created_at DESC, report_id DESC").fetchone()[0]
    assert "vanilla: 2 tubs on hand, 6 tubs on order." in body
    assert "- vanilla on order: 6 tubs" in body.splitlines()
    assert f"order: {proposal_id}" not in body and f"order: #{proposal_id}" not in body   # an id, never a figure


# ---- the schema refuses violations, whoever writes (negative controls) -------------------------------------------
async def test_the_schema_refuses_a_proposal_for_an_item_on_order(shop, raw):
    await approved_order(shop)
    run_id = raw.execute("SELECT run_id FROM proposals").fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError, match="this item is on order"):
        raw.execute("INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, "
                    "created_at, updated_at) VALUES (?, 's', 'vanilla', 1, 1, 1, 'proposed', 'n', 'n')", (run_id,))


async def test_the_schema_refuses_a_change_to_a_settled_order_and_two_open_orders_per_item(shop, raw):
    proposal_id, _ = await approved_order(shop)
    await shop.receive_order(proposal_id, "owner:1")
    with pytest.raises(sqlite3.IntegrityError, match="never changes"):
        raw.execute("UPDATE orders SET state = 'on_order' WHERE proposal_id = ?", (proposal_id,))
    second, _ = await approved_order(shop, "strawberry", 4)
    run_id = raw.execute("SELECT run_id FROM proposals").fetchone()[0]
    other = raw.execute("INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, "
                        "state, created_at, updated_at) VALUES (?, 's', 'strawberry', 1, 1, 1, 'rejected', 'n', 'n')",
                        (run_id,)).lastrowid
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed: orders.item"):
        raw.execute("INSERT INTO orders (proposal_id, item, quantity, approved_at, due_at, updated_at) "
                    "VALUES (?, 'strawberry', 1, 'n', 'n', 'n')", (other,))
    assert [o.proposal_id for o in await shop.open_orders()] == [second]


async def test_the_received_command_takes_an_order_and_an_optional_count(shop, raw):
    from producers.telegram.owner import admit_command
    first, _ = await approved_order(shop)
    second, _ = await approved_order(shop, "strawberry", 4)

    async def say(n, text):
        result = await shop.atomic(lambda tx: admit_command(tx, f"tg:1:{n}", 1, text, "received"))
        return raw.execute("SELECT body FROM reports WHERE report_id = ?", (result.report_id,)).fetchone()[0]
    assert (await say(900, "/received")).startswith("Tell me which order arrived")
    assert (await say(901, "/received x")).startswith("Tell me which order arrived")
    assert (await say(902, f"/received {first}")).startswith(
        f"Received order #{first} (6 tubs of vanilla): 6 tubs added; vanilla is now 8 tubs on hand.")
    assert (await say(903, f"/received #{second} 3")).startswith(
        f"Received order #{second} (4 tubs of strawberry): you counted 3 tubs; strawberry is now 3 tubs on hand.")
    assert (await say(904, f"/received {first}")).startswith(f"Order #{first} is not on order (it is received)")
    assert await shop.open_orders() == []


async def test_not_arrived_on_the_late_order_notice_lets_the_watcher_check_the_item_again(shop, clock, raw):
    watcher = StockWatcher(shop, "tg:1")
    assert "stock:vanilla:1" in (await watcher.check()).admitted
    proposal_id, action_id = await approved_order(shop)
    await confirm(shop, action_id)
    assert (await watcher.check()).rearmed == ("vanilla",)             # position 8: the episode ended
    clock.advance(3 * 86400 + 60)
    await watcher.check()
    [buttons] = raw.execute("SELECT r.buttons FROM reports r JOIN work w ON w.work_id = r.anchor "
                            "WHERE w.source = ?", (f"notice:order_due:{proposal_id}",)).fetchone()
    pressed = await press_button(shop, buttons, "not_arrived", "cb-late")
    assert pressed.decided and "no longer count it as on order" in pressed.answer
    order = await shop.order(proposal_id)
    assert order is not None and order.state is OrderState.NOT_ARRIVED
    assert (await watcher.check()).admitted == ("stock:vanilla:2",)    # below its reorder point again: a new check
    again = await press_button(shop, buttons, "received", "cb-late-2")
    assert not again.decided and (await shop.shop_item("vanilla")).on_hand == 2
