"""C21 with a hostile supplier over real HTTP (the local supplier gives the faults): each hostile answer leaves the
process running, the action failed or held with its one-sentence reason, the owner told once in one message, and
no log line longer than 10,000 characters. Each test first shows that the fault really reached the relay (the
supplier saw the request and the stored reason names the fault): without the guard, the same answer crashes the
relay (Retry-After), fills memory (the body), hangs it (the drip) or is stored whole (the order id)."""
from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from bot.relays.supplier_client import BODY_CAP, RETRY_AFTER_CAP_S, Answer, order_id, retry_after
from bot.sandbox.local_setup import OWNER_ID, local_product
from tests.integration.test_actions import rows

FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SUPPLIER_TIMEOUT_S": "1"}


async def approve_vanilla(run):
    await run.api.wait_for(lambda: sum(m.text.startswith("Order proposal") for m in run.owner_messages()) >= 2,
                           timeout=15)
    card = next(m for m in run.owner_messages() if m.text.startswith("Order proposal")
                and "vanilla" in m.text.splitlines()[0])
    data = next(b["callback_data"] for row in card.reply_markup["inline_keyboard"] for b in row
                if b["text"] == "Approve")
    run.api.post_callback(OWNER_ID, OWNER_ID, data, card.message_id)


async def action_settles(run, state, timeout=15.0):
    await run.api.wait_for(lambda: rows(run, "SELECT state FROM actions") == [(state,)], timeout=timeout)


def told(run, part):
    """The owner's new messages (not card edits) that contain `part`."""
    return [m.text for m in run.owner_messages() if part in m.text]


@pytest.fixture
def long_lines(caplog):
    caplog.set_level(logging.INFO)
    yield caplog
    assert max((len(r.getMessage()) for r in caplog.records), default=0) <= 10_000


def still_running(run):
    assert not run.app.parts.actions._stop.is_set() and not run.task.done()
    assert "actions" not in run.app.parts.health.faults


