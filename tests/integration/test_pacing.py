"""Pacing (bot/relays/pacing.py) and the typing indicator (bot/relays/typing.py).

The pacers' decisions are driven by an injected monotonic clock (and the store's ManualClock beside it): the relay
sends through the real python-telegram-bot client to the local Bot API over HTTP, and every assertion is about the
simulated time at which each message went, never about how long anything took. The typing indicator is shown off
the reply's path by the order in which the local Bot API saw the calls and answers, not by a time.
"""
from __future__ import annotations

import asyncio
import logging

import pytest

from bot import config
from bot.relays.pacing import Pacer, PacingSettings, TokenBucket
from bot.relays.sender import TelegramSender
from bot.relays.telegram import Relay, RelaySettings
from bot.relays.typing import TypingIndicator
from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.bot_api.faults import FloodLimit
from bot.sandbox.local_setup import OWNER_ID, local_product
from producers.telegram.client import make_bot
from store import ManualClock, PartStopped, SqliteStore, Store
from tests.conftest import START
from tests.support import DATA

TOKEN = "4321:pacing-test-token"
CALM = DATA / "shop_calm.toml"
EPS = 1e-6


class Monotonic:
    """The relay's monotonic clock, moved by hand together with the store's clock."""

    def __init__(self, store_clock: ManualClock) -> None:
        self.t = 0.0
        self.store_clock = store_clock

    def __call__(self) -> float:
        return self.t

    def advance_to(self, t: float) -> None:
        self.store_clock.advance(t - self.t)
        self.t = t


class Recording:
    """The real sender, with the simulated time of every send noted, and which sends were in flight together."""

    def __init__(self, sender: TelegramSender, clock: Monotonic) -> None:
        self.sender, self.clock = sender, clock
        self.sends: list[tuple[float, int]] = []
        self.in_flight: list[int] = []            # the chats whose send has started and not yet returned
        self.together: list[tuple[int, ...]] = []  # the chats in flight each time a send started

    async def send(self, chat_id, text, asks=(), *, reply_to=None):  # type: ignore[no-untyped-def]
        self.sends.append((self.clock(), chat_id))
        self.in_flight.append(chat_id)
        self.together.append(tuple(self.in_flight))
        try:
            return await self.sender.send(chat_id, text, asks, reply_to=reply_to)
        finally:
            self.in_flight.remove(chat_id)

    async def edit(self, chat_id, message_id, text, asks=()):  # type: ignore[no-untyped-def]
        self.sends.append((self.clock(), chat_id))
        return await self.sender.edit(chat_id, message_id, text, asks)


@pytest.fixture
async def rig(tmp_path):
    clock = ManualClock(START)
    store = await SqliteStore.open(tmp_path / "pacing.sqlite3", clock, capacity=5, debounce_ms=0)
    async with LocalBotApi(TOKEN) as api:
        bot = make_bot(TOKEN, api.base_url)
        await bot.initialize()
        mono = Monotonic(clock)
        transport = Recording(TelegramSender(bot), mono)
        try:
            yield store, api, mono, transport
        finally:
            await bot.shutdown()
            await store.close()


def relay_for(store, transport, **settings) -> Relay:  # type: ignore[no-untyped-def]
    return Relay(store, transport, lambda chat: True, RelaySettings(**settings))


async def send_all_due(relay: Relay, mono: Monotonic) -> None:
    while await relay.deliver_due(mono):
        pass


async def run_until_sent(relay: Relay, mono: Monotonic, transport: Recording, count: int,
                         arrivals: list[tuple[float, object]] = ()) -> None:  # type: ignore[assignment]
    """Simulated time: admit each arrival at its time, send what pacing allows, jump to the next event."""
    pending = list(arrivals)
    for _ in range(10_000):
        while pending and pending[0][0] <= mono() + EPS:
            await pending.pop(0)[1]()
        await send_all_due(relay, mono)
        if len(transport.sends) >= count and not pending:
            return
        events = [t for t, _ in pending[:1]]
        delay = relay.pace_delay(mono())
        if delay is not None:
            events.append(mono() + delay)
        wake = await relay.store.next_delivery_time()
        if wake is not None:
            events.append(mono() + max(0.0, (wake - relay.store.clock.now()).total_seconds()))
        assert events, f"nothing left to wait for after {len(transport.sends)} of {count} sends"
        mono.advance_to(max(mono(), min(events)))
    raise AssertionError("the simulation did not finish")


