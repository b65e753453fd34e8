"""In-process wake-ups: admissions wake the worker, reports wake the relay (no fixed sleeps, no busy polling)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class Pulse:
    """A level-triggered wake-up: `notify` marks it; `wait` returns at once if notified since the last wait."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._watchers: set[asyncio.Future[None]] = set()   # `wait_or`'s own wake-ups

    def notify(self) -> None:
        self._event.set()
        self.wake()

    def wake(self) -> None:
        """Wake the tasks waiting in `wait_or` without marking the pulse: a hand-over that needs no look after it
        (an idle worker's claim taken by an admission's commit) leaves no mark for the next wait to find."""
        for watcher in self._watchers:
            if not watcher.done():
                watcher.set_result(None)

    async def wait(self, timeout: float | None = None) -> bool:
        """True when notified (the mark is cleared), False when `timeout` passed first. A cancellation always ends
        the wait: `asyncio.timeout`, not `asyncio.wait_for`, which on Python 3.11 returns the result instead when the
        cancellation and a notify arrive together, so a relay's loop cancelled by its demotion ran on for good."""
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            return False
        self._event.clear()
        return True

    async def wait_or(self, others: Iterable[asyncio.Future[Any]], timeout: float | None = None) -> bool:
        """As `wait`, and it also ends (False unless notified too) when one of `others` is done. The notify wakes the
        waiting task itself, not a helper task that `asyncio.wait` would then see end: the worker claims one loop
        pass after an admission instead of three, ahead of whatever else the admission woke."""
        if self._event.is_set():
            self._event.clear()
            return True
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(_: object) -> None:
            if not woken.done():
                woken.set_result(None)
        watched = list(others)
        for other in watched:
            other.add_done_callback(done)
        self._watchers.add(woken)
        try:
            async with asyncio.timeout(timeout):
                await woken
        except TimeoutError:
            pass
        finally:
            self._watchers.discard(woken)
            for other in watched:
                other.remove_done_callback(done)
        if self._event.is_set():
            self._event.clear()
            return True
        return False


class Signals:
    def __init__(self) -> None:
        self.work = Pulse()         # new agent work, or work released
        self.deliveries = Pulse()   # new reports, or deliveries back to pending
        self.actions = Pulse()      # approved actions, or actions back to pending
        self.receipts = Pulse()     # receipts to set (C19): admitted owner messages
