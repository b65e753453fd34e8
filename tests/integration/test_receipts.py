"""C19 receipts end to end: the real PTB client against the local Bot API over HTTP, the real store and relay.

A receipt (the owner's message gets the reaction) for each admitted owner message, set by the receipt relay and
never by the ingress; none for strangers, groups, bots, refusals for capacity or a redelivered update; an unknown
outcome (the reply to setMessageReaction lost) is set again, never duplicated into a message."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from telegram import Bot
from telegram.error import BadRequest

from bot import config as config_module
from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.local_setup import DEMO_TOKEN, OWNER_ID, local_product
from tests.integration.test_actions import rows
from tests.support import DATA

FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml")}


async def test_each_admitted_owner_message_gets_one_receipt_before_its_reply_and_strangers_none():
    async with local_product(FAST) as run:
        stranger = run.api.post_message(666, 666, "free ice cream")["message"]["message_id"]
        group = run.api.post_message(-100123, OWNER_ID, "stock", chat_type="group")["message"]["message_id"]
        bot = run.api.post_message(4242, 4242, "beep", is_bot=True)["message"]["message_id"]
        update = run.api.post_message(OWNER_ID, OWNER_ID, "how much strawberry")
        mine = update["message"]["message_id"]
        [reply] = await run.replies(1)
        await run.api.wait_for(lambda: run.api.reaction(OWNER_ID, mine) == "👀")
        kinds = [kind for kind, _ in run.api.timeline if kind in ("reaction", "sent")]
        assert kinds[:2] == ["reaction", "sent"]          # committed first, so on the phone first
        assert run.api.reaction(666, stranger) is None and run.api.reaction(-100123, group) is None
        assert run.api.reaction(4242, bot) is None
        assert rows(run, "SELECT chat_id, message_id, emoji, state FROM receipts") == [(OWNER_ID, mine, "👀", "set")]
        # a redelivered update (a lost acknowledgement) is a duplicate: no second receipt, no second call
        run.api.redeliver(update["update_id"])
        await run.admitted(update["update_id"])
        second = run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        await run.api.wait_for(lambda: run.api.reaction(OWNER_ID, second["message"]["message_id"]) == "👀")
        assert [c["message_id"] for c in run.api.reaction_calls] == [mine, second["message"]["message_id"]]
        assert len(rows(run, "SELECT * FROM receipts")) == 2


async def test_a_lost_reaction_reply_is_set_again_and_never_becomes_a_message():
    async with local_product(FAST) as run:
        run.api.inject("setMessageReaction", "drop_after_accept")
        message_id = run.api.post_message(OWNER_ID, OWNER_ID, "stock")["message"]["message_id"]
        await run.replies(1)
        await run.api.wait_for(lambda: rows(run, "SELECT state, attempts FROM receipts") == [("set", 2)], timeout=15)
        assert [c["message_id"] for c in run.api.reaction_calls] == [message_id, message_id]   # retried, same one
        assert run.api.reaction(OWNER_ID, message_id) == "👀"
        assert len(run.owner_messages()) == 1              # the reply once; nothing about the receipt
        assert rows(run, "SELECT count(*) FROM deliveries WHERE state = 'unknown'") == [(0,)]


async def test_a_refused_reaction_fails_once_and_the_reply_still_comes():
    async with local_product(FAST) as run:
        run.api.inject("setMessageReaction", "400", description="Bad Request: REACTION_INVALID")
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        await run.api.wait_for(lambda: rows(run, "SELECT state FROM receipts") == [("failed",)])
        assert "reaction_invalid" in rows(run, "SELECT reason FROM receipts")[0][0].lower()


async def test_no_receipt_for_a_message_refused_for_capacity_nor_with_receipts_off():
    async with local_product({**FAST, "SHOPBOT_CAPACITY": "1", "SHOPBOT_DEBOUNCE_MS": "5000"}) as run:
        first = run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        refused = run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")
        await run.admitted(refused["update_id"])
        [busy] = await run.replies(1)
        assert "busy" in busy.text
        await run.api.wait_for(lambda: run.api.reaction(OWNER_ID, first["message"]["message_id"]) == "👀")
        assert run.api.reaction(OWNER_ID, refused["message"]["message_id"]) is None
        assert [r[0] for r in rows(run, "SELECT message_id FROM receipts")] == [first["message"]["message_id"]]
    async with local_product({**FAST, "SHOPBOT_RECEIPT_REACTION": ""}) as run:
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        assert rows(run, "SELECT count(*) FROM receipts") == [(0,)] and run.api.reaction_calls == []


def test_the_reaction_list_is_the_installed_python_telegram_bots():
    """bot/config.py writes the list out (the operator commands do not import python-telegram-bot): an upgrade of the
    library that changes Telegram's list fails here."""
    from telegram.constants import ReactionEmoji
    assert config_module.REACTIONS == tuple(e.value for e in ReactionEmoji)


