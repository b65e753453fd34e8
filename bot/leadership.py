"""One leader per singleton (C16): a small runner per leader-lease name that runs its singleton only while it holds
the lease.

Standby: it tries to acquire the lease every `retry_s` (a third of the lease at most, half a second by default,
so a standby takes over within about half a second of a clean stop's resignation). Leader: it runs the singleton
as a task and renews the lease every third of the lease, each renewal bounded by a timeout; a renewal refused, or
one whose outcome is unknown (a timeout, a lost connection), demotes at once: the singleton's task is cancelled (it
must not write again) and the runner goes back to standby. A singleton whose fenced write was refused (`LeaseLost`)
demotes the same way. A clean stop lets the singleton finish, then resigns, so a standby takes over at once.

The runner keeps the monotonic time at which the last successful renewal was sent: the lease cannot have been
extended from an earlier moment, so `fresh(margin)` ("the lease still has more than `margin` seconds left, as far
as this process can know") is a safe in-process check right before an irrevocable act (a getUpdates call, a send).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from store import Fence, Leadership, Lease, LeaseLost, StoreError

log = logging.getLogger("shopbot.leadership")

NAMES = ("poller", "relay", "producers", "actions")


def new_holder() -> str:
    """A process's identity in the leases: random at each start, never a pid or a host name (two processes that
    share a pid or a host name must never both lead)."""
    return uuid.uuid4().hex


def held(lease: Lease | None, name: str) -> Fence | None:
    """The fence of `lease` while it is fresh, for a singleton right before an irrevocable act; `LeaseLost` when
    this process cannot know the lease is current; None without a lease (drain, tests: unfenced)."""
    if lease is None:
        return None
    fence = lease.fence
    if fence is None or not lease.fresh():
        raise LeaseLost(name, fence.holder if fence else "-", fence.generation if fence else 0)
    return fence


class Leader:
    """The lease `name` in this process: `run(body)` runs `body(fence)` only while the lease is held."""

    def __init__(self, store: Leadership, name: str, holder: str, lease_s: float, *,
                 retry_s: float | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        if name not in NAMES:
            raise ValueError(f"no such leader lease {name!r}: one of {', '.join(NAMES)}")
        self.store = store
        self.name = name
        self.holder = holder
        self.lease_s = lease_s
        self.period = lease_s / 3
        self.retry_s = retry_s if retry_s is not None else min(self.period, 0.5)
        self._monotonic = monotonic
        self._stop = asyncio.Event()
        self._renewed_at: float | None = None
        self.fence: Fence | None = None
        self.changed = asyncio.Event()     # set at every acquisition and demotion (tests and status wait on it)
        self.terms = 0                     # how many times this process acquired the lease

    @property
    def holding(self) -> bool:
        return self.fence is not None

    def age(self) -> float | None:
        """Seconds since the last successful renewal was sent; None while not holding."""
        if self.fence is None or self._renewed_at is None:
            return None
        return self._monotonic() - self._renewed_at

    def fresh(self, margin: float | None = None) -> bool:
        """Whether the lease still has more than `margin` seconds left (default: one renewal period), judged from
        the moment the last successful renewal was sent."""
        age = self.age()
        return age is not None and age < self.lease_s - (self.period if margin is None else margin)

    def stop(self) -> None:
        self._stop.set()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _ask(self, call: Awaitable[Any]) -> Any:
        """One lease statement, bounded by a renewal period; an unknown outcome is None (counts as failed). Bounded by
        `asyncio.timeout`, not `asyncio.wait_for`, which on Python 3.11 returns the answer and drops a cancellation
        (a demotion, a stop) that arrives with it: the leader's loop would run on (as `Pulse.wait` did)."""
        try:
            async with asyncio.timeout(max(0.05, self.period)):
                return await call
        except (StoreError, TimeoutError, OSError) as exc:
            log.warning("leader lease call failed name=%s (%s): counted as not held", self.name, type(exc).__name__)
            return None

    async def run(self, body: Callable[[Fence], Coroutine[object, None, object]],
                  stop_body: Callable[[], None] | None = None) -> None:
        """Standby until the lease is acquired, then `body(fence)` while it is held; back to standby when it is lost;
        until `stop()`. `stop_body` asks the body to finish on a clean stop (else it is cancelled)."""
        while not self._stop.is_set():
            sent = self._monotonic()
            generation = await self._ask(self.store.acquire_leader(self.name, self.holder, self.lease_s))
            if not generation:
                await self._pause(self.retry_s)
                continue
            fence = Fence(self.name, self.holder, int(generation))
            self.fence, self._renewed_at, self.terms = fence, sent, self.terms + 1
            self.changed.set()
            log.info("leader acquired name=%s generation=%d holder=%s", self.name, fence.generation, self.holder[:8])
            task = asyncio.create_task(body(fence), name=f"leader:{self.name}")
            try:
                await self._lead(task, fence, stop_body)
            except asyncio.CancelledError:      # the process is stopping: the body first, then give the lease back
                await self._end(task)
                await asyncio.shield(self._resign(fence))
                raise

    async def _lead(self, task: asyncio.Task[object], fence: Fence, stop_body: Callable[[], None] | None) -> None:
        stop_asked = False
        while True:
            stopping = asyncio.ensure_future(self._stop.wait())
            try:
                await asyncio.wait({task, stopping}, timeout=self.period, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if task.done():
                failure = task.exception() if not task.cancelled() else None
                if isinstance(failure, LeaseLost):
                    self._demote(fence, "a fenced write was refused")
                    return
                await self._resign(fence)
                if failure is not None:
                    raise failure
                return
            if self._stop.is_set() and not stop_asked:
                stop_asked = True
                if stop_body is not None:
                    stop_body()
                else:
                    task.cancel()
                continue                          # keep renewing while the body finishes
            sent = self._monotonic()
            if await self._ask(self.store.renew_leader(self.name, self.holder, fence.generation, self.lease_s)):
                self._renewed_at = sent
                continue
            self._demote(fence, "its renewal was refused or its outcome is unknown")
            await self._end(task)
            return

    def _demote(self, fence: Fence, why: str) -> None:
        self.fence = None
        self._renewed_at = None
        self.changed.set()
        log.warning("leader demoted name=%s generation=%d: %s; the singleton stops at once", self.name,
                    fence.generation, why)

    async def _end(self, task: asyncio.Task[object]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeaseLost):
            await task

    async def _resign(self, fence: Fence) -> None:
        if self.fence != fence:
            return
        self.fence = None
        self._renewed_at = None
        self.changed.set()
        if await self._ask(self.store.resign_leader(self.name, self.holder, fence.generation)):
            log.info("leader resigned name=%s generation=%d", self.name, fence.generation)


class Presence:
    """This process in the `processes` table (holder, pid, host, seen), refreshed every third of a lease, so
    `shopbot status` shows who shares the database; removed on a clean stop. (The sweep that turns a lapsed
    sender's `sending` rows unknown is part of the lease sweep every process runs: `Store.sweep_expired`.)"""

    def __init__(self, store: Leadership, holder: str, lease_s: float) -> None:
        self.store = store
        self.holder = holder
        self.lease_s = lease_s
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def beat(self) -> None:
        await self.store.heartbeat(self.holder, os.getpid(), socket.gethostname(), max(3600.0, 10 * self.lease_s))

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.beat()
            except StoreError as exc:
                log.error("heartbeat failed (%s); trying again", type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.lease_s / 3)
        with contextlib.suppress(StoreError):
            await self.store.depart(self.holder)
