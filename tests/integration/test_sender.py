"""Every row of the delivery classification, produced by the real PTB client against the local fake."""
from __future__ import annotations

import asyncio
import warnings
from types import SimpleNamespace

import aiohttp
import pytest
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from bot.relays.sender import OutcomeKind, SendOutcome, TelegramSender, classify
from bot.sandbox.bot_api import LocalBotApi
from producers.telegram.client import make_bot
from producers.telegram.transport import AnswerTooLarge
from store import Ask

TOKEN = "123456:TEST-token-for-sender-tests-0123456789"
CHAT = 4242


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


@pytest.fixture
async def sender(api):
    bot = make_bot(TOKEN, api.base_url, read_timeout=0.5, connect_timeout=1.0)
    async with bot:
        yield TelegramSender(bot)


def _no_token(outcome: SendOutcome) -> SendOutcome:
    assert TOKEN not in outcome.reason and TOKEN.split(":")[1] not in outcome.reason
    return outcome


async def test_confirmed_send_has_the_message_id_as_receipt(api, sender):
    outcome = await sender.send(CHAT, "r12.1 (1/1)", [Ask("unknown", "abc", "r12.1", ("resend", "delivered"))])
    (message,) = api.sent
    assert outcome == SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message.message_id))
    assert (message.chat_id, message.text) == (CHAT, "r12.1 (1/1)")
    assert message.reply_markup == {
        "inline_keyboard": [
            [{"text": "Resend", "callback_data": "resend:abc"}, {"text": "I have it", "callback_data": "delivered:abc"}]
        ]
    }
    html = await sender.send(CHAT, "*not markdown* <b>but html</b>")     # HTML parse mode (C7)
    assert html.receipt == str(api.sent[-1].message_id)
    # without inline buttons a message carries the persistent keyboard of the common asks
    assert api.sent[-1].reply_markup == {"keyboard": [[{"text": "Stock"}, {"text": "Low"}, {"text": "Brief"}],
                                                      [{"text": "Reorder"}, {"text": "Pending"}]],
                                         "is_persistent": True, "resize_keyboard": True}
    assert api.sent[-1].text == "*not markdown* but html"
    assert api.sent[-1].entities == ({"type": "bold", "offset": 15, "length": 8},)


# fault, expected kind, whether the fake recorded the message
ROWS = [
    ("drop_after_accept", "unknown", True),  # lost reply: Telegram has it, we cannot know
    ("drop_before_accept", "unknown", False),  # indistinguishable for the client: still unknown
    ("500", "unknown", False),
    ("502_html", "unknown", False),
    ("non_json_200", "unknown", True),
    ("slow", "unknown", True),  # beyond the read timeout (0.5 s)
    ("400", "failed", False),
    ("403", "failed", False),
    ("429", "retry_later", False),
]


@pytest.mark.parametrize(("fault", "kind", "recorded"), ROWS, ids=[r[0] for r in ROWS])
async def test_classification_row(api, sender, fault, kind, recorded):
    api.inject("sendMessage", fault, retry_after=7, delay=2.0)
    outcome = _no_token(await sender.send(CHAT, "report text"))
    assert outcome.kind is OutcomeKind(kind), outcome
    assert outcome.receipt is None
    assert [m.text for m in api.sent] == (["report text"] if recorded else [])
    assert api.calls["sendMessage"] == 1  # exactly one request, never a retry
    if fault == "429":
        assert outcome.retry_after == 7.0
    if fault == "400":
        assert "chat not found" in outcome.reason.lower()
    if fault == "403":
        assert "blocked by the user" in outcome.reason
    # the next send goes through normally on the same bot
    assert (await sender.send(CHAT, "next")).kind is OutcomeKind.CONFIRMED


async def test_refused_port_is_not_sent(api, sender):
    assert (await sender.send(CHAT, "warm the pool")).kind is OutcomeKind.CONFIRMED
    await api.refuse()
    outcome = _no_token(await sender.send(CHAT, "while down"))
    assert outcome.kind is OutcomeKind.NOT_SENT, outcome
    await api.accept()
    assert (await sender.send(CHAT, "after")).kind is OutcomeKind.CONFIRMED
    assert [m.text for m in api.sent] == ["warm the pool", "after"]


async def test_unsupported_protocol_is_not_sent():
    bot = make_bot(TOKEN, "ftp://127.0.0.1:9")
    try:
        with pytest.raises(NetworkError):
            await bot.initialize()  # so that shutdown() below closes the pools
        outcome = await TelegramSender(bot).send(CHAT, "x")
    finally:
        await bot.shutdown()
    assert outcome.kind is OutcomeKind.NOT_SENT


async def test_wrong_token_is_a_config_fault(api):
    bot = make_bot("654321:WRONG-token-for-sender-tests-000000", api.base_url)
    try:
        with pytest.raises(InvalidToken):
            await bot.initialize()
        outcome = await TelegramSender(bot).send(CHAT, "x")
    finally:
        await bot.shutdown()
    assert outcome.kind is OutcomeKind.CONFIG_FAULT, outcome
    assert "WRONG-token" not in outcome.reason
    assert api.sent == []


async def test_cancellation_mid_request_propagates_and_classifies_unknown(api, sender):
    api.inject("sendMessage", "slow", delay=5.0)
    task = asyncio.create_task(sender.send(CHAT, "cut off"))
    await api.wait_for(lambda: len(api.sent) == 1)  # the fake has accepted it; the reply is pending
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        await task
    assert classify(info.value).kind is OutcomeKind.UNKNOWN


def _refused() -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="127.0.0.1", port=9, ssl=False)     # what the error's message reads of its key
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]


