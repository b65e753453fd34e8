"""The Bot API transport (producers/telegram/transport.py) against the local fake over real HTTP: what a hostile or
broken Telegram can do to one call (C21) and what each failure means for a send (C7).

Each bound has its negative control in the fault itself: without the bound the call would read 17 MiB, or wait for
an answer dribbled over a minute, well past the test's timeout.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from telegram.error import NetworkError, TimedOut

from bot.relays.sender import OutcomeKind, TelegramSender, classify
from bot.sandbox.bot_api import LocalBotApi
from producers.telegram.client import make_bot
from producers.telegram.transport import AiohttpRequest, AnswerTooLarge, _without_token

TOKEN = "123456:TEST-token-for-transport-tests-0123456"
CHAT = 4242


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


async def test_an_answer_over_the_bound_fails_the_call_and_the_next_call_works(api):
    bot = make_bot(TOKEN, api.base_url, read_timeout=5.0, connect_timeout=1.0)
    async with bot:
        api.inject("sendMessage", "huge_200")          # 17 MiB of JSON, no Content-Length: counted as it comes
        outcome = await TelegramSender(bot).send(CHAT, "hello")
        assert outcome.kind is OutcomeKind.UNKNOWN, outcome    # Telegram took it: it may have been sent
        assert "AnswerTooLarge" in outcome.reason
        assert [m.text for m in api.sent] == ["hello"]
        assert (await TelegramSender(bot).send(CHAT, "after")).kind is OutcomeKind.CONFIRMED


async def test_a_declared_length_over_the_bound_is_refused_before_reading(api):
    request = AiohttpRequest(pool_size=1, read_timeout=5, write_timeout=5, connect_timeout=1, pool_timeout=1,
                             max_answer_bytes=64)
    async with request:
        with pytest.raises(NetworkError) as info:
            await request.post(f"{api.base_url}/bot{TOKEN}/getMe")
    assert isinstance(info.value.__cause__, AnswerTooLarge)
    assert "Content-Length" in str(info.value.__cause__)


async def test_a_dribbling_answer_ends_at_the_total_deadline(api):
    # Each byte comes within the read timeout, so only the total deadline (connect + pool + write + read = 2 s)
    # can end the call: the answer alone would take about a minute.
    bot = make_bot(TOKEN, api.base_url, read_timeout=0.5, connect_timeout=0.5)
    async with bot:
        api.inject("sendMessage", "dribble", delay=0.2)
        started = time.monotonic()
        with pytest.raises(TimedOut) as info:
            await bot.send_message(CHAT, "slowly")
        took = time.monotonic() - started
        assert classify(info.value).kind is OutcomeKind.UNKNOWN
        assert took < 10, f"the call took {took:.1f} s: no total deadline"
        assert (await bot.get_me()).id == 999          # the pool recovers


async def test_a_closed_client_is_not_sent(api):
    bot = make_bot(TOKEN, api.base_url)
    async with bot:
        pass
    outcome = await TelegramSender(bot).send(CHAT, "after shutdown")
    assert outcome.kind is OutcomeKind.NOT_SENT, outcome
    assert api.sent == []


async def test_parameters_travel_as_json_and_photos_as_multipart(api):
    bot = make_bot(TOKEN, api.base_url)
    async with bot:
        sent = await TelegramSender(bot).send(CHAT, "<b>bold</b> &amp; more")
        assert sent.kind is OutcomeKind.CONFIRMED
        assert api.sent[-1].text == "bold & more"
        png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4"
               b"\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND"
               b"\xaeB`\x82")
        photo = await TelegramSender(bot).send_photo(CHAT, png, "a <i>chart</i>")
        assert photo.kind is OutcomeKind.CONFIRMED, photo


async def test_many_calls_at_once_share_the_pool(api):
    bot = make_bot(TOKEN, api.base_url)
    async with bot:
        outcomes = await asyncio.gather(*(TelegramSender(bot).send(CHAT, f"m{i}") for i in range(40)))
    assert all(o.kind is OutcomeKind.CONFIRMED for o in outcomes)
    assert sorted(m.text for m in api.sent) == sorted(f"m{i}" for i in range(40))


@pytest.mark.parametrize(("url", "shown"), [
    ("http://127.0.0.1:8081/bot123:ABC-def/sendMessage", "http://127.0.0.1:8081/bot****/sendMessage"),
    ("https://api.example/botapi/bot123:ABC-def/getMe", "https://api.example/botapi/bot****/getMe"),  # /bot in root
    ("https://api.example/file/bot123:ABC-def/photos/a.jpg", "https://api.example/file/bot****/a.jpg"),
])
def test_an_error_names_the_url_without_the_token(url, shown):
    assert _without_token(url) == shown and "ABC-def" not in _without_token(url)


async def test_a_proxy_from_the_environment_carries_the_calls(api, monkeypatch):
    # The root is a port nothing listens on: only the proxy (the fake, which reads the absolute-form target as a
    # proxy would forward it) answers. NO_PROXY naming that host sends the call direct: refused, not_sent. (localhost:
    # no name is looked up outside this machine.)
    monkeypatch.setenv("HTTP_PROXY", api.base_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    bot = make_bot(TOKEN, "http://localhost:9")
    async with bot:
        assert (await TelegramSender(bot).send(CHAT, "via the proxy")).kind is OutcomeKind.CONFIRMED
    assert [m.text for m in api.sent] == ["via the proxy"]
    monkeypatch.setenv("NO_PROXY", "localhost")
    direct = make_bot(TOKEN, "http://localhost:9", connect_timeout=2.0)
    try:
        with pytest.raises(NetworkError):
            await direct.initialize()
        assert (await TelegramSender(direct).send(CHAT, "direct")).kind is OutcomeKind.NOT_SENT
    finally:
        await direct.shutdown()
    assert len(api.sent) == 1