def notice(store: Store, n: int, chat: int, text: str = "hello"):  # type: ignore[no-untyped-def]
    return lambda: store.notice("test", str(n), f"{text} {n}", f"tg:{chat}")


# ---- the buckets themselves -------------------------------------------------------------------------------------

def test_a_bucket_gives_its_burst_at_once_then_one_token_per_interval():
    bucket = TokenBucket(1.0, 3)
    for _ in range(3):
        assert bucket.wait(0.0) == 0.0
        bucket.take(0.0)
    assert bucket.wait(0.0) == pytest.approx(1.0)
    assert bucket.wait(0.5) == pytest.approx(0.5)
    bucket.take(1.0)
    assert bucket.wait(1.0) == pytest.approx(1.0)
    assert not bucket.full(3.5) and bucket.full(4.0)     # three tokens back after three intervals


def test_a_group_chat_never_gets_more_than_twenty_in_any_minute():
    pacer = Pacer(PacingSettings(chat_interval_s=1.0, chat_burst=3))
    times, now = [], 0.0
    while len(times) < 60:
        now += pacer.wait(-100123, now)
        pacer.take(-100123, now)
        times.append(now)
    assert times[:3] == [0.0, 0.0, 0.0]
    most = max(sum(1 for t in times if start - EPS <= t <= start + 60 + EPS) for start in times)
    assert most == 20           # in any 60 s, both ends included: Telegram's 20, and no fewer than it allows
    assert pacer.shape(-100123) == (pytest.approx(60 / 17), 3) and pacer.shape(5000) == (1.0, 3)


def test_bad_pacing_settings_are_refused():
    with pytest.raises(ValueError):
        PacingSettings(chat_burst=0)
    with pytest.raises(ValueError):
        PacingSettings(global_per_s=-1)
    for key in ("SHOPBOT_CHAT_BURST", "SHOPBOT_GLOBAL_BURST"):
        with pytest.raises(config.ConfigError, match=key):
            config.load({key: "0"})
    cfg = config.load({})
    assert (cfg.chat_pace_ms, cfg.chat_burst, cfg.global_pace_per_s, cfg.global_burst) == (1000, 3, 30, 30)


def test_the_fake_bot_apis_flood_limit_refuses_what_overflows_its_bucket():
    now = [0.0]
    flood = FloodLimit(30, clock=lambda: now[0])
    assert all(flood.admit() for _ in range(30))
    assert not flood.admit() and flood.refused == 1          # the 31st at the same instant: 429
    now[0] = 1 / 30
    assert flood.admit() and not flood.admit()               # one more per 1/30 s
    now[0] = 10.0
    assert sum(flood.admit() for _ in range(40)) == 30 and flood.refused == 12


# ---- the relay's decisions, through real HTTP ---------------------------------------------------------------------

async def test_a_three_part_reply_goes_out_at_once(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport)
    await store.notice("long", "1", "\n".join(["x" * 3000] * 3), f"tg:{OWNER_ID}")
    await send_all_due(relay, mono)
    assert [t for t, _ in transport.sends] == [0.0, 0.0, 0.0]
    assert [m.text.rsplit(" ", 1)[-1] for m in api.sent] == ["(1/3)", "(2/3)", "(3/3)"]
    # the burst is spent: a fourth message to the same chat waits for the chat's next token, one second
    await store.notice("more", "2", "and one more", f"tg:{OWNER_ID}")
    await send_all_due(relay, mono)
    assert len(api.sent) == 3 and relay.pace_delay(mono()) == pytest.approx(1.0)
    await run_until_sent(relay, mono, transport, 4)
    assert transport.sends[-1][0] == pytest.approx(1.0)


async def test_forty_sends_to_one_chat_are_spread_to_the_chats_rate_after_the_burst(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport)
    for n in range(40):
        await notice(store, n, OWNER_ID)()
    await run_until_sent(relay, mono, transport, 40)
    times = [t for t, _ in transport.sends]
    assert times == pytest.approx([0.0, 0.0, 0.0] + [float(k) for k in range(1, 38)])
    assert all(m.text.startswith(f"hello {n}\n") for n, m in enumerate(api.sent))      # in order of admission


