"""The Telegram edge with the real PTB client against the local Bot API server over HTTP (C2, C3, C7, C8)."""
from __future__ import annotations

import sqlite3

import httpx
import pytest

from bot.sandbox.local_setup import OWNER_ID, local_product
from tests.support import DATA

# the calm shop has nothing below its reorder point, so the stock watcher adds no messages of its own
FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0",
        "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml")}


def rows(run, sql, *args):
    conn = sqlite3.connect(str(run.app.cfg.db))
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


async def delivery_state(run, report_id: str, wanted: str, timeout: float = 10.0) -> None:
    await run.api.wait_for(lambda: rows(run, "SELECT state FROM deliveries WHERE report_id = ?", report_id)
                           == [(wanted,)], timeout=timeout)


async def test_a_reply_reaches_the_owner_with_its_identity():
    async with local_product(FAST) as run:
        run.api.post_message(OWNER_ID, OWNER_ID, "how much strawberry")
        [reply] = await run.replies(1)
        assert "strawberry on hand: 6 tubs" in reply.text and reply.text.endswith("r1.1")
        await delivery_state(run, "r1.1", "confirmed")
        assert rows(run, "SELECT receipt FROM deliveries") == [(str(reply.message_id),)]
        assert any(a["chat_id"] == OWNER_ID and a["action"] == "typing" for a in run.api.chat_actions)
        assert {c["command"] for c in run.api.commands} >= {"start", "help", "status", "pending", "brief"}


async def test_lost_reply_is_unknown_announced_once_and_resent_only_on_decision():
    async with local_product(FAST) as run:
        run.api.inject("sendMessage", "drop_after_accept")
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        first, notice = await run.replies(2)
        assert first.text.endswith("r1.1") and "r1.1" in notice.text
        await delivery_state(run, "r1.1", "unknown")
        resend = notice.reply_markup["inline_keyboard"][0][0]
        assert resend["text"] == "Resend" and resend["callback_data"].startswith("resend:")
        assert len(resend["callback_data"].split(":")[1]) >= 24     # >= 96 random bits
        run.api.post_callback(OWNER_ID, OWNER_ID, resend["callback_data"], notice.message_id)
        [again] = await run.replies(1)                       # the resend; the notice is edited in place
        assert again.text == first.text
        await run.api.wait_for(lambda: "OK, I will send r1.1" in run.now(notice)["text"], timeout=10)
        assert run.now(notice)["markup"] is None and "— owner 1001, " in run.now(notice)["text"]
        await delivery_state(run, "r1.1", "confirmed")
        assert [m.text for m in run.api.sent].count(first.text) == 2    # sent once more, after the decision only
        assert run.api.callback_answers                                 # answered, the card's buttons gone
        # pressing again changes nothing and says so
        run.api.post_callback(OWNER_ID, OWNER_ID, resend["callback_data"], notice.message_id)
        [stale] = await run.replies(1)
        assert "no longer valid" in stale.text
        assert rows(run, "SELECT decision, decided_by FROM resolutions") == [("resend", f"owner:{OWNER_ID}")]


@pytest.mark.parametrize("fault,state,reason", [("403", "failed", "blocked"), ("400", "failed", "not found")])
async def test_definite_refusals_fail(fault, state, reason):
    async with local_product(FAST) as run:
        run.api.inject("sendMessage", fault)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await delivery_state(run, "r1.1", state)
        assert reason in rows(run, "SELECT reason FROM deliveries")[0][0].lower()
        assert run.api.sent == []


async def test_429_waits_retry_after_then_confirms():
    async with local_product(FAST) as run:
        run.api.inject("sendMessage", "429", retry_after=1)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        await delivery_state(run, "r1.1", "confirmed")
        [(attempts,)] = rows(run, "SELECT attempts FROM deliveries")
        assert attempts == 2


