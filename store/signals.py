"""In-process wake-ups: admissions wake the worker, reports wake the relay (no fixed sleeps, no busy polling)."""
from __future__ import annotations

import asyncio


class Pulse:
    """A level-triggered wake-up: `notify` marks it; `wait` returns at once if notified since the last wait."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

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


class Signals:
    def __init__(self) -> None:
        self.work = Pulse()         # new agent work, or work released
        self.deliveries = Pulse()   # new reports, or deliveries back to pending
        self.actions = Pulse()      # approved actions, or actions back to pending
        self.receipts = Pulse()     # receipts to set (C19): admitted owner messages