async def test_a_hundred_sends_over_a_hundred_chats_in_one_second_keep_the_global_rate_after_its_burst(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport)                       # defaults: 30 a second, burst 30
    arrivals = [(n * 0.01, notice(store, n, 6000 + n)) for n in range(100)]    # 100 chats within one second
    await run_until_sent(relay, mono, transport, 100, arrivals)
    times = [t for t, _ in transport.sends]
    assert len(api.sent) == 100 and len({chat for _, chat in transport.sends}) == 100
    # a bucket of 30 refilled at 30/s: never more than 30 + 30 w sends in any w seconds
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= 30 + 30 * (times[j] - start) + EPS
    assert times[:30] == pytest.approx([n * 0.01 for n in range(30)])    # the burst: each at its arrival
    gaps = [b - a for a, b in zip(times[60:], times[61:], strict=False)]
    assert gaps == pytest.approx([1 / 30] * len(gaps))                  # then exactly the global rate
    assert times[-1] == pytest.approx((100 - 30) / 30)


async def test_a_429_waits_out_retry_after(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport)
    api.inject("sendMessage", "429", retry_after=5)
    await store.notice("a", "1", "first", f"tg:{OWNER_ID}")
    await send_all_due(relay, mono)
    assert api.sent == [] and len(transport.sends) == 1
    # another chat waits too: Telegram does not say which limit was hit
    await store.notice("b", "2", "second", "tg:5555")
    mono.advance_to(4.9)
    await send_all_due(relay, mono)
    assert api.sent == [] and relay.pace_delay(mono()) == pytest.approx(0.1)
    await run_until_sent(relay, mono, transport, 3)
    assert [m.chat_id for m in api.sent] == [OWNER_ID, 5555]
    # at retry_after one send goes, and the global bucket refills from there
    assert [t for t, _ in transport.sends] == pytest.approx([0.0, 5.0, 5.0 + 1 / 30])
    states = [d.state for r in await store.reports() for d in r.deliveries]
    assert states == ["confirmed", "confirmed"]


async def test_a_receipt_is_committed_before_pacing_holds_the_next_send(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport, global_per_s=1, global_burst=1)
    await store.notice("a", "1", "first", "tg:5001")
    await store.notice("b", "2", "second", "tg:5002")
    await send_all_due(relay, mono)
    assert len(api.sent) == 1
    states = {r.destination: r.deliveries[0].state for r in await store.reports()}
    assert states == {"tg:5001": "confirmed", "tg:5002": "pending"}       # not held back by the wait


async def test_pacing_off_sends_everything_at_once(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport, chat_pace_s=0.0, global_per_s=0)
    for n in range(40):
        await notice(store, n, OWNER_ID)()
    await send_all_due(relay, mono)
    assert len(api.sent) == 40 and relay.pace_delay(mono()) is None


async def test_parts_of_different_chats_go_out_together_never_two_of_one_chat(rig):
    """Issue 31: one look of the relay marks up to `in_flight` due parts `sending`, each of a different chat, and
    their HTTP calls are in flight at once (the fake answers each after 0.2 s, so they overlap); a chat's second
    message waits for the look after its first one's answer, so it still arrives second."""
    store, api, mono, transport = rig
    relay = relay_for(store, transport, chat_pace_s=0.0, global_per_s=0)
    api.inject("sendMessage", "slow", count=6, delay=0.2)
    for n, chat in enumerate([6001, 6001, 6002, 6003, 6004, 6005]):
        await notice(store, n, chat)()
    await send_all_due(relay, mono)
    assert [m.chat_id for m in api.sent].count(6001) == 2 and len(api.sent) == 6
    assert max(len(chats) for chats in transport.together) == 4                 # the default in_flight
    assert all(len(set(chats)) == len(chats) for chats in transport.together)   # never two of one chat at once
    assert [m.text for m in api.sent if m.chat_id == 6001][0].startswith("hello 0")
    assert {d.state for r in await store.reports() for d in r.deliveries} == {"confirmed"}
    assert await store.check() == []


async def test_negative_control_one_in_flight_sends_one_at_a_time(rig):
    store, api, mono, transport = rig
    relay = relay_for(store, transport, chat_pace_s=0.0, global_per_s=0, in_flight=1)
    api.inject("sendMessage", "slow", count=4, delay=0.05)
    for n in range(4):
        await notice(store, n, 6100 + n)()
    await send_all_due(relay, mono)
    assert len(api.sent) == 4 and max(len(chats) for chats in transport.together) == 1


