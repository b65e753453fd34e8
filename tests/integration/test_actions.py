"""C11 end to end: proposals validated by policy, approval by button (one transaction with the reservation and the
action row), the action relay with a stable idempotency key, reconciliation, quarantine (real PTB client, local Bot
API server and local supplier over HTTP)."""
from __future__ import annotations

import sqlite3

from bot.sandbox.local_setup import OWNER_ID, local_product
from tests.support import DATA

FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0"}


def rows(run, sql, *args):
    conn = sqlite3.connect(str(run.app.cfg.db))
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


async def proposals_shown(run, count=2):
    """At start the stock watcher checks vanilla and strawberry; each check proposes one order."""
    await run.api.wait_for(lambda: len([m for m in run.owner_messages() if m.text.startswith("Order proposal")])
                           >= count, timeout=15)
    return {("vanilla" if "vanilla" in m.text.splitlines()[0] else "strawberry"): m
            for m in run.owner_messages() if m.text.startswith("Order proposal")}


def press(run, message, label, user=OWNER_ID, chat=OWNER_ID, *, now=False):
    """Press a button of `message` as it was sent (an old keyboard still on a phone), or as it reads `now`."""
    markup = run.now(message)["markup"] if now else message.reply_markup
    data = next(b["callback_data"] for row in markup["inline_keyboard"] for b in row if b["text"] == label)
    return run.api.post_callback(chat, user, data, message.message_id)


async def settled(run, text_part, timeout=15.0):
    """Until the owner's chat showed `text_part`, in a new message or in a card edited in place."""
    await run.api.wait_for(lambda: any(text_part in text for text in run.owner_texts()), timeout=timeout)


async def test_approval_sends_one_order_and_tells_the_owner():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        assert "vanilla 6 × $3.00 = $18.00" in shown["vanilla"].text and "cents" not in shown["vanilla"].text
        press(run, shown["vanilla"], "Approve")
        await settled(run, "is confirmed by the supplier")
        [order] = run.supplier.orders
        assert order["lines"] == [{"item": "vanilla", "quantity": 6}] and set(order) == {
            "order_id", "key", "supplier", "reference", "lines"}                 # the minimum the supplier needs
        assert rows(run, "SELECT state, receipt FROM actions") == [("delivered", order["order_id"])]
        assert rows(run, "SELECT cents, state FROM spending") == [(1800, "reserved")]
        key = rows(run, "SELECT idempotency_key FROM actions")[0][0]
        assert len(key) == 32 and order["key"] == key and key != "1"
        # a second press of the same button changes nothing and says so
        press(run, shown["vanilla"], "Approve")
        await settled(run, "no longer valid")
        assert len(rows(run, "SELECT * FROM actions")) == 1 and len(run.supplier.orders) == 1
        assert await run.app.parts.store.check() == []


async def test_a_lost_supplier_reply_is_reconciled_by_key_not_ordered_twice():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        run.supplier.inject("drop_after_commit")
        press(run, shown["strawberry"], "Approve")
        await settled(run, "is confirmed by the supplier")
        assert len(run.supplier.orders) == 1
        posts = [k for method, k in run.supplier.requests if method == "POST"]
        gets = [k for method, k in run.supplier.requests if method == "GET"]
        assert len(posts) == 1 and gets == posts                 # asked about the key, did not resend
        assert rows(run, "SELECT decision FROM action_decisions") == [("reconciled_found",)]
        assert await run.app.parts.store.check() == []


async def test_an_order_that_never_arrived_is_sent_again_with_the_same_key():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        run.supplier.inject("drop_before_commit")          # the connection drops before the supplier commits
        press(run, shown["strawberry"], "Approve")
        await settled(run, "is confirmed by the supplier")
        posts = [k for method, k in run.supplier.requests if method == "POST"]
        assert len(posts) == 2 and posts[0] == posts[1] and len(run.supplier.orders) == 1
        assert rows(run, "SELECT decision FROM action_decisions") == [("reconciled_absent",)]