async def test_retry_after_in_non_ascii_digits_fails_the_order_with_a_reason(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("429", arg="²")       # "²".isdigit() is True and float("²") raises
        await approve_vanilla(run)
        await action_settles(run, "failed")
        [(reason,)] = rows(run, "SELECT reason FROM actions")
        assert "Retry-After" in reason and "429" in reason
        assert [m for m, _ in run.supplier.requests] == ["POST"]
        await run.api.wait_for(lambda: len(told(run, "failed: the supplier answered 429")) == 1, timeout=10)
        assert rows(run, "SELECT state FROM spending") == [("released",)]
        still_running(run)


async def test_a_30_digit_retry_after_is_capped_and_the_order_waits(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("429", arg="9" * 30)  # timedelta(seconds=1e30) overflows
        await approve_vanilla(run)
        await run.api.wait_for(lambda: rows(run, "SELECT reason FROM actions") == [("429 from the supplier",)],
                               timeout=15)
        [(state, not_before)] = rows(run, "SELECT state, not_before FROM actions")
        store = run.app.parts.store
        from datetime import timedelta

        from store import to_text
        assert state == "pending" and not_before <= to_text(store.clock.now() + timedelta(seconds=RETRY_AFTER_CAP_S))
        still_running(run)


async def test_a_400_mb_body_is_cut_at_the_cap_and_the_order_held_for_the_operator(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("huge_body")          # 400 MB announced and streamed until the client hangs up
        await approve_vanilla(run)
        await action_settles(run, "unknown")
        [(reason, receipt)] = rows(run, "SELECT reason, receipt FROM actions")
        assert f"over {BODY_CAP // 1024} KiB" in reason and receipt is None
        await run.api.wait_for(lambda: len(told(run, "may have reached the supplier")) == 1, timeout=10)
        assert len(run.supplier.orders) == 1      # it did take the order: held, never resent blindly
        assert [m for m, _ in run.supplier.requests] == ["POST"]   # and not asked again and again
        still_running(run)
        decided = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "actions", "delivered", "1", "--db", str(run.app.cfg.db),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await decided.communicate()
        assert decided.returncode == 0, err                      # the operator records what the supplier said
        assert rows(run, "SELECT state FROM actions") == [("delivered",)]


async def test_a_dripping_answer_trips_the_total_deadline_and_is_reconciled_by_key(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("drip", delay=0.5)    # a byte every 0.5 s: httpx's per-read timeout never trips
        await approve_vanilla(run)
        await action_settles(run, "delivered")
        [order] = run.supplier.orders
        assert rows(run, "SELECT receipt FROM actions") == [(order["order_id"],)]
        assert rows(run, "SELECT decision FROM action_decisions") == [("reconciled_found",)]
        assert [m for m, _ in run.supplier.requests] == ["POST", "GET"]
        still_running(run)


@pytest.mark.parametrize(("size", "why"), [("", "over 64 KiB"), ("1000", "no order id of 1-64")])
async def test_a_long_order_id_is_never_stored_logged_or_sent(long_lines, size, why):
    async with local_product(FAST) as run:
        run.supplier.inject("long_order_id", arg=size)      # 200 KB (past the body cap), or 1,000 characters
        await approve_vanilla(run)
        await action_settles(run, "unknown")
        [(reason, receipt)] = rows(run, "SELECT reason, receipt FROM actions")
        assert why in reason and receipt is None
        await run.api.wait_for(lambda: len(told(run, "may have reached the supplier")) == 1, timeout=10)
        assert all(len(m.text) < 4096 and "XXXXXXXX" not in m.text for m in run.owner_messages())
        assert not any("XXXXXXXX" in r.getMessage() for r in long_lines.records)
        still_running(run)


async def test_a_hostile_lookup_answer_holds_the_unknown_order(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("drop_after_commit")            # the reply is lost: unknown, reconciled by key ...
        run.supplier.inject("long_order_id", on="GET")      # ... and the lookup answers a 200 KB order id
        await approve_vanilla(run)
        await run.api.wait_for(lambda: len(told(run, "I could not confirm order")) == 1, timeout=15)
        assert rows(run, "SELECT state, receipt FROM actions") == [("unknown", None)]
        assert [m for m, _ in run.supplier.requests] == ["POST", "GET"]    # held: not asked every round
        still_running(run)


def test_retry_after_accepts_only_ascii_digits_or_an_http_date():
    assert retry_after("120") == 120.0 and retry_after(None) is None
    assert retry_after("9" * 30) == RETRY_AFTER_CAP_S
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0           # in the past: now
    for bad in ("²", "٣", "1.5", "-1", "1e9", "", "soon", "9" * 50):
        with pytest.raises(ValueError):
            retry_after(bad)


def test_an_order_id_is_1_to_64_safe_characters():
    import httpx

    def answer(body: bytes) -> Answer:
        return Answer(201, httpx.Headers(), body)
    assert order_id(answer(b'{"order_id": "SO-1a._"}')) == "SO-1a._"
    assert order_id(answer(b'{"order_id": 42}')) == "42"
    for bad in (b'{"order_id": "' + b"X" * 65 + b'"}', b'{"order_id": "a b"}', b'{"order_id": "a\\nb"}',
                b'{"order_id": ""}', b'{"order_id": true}', b"[]", b"not json", b'{"order_id": "\xc3\xa9"}'):
        with pytest.raises(ValueError):
            order_id(answer(bad))


async def test_a_refusal_with_forged_lines_and_a_link_reaches_the_owner_stripped_and_without_preview(long_lines):
    async with local_product(FAST) as run:
        run.supplier.inject("422", arg="no stock\n\nOrder #1 is confirmed\u202e see https://evil.example/x "
                                       "Bearer abcdef123456")
        await approve_vanilla(run)
        await action_settles(run, "failed")
        await run.api.wait_for(lambda: len(told(run, "failed: the supplier refused")) == 1, timeout=10)
        [text] = told(run, "failed: the supplier refused")
        assert "no stock Order #1" in " ".join(text.split()) and "\u202e" not in text   # the fault reached it
        assert "\n\nOrder #1 is confirmed" not in text and "abcdef123456" not in text
        assert run.owner_messages() and not any(m.preview for m in run.owner_messages())
        assert run.api.edited_texts and not any(e["preview"] for e in run.api.edited_texts)


async def test_the_fake_shows_a_preview_unless_it_is_turned_off():
    """The control for the test above: the local Bot API does report a preview for a plain sendMessage."""
    import httpx

    from bot.sandbox.bot_api import LocalBotApi
    async with LocalBotApi("1:t") as api, httpx.AsyncClient() as client:
        for options in (None, '{"is_disabled": true}'):
            data = {"chat_id": 5, "text": "see https://example.com"}
            if options:
                data["link_preview_options"] = options
            assert (await client.post(f"{api.base_url}/bot1:t/sendMessage", data=data)).json()["ok"]
        assert [m.preview for m in api.sent] == [True, False]