async def test_a_token_refused_in_a_look_keeps_the_receipt_of_the_part_that_went_out(rig):
    """Issue 31: one part of a look refused with 401 stops the relay (the bot's token), while Telegram took the other
    part of the same look: that part's receipt is committed before the relay stops, so it is not left `sending`, to
    be asked about as `unknown` after it arrived."""
    store, api, mono, transport = rig
    relay = relay_for(store, transport, chat_pace_s=0.0, global_per_s=0)
    api.inject("sendMessage", "slow", count=1, delay=0.2)     # the first call is taken, answered late
    api.inject("sendMessage", "401", count=1)                 # the second is refused at once
    await notice(store, 1, 6301)()
    await notice(store, 2, 6302)()
    with pytest.raises(PartStopped, match="Telegram refused the bot token"):
        await relay.deliver_due(mono)
    states = sorted(d.state for r in await store.reports() for d in r.deliveries)
    assert len(api.sent) == 1 and states == ["confirmed", "pending"]
    assert await store.check() == []


async def test_sends_in_flight_together_never_exceed_the_global_buckets_tokens(rig):
    """Pacing decides how many go together: a global bucket of 2 lets two go at once, then one per refill."""
    store, api, mono, transport = rig
    relay = relay_for(store, transport, global_per_s=10, global_burst=2)
    api.inject("sendMessage", "slow", count=5, delay=0.05)
    arrivals = [(0.0, notice(store, n, 6200 + n)) for n in range(5)]
    await run_until_sent(relay, mono, transport, 5, arrivals)
    assert [len(chats) for chats in transport.together][:2] == [1, 2]
    assert max(len(chats) for chats in transport.together) == 2
    assert [t for t, _ in transport.sends] == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3])


# ---- the typing indicator ------------------------------------------------------------------------------------------

def reply_overtook_typing(timeline: list[tuple[str, str]]) -> bool:
    """The reply's sendMessage reached the server before the typing call was answered (the turn never waited for
    it). Which of the two requests arrives first is a race (the typing call is started, never awaited), so only
    the answer's place is judged; the caller waits for the typing call to arrive."""
    def at(entry: tuple[str, str]) -> int:
        return timeline.index(entry) if entry in timeline else len(timeline)
    return at(("call", "sendMessage")) < at(("answer", "sendChatAction"))


def test_the_order_check_catches_a_reply_that_waited_for_typing():
    waited = [("call", "sendChatAction"), ("answer", "sendChatAction"), ("call", "sendMessage"),
              ("answer", "sendMessage")]
    overtook = [("call", "sendChatAction"), ("call", "sendMessage"), ("answer", "sendMessage"),
                ("answer", "sendChatAction")]
    raced = [("call", "sendMessage"), ("call", "sendChatAction"), ("answer", "sendMessage"),
             ("answer", "sendChatAction")]        # the typing call started first but reached the server second
    assert reply_overtook_typing(overtook) and reply_overtook_typing(raced) and not reply_overtook_typing(waited)


async def started(run) -> None:  # type: ignore[no-untyped-def]
    """Polling runs, so the start-up check of the owner chat (its own sendChatAction) is over."""
    await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
    run.api.timeline.clear()


# typing at once: the offline model answers well within the default SHOPBOT_TYPING_AFTER_MS
TYPING_AT_ONCE = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_SHOP_FILE": str(CALM), "SHOPBOT_TYPING_AFTER_MS": "0"}


async def test_a_slow_typing_call_does_not_delay_the_reply():
    async with local_product(TYPING_AT_ONCE) as run:
        await started(run)
        run.api.inject("sendChatAction", "slow", delay=3.0)
        run.api.post_message(OWNER_ID, OWNER_ID, "help")
        await run.replies(1)
        await run.api.wait_for(lambda: ("call", "sendChatAction") in run.api.timeline, timeout=10)
        assert reply_overtook_typing(run.api.timeline), run.api.timeline
        assert run.api.timeline.count(("call", "sendChatAction")) == 1
        assert run.api.chat_actions[-1] == {"chat_id": OWNER_ID, "action": "typing"}


async def test_negative_control_a_typing_call_awaited_before_the_model_delays_the_reply():
    async with local_product(TYPING_AT_ONCE) as run:
        await started(run)
        sender, worker = run.app.parts.sender, run.app.parts.worker

        class Awaited:                      # the old hook: the turn waits for sendChatAction's answer
            def __init__(self, claim):  # type: ignore[no-untyped-def]
                self.chat = int(claim.destination[3:])

            async def __aenter__(self):  # type: ignore[no-untyped-def]
                await sender.typing(self.chat)

            async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
                return None
        worker.on_turn = Awaited
        run.api.inject("sendChatAction", "slow", delay=0.3)
        run.api.post_message(OWNER_ID, OWNER_ID, "help")
        await run.replies(1)
        assert not reply_overtook_typing(run.api.timeline), run.api.timeline