async def test_a_refused_order_fails_visibly_and_releases_the_spending():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        run.supplier.inject("422")
        press(run, shown["vanilla"], "Approve")
        await settled(run, "failed: the supplier refused the order")
        assert rows(run, "SELECT state FROM actions") == [("failed",)]
        assert rows(run, "SELECT state FROM spending") == [("released",)]
        assert run.supplier.orders == []
        assert await run.app.parts.store.check() == []


async def test_policy_rejects_over_the_limit_and_the_day_limit_holds_at_approval():
    async with local_product({**FAST, "SHOPBOT_SHOP_FILE": str(DATA / "shop_tight.toml")}) as run:
        await settled(run, "rejected by the shop's rules")
        rejected = next(m for m in run.owner_messages() if "rejected by the shop's rules" in m.text)
        assert "vanilla" in rejected.text and "over the limit of $15.00 per order" in rejected.text
        assert not (rejected.reply_markup or {}).get("inline_keyboard")   # never approvable
        shown = await proposals_shown(run, count=1)
        press(run, shown["strawberry"], "Approve")         # 800 of the 2000 a day
        await settled(run, "is confirmed by the supplier")
        # the refusal is typed (its kind and amounts), its words made by the renderer (migration 0020)
        assert rows(run, "SELECT item, state, refusal, refusal_limit_cents, reason FROM proposals ORDER BY item") == [
            ("strawberry", "approved", None, None, None), ("vanilla", "rejected_by_policy", "order_limit", 1500, None)]
        assert [o["lines"][0]["item"] for o in run.supplier.orders] == ["strawberry"]


async def test_tampered_stale_expired_and_foreign_presses_change_nothing():
    async with local_product({**FAST, "SHOPBOT_OWNER_IDS": f"{OWNER_ID},2002"}) as run:
        shown = await proposals_shown(run)
        message = shown["vanilla"]
        # a nonce never issued
        run.api.post_callback(OWNER_ID, OWNER_ID, "approve:" + "ab" * 16, message.message_id)
        # another owner pressing in another chat
        data = message.reply_markup["inline_keyboard"][0][0]["callback_data"]
        run.api.post_callback(2002, 2002, data, message.message_id)
        # a stranger
        stranger = run.api.post_callback(666, 666, data, message.message_id)
        await run.admitted(stranger["update_id"])
        await run.api.wait_for(lambda: sum("no longer valid" in m.text for m in run.api.sent) == 2, timeout=10)
        assert rows(run, "SELECT count(*) FROM actions") == [(0,)]
        # expired: an approval after the expiry changes nothing and says so
        conn = sqlite3.connect(str(run.app.cfg.db))
        conn.execute("UPDATE proposals SET expires_at = '2000-01-01T00:00:00.000000Z'")
        conn.commit()
        conn.close()
        press(run, shown["strawberry"], "Approve")
        await settled(run, "expired before it was approved")
        assert rows(run, "SELECT count(*) FROM actions") == [(0,)] and run.supplier.orders == []
        assert await run.app.parts.store.check() == []


async def test_quarantined_actions_are_listed_never_sent_and_decided_by_the_operator():
    async with local_product(FAST) as run:
        await proposals_shown(run)
        store = run.app.parts.store
        conn = sqlite3.connect(str(run.app.cfg.db))
        # an action row that no approval of ours would write: an unknown destination
        conn.execute("UPDATE proposals SET state = 'approved' WHERE item = 'vanilla'")
        pid = conn.execute("SELECT proposal_id FROM proposals WHERE item = 'vanilla'").fetchone()[0]
        conn.execute("INSERT INTO spending VALUES (?, '2027-01-01', 1800, 'reserved', 'n')", (pid,))
        conn.execute("INSERT INTO orders (proposal_id, item, quantity, approved_at, due_at, updated_at) "
                     "VALUES (?, 'vanilla', 6, 'n', 'n', 'n')", (pid,))        # as an approval writes it
        conn.execute("INSERT INTO actions (proposal_id, idempotency_key, destination, payload, created_at, updated_at)"
                     " VALUES (?, 'ffffffffffffffffffffffffffffffff', 'supplier:elsewhere', "
                     "'{\"lines\": [{\"item\": \"vanilla\", \"quantity\": 6}], \"prompt\": \"x\"}', 'n', 'n')", (pid,))
        conn.commit()
        conn.close()
        store.signals.actions.notify()
        await settled(run, "was held back and not sent")
        status = await store.status()
        [held] = status.quarantined_actions
        assert held.reason is not None and "unknown destination" in held.reason
        assert run.supplier.requests == []
        assert await store.check() == []
        assert await store.decide_action(held.action_id, "void", "operator:test") == "voided"
        assert rows(run, "SELECT state FROM spending") == [("released",)]
        assert rows(run, "SELECT state FROM orders") == [("cancelled",)]           # a voided order is not on order
        assert await store.check() == []