async def test_refused_connection_goes_back_to_pending_then_confirms():
    async with local_product({**FAST, "SHOPBOT_DEBOUNCE_MS": "1000"}) as run:
        update = run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.admitted(update["update_id"])           # admitted; the turn waits out the debounce window
        await run.api.refuse()
        await run.api.wait_for(lambda: rows(run, "SELECT state, attempts > 0 FROM deliveries") == [("pending", 1)],
                               timeout=15)
        [(reason,)] = rows(run, "SELECT reason FROM deliveries")
        assert "connect" in reason.lower()
        await run.api.accept()
        await delivery_state(run, "r1.1", "confirmed", timeout=20)


async def test_strangers_groups_bots_and_malformed_updates_create_no_work():
    async with local_product(FAST) as run:
        last = [run.api.post_message(666, 666, "free ice cream"),
                run.api.post_message(-100123, OWNER_ID, "stock", chat_type="group"),
                run.api.post_message(4242, 4242, "beep", is_bot=True),
                run.api.post_raw_update({"message": {"text": "no date, no chat"}}),
                run.api.post_raw_update({"unknown_kind": {"x": 1}})][-1]
        await run.admitted(last["update_id"])
        assert rows(run, "SELECT count(*) FROM work") == [(0,)]
        await run.app.parts.store.flush_counts()        # counted in memory first, flushed within a second (C1)
        counted = dict(rows(run, "SELECT kind, sum(count) FROM counters GROUP BY kind"))
        assert counted["stranger"] == 1 and counted["not_private"] == 1 and counted["bot"] == 1
        assert counted["malformed"] + counted.get("unsupported_update", 0) == 2
        # a malformed update never stops ingestion
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)


async def test_edits_non_text_and_commands_get_deliberate_replies():
    async with local_product(FAST) as run:
        update = run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")
        await run.replies(1)
        run.api.post_edit(OWNER_ID, OWNER_ID, update["message"]["message_id"], "how much chocolate")
        [edited] = await run.replies(1)
        assert "not re-run" in edited.text
        run.api.post_raw_update({"message": {"message_id": 77, "date": 1, "chat": {"id": OWNER_ID, "type": "private"},
                                             "from": {"id": OWNER_ID, "is_bot": False, "first_name": "L"},
                                             "sticker": {"file_id": "x", "file_unique_id": "y", "type": "regular",
                                                         "width": 1, "height": 1, "is_animated": False,
                                                         "is_video": False}}})
        [sticker] = await run.replies(1)
        assert "only read text" in sticker.text
        run.api.post_message(OWNER_ID, OWNER_ID, "/status")
        [status] = await run.replies(1)
        assert "Requests:" in status.text
        # control items never enter agent history; the answer is the model's own prose, without the Figures block
        [(role, text), (answer_role, answer)] = await run.app.parts.store.history(f"tg:{OWNER_ID}")
        assert (role, text, answer_role) == ("user", "how much vanilla", "assistant")
        report = rows(run, "SELECT body FROM reports WHERE report_id='r1.1'")[0][0]
        assert report.startswith(answer) and "Figures" in report and "Figures" not in answer


async def test_forget_asks_first_and_needs_the_button():
    async with local_product(FAST) as run:
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        run.api.post_message(OWNER_ID, OWNER_ID, "/forget")
        [ask] = await run.replies(1)
        forget = ask.reply_markup["inline_keyboard"][0][0]["callback_data"]
        # a press from another chat (even an owner's) does not count
        run.api.post_callback(OWNER_ID, OWNER_ID, forget.replace(forget.split(":")[1], "0" * 32), ask.message_id)
        [invalid] = await run.replies(1)
        assert "no longer valid" in invalid.text
        run.api.post_callback(OWNER_ID, OWNER_ID, forget, ask.message_id)
        await run.api.wait_for(lambda: "Forgotten" in run.now(ask)["text"], timeout=10)    # the question, edited
        assert run.now(ask)["text"].startswith("Forget this conversation?") and run.now(ask)["markup"] is None
        assert await run.app.parts.store.history(f"tg:{OWNER_ID}") == []