async def test_a_turn_answered_sooner_than_the_typing_delay_sends_no_chat_action_at_all():
    """Telegram recommends a chat action only when the answer takes a noticeable time: a fast turn sends none (and
    never pays for the call on its way to the reply)."""
    calls: list[int] = []

    async def send(chat_id: int) -> None:
        calls.append(chat_id)
    typing = TypingIndicator(send, after_s=60.0)
    async with typing.during(7):
        await asyncio.sleep(0)              # the turn answered at once
    await asyncio.wait_for(_until(lambda: not typing._renewals), 10)   # its indicator was cancelled and ended
    await typing.aclose()
    assert calls == [] and typing.fired == 0


async def test_negative_control_with_no_typing_delay_the_same_fast_turn_sends_one():
    calls: list[int] = []

    async def send(chat_id: int) -> None:
        calls.append(chat_id)
    typing = TypingIndicator(send, after_s=0.0)
    async with typing.during(7):
        await asyncio.wait_for(_until(lambda: typing.fired == 1), 10)
    await typing.aclose()
    assert calls == [7]


async def test_a_turn_still_running_after_the_typing_delay_shows_typing_in_its_chat():
    calls: list[int] = []
    typing = TypingIndicator(lambda chat_id: _append(calls, chat_id), after_s=0.01)
    async with typing.during(7):
        await asyncio.wait_for(_until(lambda: calls == [7]), 10)     # a long model call: typing came after the delay
    await typing.aclose()
    assert calls == [7]


async def test_a_product_turn_answered_at_once_sends_no_chat_action_by_default():
    async with local_product({"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_SHOP_FILE": str(CALM)}) as run:
        await started(run)
        assert run.app.parts.typing.after_s == 0.3            # SHOPBOT_TYPING_AFTER_MS's default
        run.app.parts.typing.after_s = 60.0                    # no machine is slow enough to reach it by chance
        run.api.post_message(OWNER_ID, OWNER_ID, "help")
        await run.replies(1)
        await asyncio.wait_for(_until(lambda: not run.app.parts.typing._renewals), 10)
        assert ("call", "sendChatAction") not in run.api.timeline, run.api.timeline
        assert run.app.parts.typing.fired == 0


async def test_typing_is_renewed_while_the_turn_runs_and_stops_when_it_ends():
    calls: list[int] = []
    renewed = asyncio.Event()

    async def send(chat_id: int) -> None:
        calls.append(chat_id)
        if len(calls) >= 3:
            renewed.set()
    typing = TypingIndicator(send, after_s=0, renew_s=0.01)
    async with typing.during(7):
        await asyncio.wait_for(renewed.wait(), 10)     # a long model call: renewed again and again
    await asyncio.wait_for(_until(lambda: not typing._renewals), 10)    # the renewal was cancelled and ended
    assert set(calls) == {7}
    before = len(calls)
    await typing.aclose()
    assert len(calls) == before


async def test_a_typing_call_in_flight_is_not_stacked_and_never_blocks_the_turn():
    release = asyncio.Event()
    started_calls: list[int] = []

    async def hanging(chat_id: int) -> None:
        started_calls.append(chat_id)
        await release.wait()
    typing = TypingIndicator(hanging, after_s=0, renew_s=0.001, max_in_flight=2)
    async with typing.during(1):
        async with typing.during(2), typing.during(3):
            await asyncio.wait_for(_until(lambda: typing.skipped >= 5), 10)
    assert sorted(started_calls) == [1, 2]          # one call per chat, and at most two in flight over all
    release.set()
    await typing.aclose()


async def test_a_failing_typing_task_is_logged_at_debug_never_lost(caplog):
    async def broken(chat_id: int) -> None:
        raise RuntimeError("the sender itself broke")
    typing = TypingIndicator(broken, after_s=0)
    with caplog.at_level(logging.DEBUG, logger="shopbot.typing"):
        async with typing.during(9):
            await asyncio.wait_for(_until(lambda: typing.fired == 1 and not typing._in_flight), 10)
        await typing.aclose()
    assert any("the sender itself broke" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)


async def _append(calls: list[int], chat_id: int) -> None:
    calls.append(chat_id)


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    while not predicate():
        await asyncio.sleep(0.001)