async def test_a_till_count_below_the_reorder_point_reaches_the_owner_once():
    import httpx
    token = "till-one-secret-token-0001"
    async with local_product({**FAST, "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml"),
                              "SHOPBOT_TILL_TOKENS": f"1:{token}"}) as run:
        await run.app.parts.http.started.wait()
        url = f"http://127.0.0.1:{run.app.parts.http.port}/till/counts"
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as till:
            posted = await till.post(url, json={"request_id": "day-1.close", "counts": {"vanilla": 3}})
            assert posted.status_code == 202 and posted.json()["outcome"] == "accepted"
            again = await till.post(url, json={"request_id": "day-1.close", "counts": {"vanilla": 3}})
            assert again.json()["outcome"] == "duplicate"
            await run.api.wait_for(lambda: any("Order proposal" in m.text for m in run.owner_messages()), timeout=15)
            report = await till.get(f"{url}/day-1.close")
            assert report.status_code == 200 and "vanilla: 3 (was 9)" in report.text
        checks = [m for m in run.owner_messages() if "vanilla" in m.text and m.text.startswith("Order proposal")]
        assert len(checks) == 1                               # one message: the card with its figures and buttons
        assert buttons_of(checks[0]) == ["Approve", "Reject"] and "Proposed: vanilla" in checks[0].text
        assert rows(run, "SELECT source FROM work WHERE source LIKE 'stock:%'") == [("stock:vanilla:1",)]


def buttons_of(message) -> list[str]:
    return [b["text"] for row in (message.reply_markup or {}).get("inline_keyboard", []) for b in row]


async def test_formerly_bug_an_approved_order_is_on_order_so_neither_reorder_nor_the_watcher_orders_it_twice():
    """The owner paid twice: after order #2 (6 vanilla) was confirmed, `reorder` proposed the same 6 tubs again."""
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        press(run, shown["vanilla"], "Approve")
        await settled(run, "is confirmed by the supplier")
        run.api.post_message(OWNER_ID, OWNER_ID, "reorder")
        await settled(run, "Nothing to reorder")
        await run.app.parts.producers.watcher.check()             # the stock watcher's next run
        store = run.app.parts.store
        vanilla = await store.shop_item("vanilla")
        assert (vanilla.on_hand, vanilla.on_order, vanilla.position) == (2, 6, 8)
        assert rows(run, "SELECT item, state FROM proposals WHERE item = 'vanilla'") == [("vanilla", "approved")]
        assert rows(run, "SELECT count(*) FROM work WHERE source LIKE 'stock:vanilla:%'") == [(1,)]
        run.api.post_message(OWNER_ID, OWNER_ID, "stock vanilla")
        await settled(run, "6 tubs on order")
        # the approval's answer carries Received: pressed, the order's 6 tubs are on hand and nothing is on order
        card = shown["vanilla"]                    # the approval edited the card in place: it now offers Received
        assert "Approved #" in run.now(card)["text"] and "— owner 1001, " in run.now(card)["text"]
        press(run, card, "Received", now=True)
        await settled(run, "vanilla is now 8 tubs on hand")
        vanilla = await store.shop_item("vanilla")
        assert (vanilla.on_hand, vanilla.on_order, vanilla.position) == (8, 0, 8)
        assert [e.kind for e in await store.stock_events("vanilla")] == ["seed", "received"]
        assert await store.check() == []