async def test_capacity_refusal_tells_the_owner_once_per_minute():
    async with local_product({**FAST, "SHOPBOT_CAPACITY": "1", "SHOPBOT_DEBOUNCE_MS": "60000"}) as run:
        for text in ("one", "two", "three"):
            last = run.api.post_message(OWNER_ID, OWNER_ID, text)
        await run.admitted(last["update_id"])
        [busy] = await run.replies(1)
        assert "busy" in busy.text
        assert rows(run, "SELECT count(*) FROM work WHERE kind = 'agent'") == [(1,)]
        assert dict(rows(run, "SELECT kind, sum(count) FROM counters GROUP BY kind"))["refused_capacity"] == 2
        # /status is a control command: never refused on a full queue
        run.api.post_message(OWNER_ID, OWNER_ID, "/status")
        [status] = await run.replies(1)
        assert "1 waiting" in status.text


async def test_webhook_secret_and_commit_failure():
    secret = "s3cret_token-1"
    async with local_product({**FAST, "SHOPBOT_WEBHOOK_URL": "https://bot.example/telegram/webhook",
                              "SHOPBOT_WEBHOOK_SECRET": secret}) as run:
        await run.app.parts.http.started.wait()
        url = f"http://127.0.0.1:{run.app.parts.http.port}/telegram/webhook"
        update = {"update_id": 1, "message": {"message_id": 5, "date": 1, "text": "stock",
                                              "chat": {"id": OWNER_ID, "type": "private"},
                                              "from": {"id": OWNER_ID, "is_bot": False, "first_name": "L"}}}
        async with httpx.AsyncClient() as client:
            wrong = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"})
            missing = await client.post(url, json=update)
            assert wrong.status_code == 401 and missing.status_code == 401
            assert rows(run, "SELECT count(*) FROM work") == [(0,)]
            garbage = await client.post(url, content=b"\xff\xfe not json",
                                        headers={"X-Telegram-Bot-Api-Secret-Token": secret})
            assert garbage.status_code == 200 and rows(run, "SELECT count(*) FROM work") == [(0,)]
            # a commit that fails answers 5xx, so Telegram retries; nothing was stored
            store = run.app.parts.store
            # the file compacted first: an index a migration dropped (0023's work_pending) left free pages that the
            # insert would take without growing the file
            await store.db.raw(lambda c: c.execute("VACUUM"))
            pages = await store.db.raw(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
            await store.db.raw(lambda c: c.execute(f"PRAGMA max_page_count = {pages}"))
            big = {**update, "message": {**update["message"], "text": "x" * 4000}}
            failed = await client.post(url, json=big, headers={"X-Telegram-Bot-Api-Secret-Token": secret})
            assert failed.status_code == 500
            await store.db.raw(lambda c: c.execute("PRAGMA max_page_count = 1073741823"))
            ok = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})
            assert ok.status_code == 200
            again = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})
            assert again.status_code == 200
        await run.replies(1)
        assert rows(run, "SELECT source FROM work WHERE kind = 'agent'") == [(f"tg:{OWNER_ID}:5",)]
        assert run.api.webhook["url"] == "https://bot.example/telegram/webhook"


async def test_revoked_owner_gets_nothing():
    import dataclasses
    async with local_product({**FAST, "SHOPBOT_OWNER_IDS": f"{OWNER_ID},2002", "SHOPBOT_DEBOUNCE_MS": "300"}) as run:
        update = run.api.post_message(2002, 2002, "stock")
        await run.admitted(update["update_id"])
        run.app.cfg = dataclasses.replace(run.app.cfg, owner_ids=(OWNER_ID,))   # revoked before the reply is sent
        await delivery_state(run, "r1.1", "denied")
        assert [m for m in run.api.sent if m.chat_id == 2002] == []


async def test_pending_lists_unsure_replies_with_buttons():
    async with local_product(FAST) as run:
        run.api.inject("sendMessage", "drop_after_accept")
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(2)                                     # the reply and the notice
        run.api.post_message(OWNER_ID, OWNER_ID, "/pending")
        [pending] = await run.replies(1)
        assert "r1.1" in pending.text and "may not have arrived" in pending.text
        labels = [b["text"] for row in pending.reply_markup["inline_keyboard"] for b in row]
        assert labels[-2:] == ["Resend r1.1", "I have it r1.1"]     # after the proposals awaiting approval