def _with_cause(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (_with_cause(NetworkError("aiohttp.ClientConnectorError: refused"), _refused()), "not_sent"),
        (_with_cause(TimedOut(), aiohttp.ConnectionTimeoutError("slow connect or pool full")), "not_sent"),
        (_with_cause(NetworkError("x"), aiohttp.NonHttpUrlClientError("ftp://127.0.0.1:9")), "not_sent"),
        (_with_cause(NetworkError("x"), aiohttp.InvalidURL("http://[::1")), "not_sent"),
        (_with_cause(TimedOut(), aiohttp.SocketTimeoutError("read")), "unknown"),
        (_with_cause(TimedOut(), TimeoutError()), "unknown"),                 # the call's total deadline
        (_with_cause(NetworkError("x"), aiohttp.ServerDisconnectedError()), "unknown"),
        (_with_cause(NetworkError("x"), aiohttp.ClientOSError(104, "reset")), "unknown"),
        (_with_cause(NetworkError("x"), AnswerTooLarge("over the bound")), "unknown"),
        (NetworkError("Internal Server Error"), "unknown"),
        (_with_cause(BadRequest("Chat not found"), _refused()), "failed"),  # order matters
        (Forbidden("Forbidden: bot was blocked by the user"), "failed"),
        (ChatMigrated(-100123), "failed"),
        (InvalidToken("Unauthorized"), "config_fault"),
        (Conflict("terminated by other getUpdates request"), "unknown"),
        (asyncio.CancelledError(), "unknown"),
        (RuntimeError("surprise"), "unknown"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v,
)
def test_classify_table(exc, kind):
    assert classify(exc).kind is OutcomeKind(kind)


def test_retry_after_is_read_without_the_deprecation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exc = RetryAfter(12)  # PTB's own constructor warns; that is not ours
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = classify(exc)
    assert outcome == SendOutcome(OutcomeKind.RETRY_LATER, retry_after=12.0, reason=outcome.reason)


def test_retry_after_with_ptb_timedelta_opt_in(monkeypatch):
    monkeypatch.setenv("PTB_TIMEDELTA", "1")
    exc = RetryAfter(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PTBDeprecationWarning)
        assert classify(exc).retry_after == 3.0


def test_reasons_never_carry_a_token():
    token = "987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
    outcome = classify(InvalidToken(f"The token `{token}` was rejected by the server."))
    assert outcome.kind is OutcomeKind.CONFIG_FAULT and token not in outcome.reason and "AAHdqTcv" not in outcome.reason
    outcome = classify(
        _with_cause(NetworkError("x"), aiohttp.ClientOSError(f"failed on https://user:pw@api.example/bot{token}/x"))
    )
    assert "user:pw" not in outcome.reason and token not in outcome.reason


async def test_best_effort_calls(api, sender):
    await sender.typing(CHAT)
    assert api.chat_actions == [{"chat_id": CHAT, "action": "typing"}]

    sent = await sender.send(CHAT, "choose", [Ask("proposal", "n", "1", ("approve",))])
    update = api.post_callback(CHAT, CHAT, "approve:n", int(sent.receipt))
    await sender.answer_callback(update["callback_query"]["id"], "é" * 300)
    assert api.callback_answers[0]["text"] == "é" * 200
    second = api.post_callback(CHAT, CHAT, "approve:n", int(sent.receipt))
    await sender.answer_callback(second["callback_query"]["id"], "🍦" * 150)  # 2 UTF-16 units each
    assert api.callback_answers[1]["text"] == "🍦" * 100

    # failures are swallowed
    api.inject("sendChatAction", "500")
    await sender.typing(CHAT)
    await sender.answer_callback(update["callback_query"]["id"], "late")  # already answered: 400
    await api.refuse()
    await sender.typing(CHAT)
    await api.accept()
    assert len(api.chat_actions) == 1 and len(api.callback_answers) == 2


async def test_an_edit_has_the_same_honest_outcomes_as_a_send(api, sender):
    sent = await sender.send(CHAT, "Order proposal #1", [Ask("proposal", "n", "1", ("approve",))])
    message_id = int(sent.receipt)
    done = await sender.edit(CHAT, message_id, "Order proposal #1\n\nApproved", [Ask("order", "n", "1", ("received",))])
    assert done == SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id))
    assert api.current(CHAT, message_id)["text"] == "Order proposal #1\n\nApproved"
    # a lost reply: unknown, never confirmed by itself
    api.inject("editMessageText", "drop_after_accept")
    lost = await sender.edit(CHAT, message_id, "Order proposal #1\n\nReceived")
    assert lost.kind is OutcomeKind.UNKNOWN
    # the same edit again (after a resend decision): "message is not modified" means it was applied
    again = await sender.edit(CHAT, message_id, "Order proposal #1\n\nReceived")
    assert again == SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id), reason="already as requested")
    assert api.current(CHAT, message_id)["markup"] is None
    # a message that is not there, or bad HTML: a definite refusal
    assert (await sender.edit(CHAT, 12345, "x")).kind is OutcomeKind.FAILED
    assert (await sender.edit(CHAT, message_id, "<b>open")).kind is OutcomeKind.FAILED
    api.inject("editMessageText", "429", retry_after=3)
    assert (await sender.edit(CHAT, message_id, "later")).kind is OutcomeKind.RETRY_LATER


async def test_make_bot_accepts_a_root_with_or_without_slash(api):
    for root in (api.base_url, api.base_url + "/"):
        bot = make_bot(TOKEN, root)
        async with bot:
            assert bot.username == "shopbot_local_bot"