async def test_pending_lists_a_proposal_an_unsure_reply_and_an_order_awaiting_receipt_with_their_buttons():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        press(run, shown["vanilla"], "Approve")
        await settled(run, "is confirmed by the supplier")
        run.api.inject("sendMessage", "drop_after_accept")
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await settled(run, "I may not have delivered")
        [unsure] = [r[0] for r in rows(run, "SELECT DISTINCT report_id FROM deliveries WHERE state = 'unknown'")]
        run.api.post_message(OWNER_ID, OWNER_ID, "/pending")
        await settled(run, "Proposals awaiting your decision")
        pending = [m for m in run.owner_messages() if "Proposals awaiting your decision" in m.text][-1]
        strawberry = rows(run, "SELECT proposal_id FROM proposals WHERE item = 'strawberry'")[0][0]
        vanilla = rows(run, "SELECT proposal_id FROM proposals WHERE item = 'vanilla'")[0][0]
        assert f"#{strawberry} strawberry: 4 tubs" in pending.text
        assert f"{unsure}: " in pending.text and "Replies that may not have arrived" in pending.text
        assert f"#{vanilla} vanilla: 6 tubs, confirmed by the supplier" in pending.text
        assert buttons_of(pending) == [f"Approve #{strawberry}", f"Reject #{strawberry}", f"Resend {unsure}",
                                       f"I have it {unsure}", f"Received #{vanilla}"]
        # Received from /pending: the order's own card says so too, and its Received is no longer offered
        press(run, pending, f"Received #{vanilla}")
        await run.api.wait_for(lambda: f"Received order #{vanilla}" in run.now(shown["vanilla"])["text"], timeout=10)
        assert run.now(shown["vanilla"])["markup"] is None
        # each button works from /pending: Approve there closes the card's buttons too
        press(run, pending, f"Approve #{strawberry}")
        await settled(run, f"Approved #{strawberry}")
        press(run, shown["strawberry"], "Approve")
        await settled(run, "no longer valid")
        assert len(rows(run, "SELECT * FROM actions")) == 2


async def test_a_pressed_approve_edits_its_card_which_then_follows_the_order_to_the_supplier_and_the_till():
    import httpx
    token = "till-one-secret-token-0001"
    async with local_product({**FAST, "SHOPBOT_TILL_TOKENS": f"1:{token}"}) as run:
        shown = await proposals_shown(run)
        card = shown["vanilla"]
        sent_before = len(run.owner_messages())
        press(run, card, "Approve")
        await settled(run, "is confirmed by the supplier")
        await run.api.wait_for(lambda: "confirmed by the supplier" in run.now(card)["text"], timeout=10)
        now = run.now(card)
        assert now["text"].startswith("Order proposal #") and "Approved #" in now["text"]
        assert "— owner 1001, " in now["text"]                                      # who and when
        assert [b["text"] for row in now["markup"]["inline_keyboard"] for b in row] == ["Received"]
        # the supplier's outcome is also a new message; the approval itself made none
        news = [m.text for m in run.owner_messages()[sent_before:]]
        assert len(news) == 1 and "is confirmed by the supplier" in news[0]
        # the till counts the delivery: a restock that receives the order, told once, and the card says so
        await run.app.parts.http.started.wait()
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as till:
            posted = await till.post(f"http://127.0.0.1:{run.app.parts.http.port}/till/counts",
                                     json={"request_id": "delivery-1", "counts": {"vanilla": 8}})
            assert posted.status_code == 202
        await settled(run, "arrived: till:1:delivery-1 counted 8 tubs of vanilla (was 2)")
        await run.api.wait_for(lambda: "Received: " in run.now(card)["text"], timeout=10)
        assert run.now(card)["markup"] is None
        store = run.app.parts.store
        assert [e.kind for e in await store.stock_events("vanilla")] == ["seed", "restock"]
        assert (await store.shop_item("vanilla")).on_order == 0
        assert await store.check() == []