def test_an_operator_command_does_not_import_python_telegram_bot(tmp_path):
    """`shopbot status` loads the settings but sends nothing to Telegram: importing the library would be a third of
    its time. A control: `shopbot run` does import it (the same check sees an import)."""
    probe = ("import sys, runpy; sys.argv = ['shopbot', '{cmd}', '--db', {db!r}]\n"
             "try:\n    runpy.run_module('bot.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print('telegram imported:', 'telegram' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    db = str(tmp_path / "shop.sqlite3")
    status = subprocess.run([sys.executable, "-c", probe.format(cmd="status", db=db)], capture_output=True,
                            text=True, env={**env, "SHOPBOT_OWNER_IDS": "1"}, timeout=60)
    assert "telegram imported: False" in status.stdout, status.stdout + status.stderr
    not_a_database = tmp_path / "notes.txt"       # `run` imports the app, then refuses the file at once
    not_a_database.write_text("not a database\n")
    run = subprocess.run([sys.executable, "-c", probe.format(cmd="run", db=str(not_a_database))],
                         capture_output=True, text=True, env={**env, "SHOPBOT_OWNER_IDS": "1",
                                                              "SHOPBOT_HTTP_PORT": "-1"}, timeout=60)
    assert "telegram imported: True" in run.stdout, run.stdout + run.stderr


def test_the_setting_takes_only_telegrams_reaction_emoji():
    base = {"SHOPBOT_DB": "x.sqlite3"}
    assert config_module.load(base).receipt_reaction == "👀"
    assert config_module.load({**base, "SHOPBOT_RECEIPT_REACTION": "🔥"}).receipt_reaction == "🔥"
    assert config_module.load({**base, "SHOPBOT_RECEIPT_REACTION": ""}).receipt_reaction == ""
    for bad in ("✅", "ok", "👀👀"):                      # negative control: not in Telegram's list
        with pytest.raises(config_module.ConfigError, match="SHOPBOT_RECEIPT_REACTION"):
            config_module.load({**base, "SHOPBOT_RECEIPT_REACTION": bad})


async def test_the_local_bot_api_checks_reactions_and_drafts_as_telegram_does():
    """The fake's own guards, each with the call that passes beside the one it refuses."""
    async with LocalBotApi(DEMO_TOKEN) as api:
        bot = Bot(DEMO_TOKEN, base_url=f"{api.base_url}/bot")
        async with bot:
            message_id = api.post_message(OWNER_ID, OWNER_ID, "hi")["message"]["message_id"]
            assert await bot.set_message_reaction(OWNER_ID, message_id, "👀")
            assert await bot.set_message_reaction(OWNER_ID, message_id, "🔥")        # replaces the bot's one
            assert api.reaction(OWNER_ID, message_id) == "🔥"
            for reaction, refusal in ((["👀", "🔥"], "REACTIONS_TOO_MANY"), ("✅", "REACTION_INVALID")):
                with pytest.raises(BadRequest, match=f"(?i){refusal}"):
                    await bot.set_message_reaction(OWNER_ID, message_id, reaction)
            with pytest.raises(BadRequest, match="(?i)message_id_invalid"):
                await bot.set_message_reaction(OWNER_ID, message_id + 50, "👀")
            assert await bot.send_message_draft(OWNER_ID, 7, "Checking stock…")
            api.post_message(-100123, OWNER_ID, "hi", chat_type="group")
            with pytest.raises(BadRequest, match="(?i)textdraft_peer_invalid"):
                await bot.send_message_draft(-100123, 7, "Checking stock…")
            with pytest.raises(BadRequest, match="non-zero"):
                await bot.send_message_draft(OWNER_ID, 0, "Checking stock…")
            with pytest.raises(BadRequest, match="too long"):
                await bot.send_message_draft(OWNER_ID, 7, "x" * 4097)
            assert [d["text"] for d in api.drafts] == ["Checking stock…"]


async def test_the_relay_sets_a_handed_over_receipt_with_no_store_call_and_stores_the_set_with_the_next_commit(
        store, monkeypatch):
    """Issue 31: a receipt this process just admitted is set with no read (handed over) and no commit of its own
    (held): the relay makes no store call between the admission and the reaction, and the set is stored by the
    next commit that writes anyway. Negative control: with nothing handed over (another process admitted it, or
    the relay's once-a-second look is due) the relay reads."""
    from bot.relays.receipts import ReceiptRelay
    from bot.relays.sender import OutcomeKind, SendOutcome
    from store import Occurrence, WorkKind
    from store.shared import store as store_module

    monkeypatch.setattr(store_module, "FLUSH_S", 60.0)   # no timed flush within the test: each store is shown
    calls: list[str] = []
    for method in ("read", "write"):
        original = getattr(store.db, method)

        def counted(fn, *args, _original=original, _method=method):  # type: ignore[no-untyped-def]
            calls.append(_method)
            return _original(fn, *args)
        setattr(store.db, method, counted)

    class Telegram:
        reacted: list[int] = []

        async def react(self, chat_id: int, message_id: int, emoji: str) -> SendOutcome:
            self.reacted.append(message_id)
            return SendOutcome(OutcomeKind.CONFIRMED)

    def admit(message_id: int):  # type: ignore[no-untyped-def]
        def body(tx):  # type: ignore[no-untyped-def]
            tx.admit(Occurrence(f"tg:1:{message_id}", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
            tx.add_receipt(1, message_id, "👀")
        return body
    telegram = Telegram()
    relay = ReceiptRelay(store, telegram, lambda chat_id: True)
    await relay.set_due()                        # the first look reads: nothing yet
    await store.atomic(admit(7))
    calls.clear()
    assert await relay.set_due() == 1 and telegram.reacted == [7]
    assert calls == []                           # no read, no write
    assert [r.state for r in await store.receipts(1)] == ["pending"]   # held: what a crash leaves (set again)
    await store.atomic(admit(8))                 # the next commit that writes anyway stores the set
    assert [(r.message_id, r.state) for r in await store.receipts(1)] == [(8, "pending"), (7, "set")]
    store.fresh_receipts()                       # negative control: nothing handed over, so the relay reads
    calls.clear()
    assert await relay.set_due() == 1 and telegram.reacted == [7, 8]
    assert calls == ["read"]