async def test_one_409_while_holding_the_poller_lease_is_a_stale_ex_leader_and_waited_out(caplog):
    async with local_product({**FAST, "SHOPBOT_LEASE_S": "3"}) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        run.api.inject("getUpdates", "409", count=1)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")        # the next poll gets the 409, the one after works
        await run.replies(1, timeout=15)
        assert run.app.parts.health.faults == {}
        assert any("stale ex-leader" in r.getMessage() for r in caplog.records)


async def test_a_second_poller_is_reported_loudly_and_never_fought(caplog):
    # 409s that persist past two leases while this process holds the poller lease: another program polls
    async with local_product({**FAST, "SHOPBOT_LEASE_S": "1"}) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        run.api.inject("getUpdates", "409", count=1000)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")        # wakes the long poll, which gets the 409
        await run.api.wait_for(lambda: "ingress" in run.app.parts.health.faults, timeout=10)
        run.api._faults.clear()
        calls = run.api.calls.get("getUpdates", 0)
        assert ("409" in run.app.parts.health.faults["ingress"]
                or "another program" in run.app.parts.health.faults["ingress"])
        assert any(r.levelname == "CRITICAL" and "ingress stopped" in r.getMessage() for r in caplog.records)
        await run.api.wait_for(lambda: any("I had to stop" in m.text for m in run.owner_messages()), timeout=10)
        assert run.api.calls.get("getUpdates", 0) == calls          # it does not poll again: never fights
        import httpx
        await run.app.parts.http.started.wait()
        async with httpx.AsyncClient() as client:
            health = await client.get(f"http://127.0.0.1:{run.app.parts.http.port}/healthz")
        assert health.status_code == 503


async def test_a_token_revoked_while_running_stops_ingestion_with_its_reason_and_the_process_lives(caplog):
    # Before: do_api_request named the 401 "endpoint not found", which no handler knew: the process ended (C21)
    async with local_product(FAST) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        run.api.revoke_token("999:the-token-after-revoke-000000000000000000")
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")        # wakes the long poll; the next getUpdates gets 401
        await run.api.wait_for(lambda: "ingress" in run.app.parts.health.faults, timeout=10)
        assert "Telegram refused the bot token" in run.app.parts.health.faults["ingress"]
        assert not run.task.done()                                # the rest of the process runs on
        assert any(r.levelname == "CRITICAL" and "ingress stopped" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("fault", ["403", "400", "non_json_200", "huge_200", "500"])
async def test_any_other_answer_to_get_updates_is_retried_and_stops_nothing(fault):
    # 403 and 400 are TelegramErrors that are not NetworkErrors: before, a 403 ended the process (C21)
    async with local_product(FAST) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        run.api.inject("getUpdates", fault, count=2)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1, timeout=20)
        assert run.app.parts.health.faults == {} and not run.task.done()


async def test_flood_control_on_get_updates_is_waited_out():
    async with local_product(FAST) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        run.api.inject("getUpdates", "429", retry_after=1)
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1, timeout=15)
        assert run.app.parts.health.faults == {}


@pytest.mark.parametrize("fault", ["refused", "403", "non_json_200"])
async def test_telegram_unreachable_at_start_is_waited_out(tmp_path, caplog, fault):
    import asyncio

    from bot import config as config_module
    from bot.app import App
    from bot.sandbox.bot_api import LocalBotApi
    async with LocalBotApi("888:start-token") as api:
        if fault == "refused":
            await api.refuse()
        else:                        # an answer that is not the bot: before, a 403 at start ended the start (C21)
            api.inject("getMe", fault, count=1000)
        env = {"SHOPBOT_DB": str(tmp_path / "s.sqlite3"), "TELEGRAM_BOT_TOKEN": "888:start-token",
               "TELEGRAM_API_BASE_URL": api.base_url, "SHOPBOT_OWNER_IDS": str(OWNER_ID), "SHOPBOT_HTTP_PORT": "-1",
               **FAST}
        app = App(config_module.load(env))
        start = asyncio.create_task(app.__aenter__())
        await api.wait_for(lambda: any("not reachable at start" in r.getMessage() for r in caplog.records), 10)
        assert not start.done()                                   # waiting for Telegram, not crashed
        await api.accept()
        api._faults.clear()
        await asyncio.wait_for(start, 15)
        run = asyncio.create_task(app.run())
        api.post_message(OWNER_ID, OWNER_ID, "stock")
        await api.wait_for(lambda: len(api.sent) == 1, timeout=15)
        app.stop()
        await run
        await app.__aexit__(None, None, None)