async def test_a_lost_reply_on_a_card_edit_is_unknown_and_resent_only_by_decision():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        run.api.inject("editMessageText", "drop_after_accept")
        press(run, shown["strawberry"], "Reject")
        await settled(run, "I may not have delivered")
        [unsure] = rows(run, "SELECT report_id, state FROM deliveries WHERE edit_of IS NOT NULL")
        assert unsure[1] == "unknown"
        assert "Rejected #" in run.now(shown["strawberry"])["text"]               # it did arrive
        notice = next(m for m in run.owner_messages() if "I may not have delivered" in m.text)
        press(run, notice, "Resend")
        await run.api.wait_for(lambda: rows(run, "SELECT state FROM deliveries WHERE report_id = ?",
                                            unsure[0]) == [("confirmed",)], timeout=10)
        # the edit sent again found the card already so: Telegram's "message is not modified" means it was applied
        assert rows(run, "SELECT resends, receipt FROM deliveries WHERE report_id = ?", unsure[0]) == [
            (1, str(shown["strawberry"].message_id))]
        assert await run.app.parts.store.check() == []


async def test_the_vanilla_came_offers_the_orders_received_button_and_a_press_receives_it():
    """Issue 27: "the vanilla came" (and "llegó la vainilla") offers the Received button of vanilla's open order,
    through the offline model, the real worker and the local Bot API; the turn receives nothing; the press does."""
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        press(run, shown["vanilla"], "Approve")
        await settled(run, "is confirmed by the supplier")
        vanilla_id = rows(run, "SELECT proposal_id FROM proposals WHERE item = 'vanilla'")[0][0]
        store = run.app.parts.store
        run.api.post_message(OWNER_ID, OWNER_ID, "llegó la vainilla")
        await settled(run, "Pulsa Received abajo")
        run.api.post_message(OWNER_ID, OWNER_ID, "the vanilla came")
        await settled(run, "Press Received below")
        offer = [m for m in run.owner_messages() if "Press Received below" in m.text][-1]
        assert f"order #{vanilla_id} (vanilla, 6 tubs, $18.00)" in offer.text
        assert buttons_of(offer) == [f"Received #{vanilla_id}"]
        spanish = [m for m in run.owner_messages() if "Pulsa Received abajo" in m.text][-1]
        assert "6 tarrinas" in spanish.text and buttons_of(spanish) == [f"Received #{vanilla_id}"]
        vanilla = await store.shop_item("vanilla")
        assert (vanilla.on_hand, vanilla.on_order) == (2, 6)          # offered, not received
        # "anything waiting for me?" lists what /pending lists, with the buttons /pending has
        strawberry = rows(run, "SELECT proposal_id FROM proposals WHERE item = 'strawberry'")[0][0]
        run.api.post_message(OWNER_ID, OWNER_ID, "anything waiting for me?")
        await settled(run, "Waiting for you:")
        waiting = [m for m in run.owner_messages() if m.text.startswith("Waiting for you:")][-1]
        assert f"proposal #{strawberry} (strawberry 4 tubs for $8.00) awaits your approval" in waiting.text
        assert buttons_of(waiting) == [f"Approve #{strawberry}", f"Reject #{strawberry}", f"Received #{vanilla_id}"]
        press(run, offer, f"Received #{vanilla_id}")
        await settled(run, "vanilla is now 8 tubs on hand")
        vanilla = await store.shop_item("vanilla")
        assert (vanilla.on_hand, vanilla.on_order) == (8, 0)
        # the other offer's button is now stale: a press changes nothing
        press(run, spanish, f"Received #{vanilla_id}")
        await settled(run, "no longer valid")
        assert (await store.shop_item("vanilla")).on_hand == 8
        assert await store.check() == []
