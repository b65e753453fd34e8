"""The "typing…" indicator while a turn's model call runs, kept off the reply's path.

Telegram shows a chat action for about 5 seconds, or until the bot's next message arrives, and recommends it "only
when a response from the bot will take a noticeable amount of time to arrive". So for each turn whose reply goes to
a Telegram chat, `TypingIndicator.during(chat_id)` starts one tracked task that sends `sendChatAction` once the turn
has run `after_s` (SHOPBOT_TYPING_AFTER_MS, default 300 ms; 0: at once) and again every `renew_s` (default 4 s)
while it runs, and cancels it when the turn ends. A turn that answers sooner (the offline model, a cached answer)
sends no chat action at all: its reply is the sign of life, and the call would only compete with the reply for the
process's CPU and the Bot's connections. Nothing on the turn's path awaits a Telegram round trip: a call is fired,
not waited for.

Best effort, never silent, never in the way:
- each call is its own task; at most one per chat is in flight (a slow answer is not stacked up by renewals) and
  at most `max_in_flight` over all chats, so slow chat actions never take the connections replies need (the Bot's
  pool holds 8);
- a failed call is logged at debug by the sender (`TelegramSender.typing`), and anything else a task raises is
  logged at debug by its done-callback: nothing is lost without a line;
- a call already on the wire when the turn ends is left to finish (cancelling it would only drop a connection);
  `aclose` cancels whatever is left at shutdown, before the Bot's HTTP client closes.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import partial

log = logging.getLogger("shopbot.typing")

RENEW_S = 4.0
AFTER_S = 0.3


class TypingIndicator:
    def __init__(self, send: Callable[[int], Coroutine[object, None, None]], *, after_s: float = AFTER_S,
                 renew_s: float = RENEW_S, max_in_flight: int = 4) -> None:
        self._send = send                     # e.g. TelegramSender.typing (best effort, logs its own failures)
        self.after_s = after_s
        self.renew_s = renew_s
        self.max_in_flight = max_in_flight
        self._in_flight: dict[int, asyncio.Task[None]] = {}    # chat -> its sendChatAction call on the wire
        self._renewals: set[asyncio.Task[None]] = set()
        self.fired = 0                        # calls started (for tests and benchmarks)
        self.skipped = 0                      # renewals not sent because a call was still in flight

    @contextlib.asynccontextmanager
    async def during(self, chat_id: int) -> AsyncIterator[None]:
        """Show "typing…" in `chat_id` while the body runs; entering and leaving never wait for Telegram. With
        `after_s` 0 the call is started here, on entering: a body that never waits (the offline model) would end,
        and cancel the renewal task, before that task first ran."""
        if self.after_s <= 0:
            self.fire(chat_id)
        renewal = asyncio.get_running_loop().create_task(self._renew(chat_id), name=f"typing-{chat_id}")
        self._renewals.add(renewal)
        renewal.add_done_callback(self._done)
        try:
            yield
        finally:
            renewal.cancel()

    async def _renew(self, chat_id: int) -> None:
        # cancelled here when the turn answered sooner: no call at all (or, at 0, only the one `during` started)
        await asyncio.sleep(self.after_s if self.after_s > 0 else self.renew_s)
        while True:
            self.fire(chat_id)
            await asyncio.sleep(self.renew_s)

    def fire(self, chat_id: int) -> None:
        """Start one sendChatAction for `chat_id` unless one is still in flight; returns at once."""
        if chat_id in self._in_flight or len(self._in_flight) >= self.max_in_flight:
            self.skipped += 1
            return
        task = asyncio.get_running_loop().create_task(self._send(chat_id), name=f"sendChatAction-{chat_id}")
        self._in_flight[chat_id] = task
        self.fired += 1
        task.add_done_callback(partial(self._call_done, chat_id))

    def _call_done(self, chat_id: int, task: asyncio.Task[None]) -> None:
        if self._in_flight.get(chat_id) is task:
            del self._in_flight[chat_id]
        self._done(task)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._renewals.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.debug("typing indicator task %s failed (best effort, ignored): %s: %s", task.get_name(),
                      type(exc).__name__, exc)

    async def aclose(self) -> None:
        """Cancel every renewal and call still running, and wait for them (at shutdown)."""
        tasks = [*self._renewals, *self._in_flight.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