def test_a_refused_token_stops_the_start_with_a_clear_message(tmp_path):
    import asyncio as _asyncio
    import os
    import subprocess
    import sys
    import threading

    from bot.sandbox.bot_api import LocalBotApi
    loop = _asyncio.new_event_loop()
    api = LocalBotApi("999:the-right-token")
    loop.run_until_complete(api.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({"SHOPBOT_DB": str(tmp_path / "s.sqlite3"), "TELEGRAM_BOT_TOKEN": "999:a-wrong-token",
                    "TELEGRAM_API_BASE_URL": api.base_url, "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_OWNER_IDS": "1001",
                    **FAST})
        done = subprocess.run([sys.executable, "-m", "bot.cli", "run"], env=env, capture_output=True, text=True,
                              timeout=30, cwd=tmp_path)
        assert done.returncode == 2 and "Telegram refused the bot token" in done.stderr
        assert "a-wrong-token" not in done.stderr and "Traceback" not in done.stderr
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


async def test_global_pacing_limits_sends_per_second_over_all_chats():
    import time
    owners = [3000 + i for i in range(6)]
    async with local_product({**FAST, "SHOPBOT_OWNER_IDS": ",".join(map(str, owners)),
                              "SHOPBOT_GLOBAL_PACE_PER_S": "3", "SHOPBOT_GLOBAL_BURST": "1"}) as run:
        start = time.monotonic()
        for chat in owners:
            run.api.post_message(chat, chat, "help")
        await run.api.wait_for(lambda: len(run.api.sent) == 6, timeout=15)
        # six replies at three a second after a burst of one need at least 5/3 s (the decisions themselves are
        # tested with an injected clock in tests/integration/test_pacing.py)
        assert time.monotonic() - start >= 1.0


def test_sigterm_while_waiting_for_telegram_at_start_exits_cleanly(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_DB": str(tmp_path / "s.sqlite3"), "TELEGRAM_BOT_TOKEN": "1:x",
                "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9", "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_OWNER_IDS": "1001",
                **FAST})
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "run"], env=env, cwd=tmp_path, text=True,
                            stderr=subprocess.PIPE)
    lines = []
    for line in proc.stderr:                       # wait until it is waiting for Telegram
        lines.append(line)
        if "not reachable at start" in line:
            break
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=15)
    assert proc.returncode == 0, "".join(lines) + rest
    assert "Traceback" not in rest


async def test_the_keyboard_of_common_asks_answers_each_in_one_tap():
    async with local_product({"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0"}) as run:   # the example shop
        run.api.post_message(OWNER_ID, OWNER_ID, "/start")
        [hello] = await run.replies(1)
        labels = [b["text"] for row in hello.reply_markup["keyboard"] for b in row]
        assert labels == ["Stock", "Low", "Brief", "Reorder", "Pending"] and hello.reply_markup["is_persistent"]
        await run.api.wait_for(lambda: sum(t.startswith("Order proposal") for t in run.owner_texts()) == 2,
                               timeout=15)                              # the stock watcher's two cards
        for label in labels:
            run.api.post_message(OWNER_ID, OWNER_ID, label)
        expected = ("Stock: chocolate 12 tubs",                          # Stock
                    "Low: strawberry 1 tub (reorder point 5; proposal",  # Low
                    "Opening brief:",                                    # Brief: the /brief command
                    "Nothing to reorder",                                # Reorder: both already proposed
                    "Proposals awaiting your decision")                  # Pending: the /pending command
        await run.api.wait_for(lambda: all(any(e in t for t in run.owner_texts()) for e in expected), timeout=15)
        sources = rows(run, "SELECT kind, payload FROM work WHERE source LIKE 'tg:%' ORDER BY work_id")
        assert ("control", "Pending") in sources and ("agent", "Prepare the opening brief") in sources
