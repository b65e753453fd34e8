"""Telegram long polling with admit-then-ack (C2), by the one poller that holds the `poller` lease (C16).

Polling calls `getUpdates` itself and sends the higher offset only after the whole batch was admitted in one
committed transaction (PTB's `Updater` confirms a batch before any handler ran, so it cannot give C2).

Under the lease (`lease`, a bot.leadership.Leader): the lease's age is checked in-process before every getUpdates
(a poller that cannot know its lease is current does not poll); the admission transaction of each batch carries the
lease's fence, so a poller whose lease lapsed gets its commit refused and stops without passing a higher offset;
and the long-poll timeout stays below the margin of that check, so a lapsed leader's poll has ended at Telegram
before a new leader can poll. A 409 Conflict while this poller holds the lease is a stale ex-leader's poll still
open: it backs off and retries; a 409 that persists past two leases, or one while not holding the lease, means
another program polls this token: the loud stop.
"""
from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from telegram import Bot, Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter, TelegramError

from store import Fence, Lease, LeaseLost, PartStopped, Store, StoreError, faults, retry_delay

from . import owner
from .client import retry_after_seconds
from .routing import ALLOWED_UPDATES, BatchResult, Router, parse

log = logging.getLogger("shopbot.ingress")


class PressAnswers(Protocol):
    """The best-effort call made after a batch with button presses committed (the relay's sender has it). A
    decided card is edited through the outbox (its press's report edits it in place, C7), never from here."""

    async def answer_callback(self, callback_id: str, text: str) -> None: ...


class Ingress:
    def __init__(self, store: Store, bot: Bot, sender: PressAnswers, owner_ids: Callable[[], frozenset[int]], *,
                 poll_timeout: int = 25, rules: owner.ApprovalRules | None = None, lease: Lease | None = None,
                 receipt: str = "", on_stock_change: Callable[[], Awaitable[object]] | None = None) -> None:
        self.store = store
        # the stock watcher's check, run after a batch whose press applied a reorder point, as the worker runs it
        # after a till count: the new value is in force for the watcher at once, not at its next scheduled check
        self.on_stock_change = on_stock_change
        self.bot = bot
        self.sender = sender
        self.router = Router(owner_ids, rules, receipt)
        self.poll_timeout = poll_timeout
        self.lease = lease
        self._stop = asyncio.Event()

    def poll_window(self) -> tuple[int, float | None]:
        """(the long-poll timeout, the lease margin checked before each getUpdates). The check asks for more than
        half the lease left and the poll lasts less than that, so a poll has ended before the lease can lapse."""
        if self.lease is None:
            return self.poll_timeout, None
        margin = self.lease.lease_s / 2
        return max(0, min(self.poll_timeout, int(margin - 0.5))), margin

    def stop(self) -> None:
        self._stop.set()

    async def admit_raw(self, raw_updates: Sequence[object]) -> BatchResult:
        """Parse each update alone, then admit the whole batch in one transaction (raises StoreError on failure)."""
        parsed = [(raw.get("update_id") if isinstance(raw, dict) else None, parse(raw, self.bot))
                  for raw in raw_updates]
        return await self.admit_parsed(parsed)

    async def admit_parsed(self, parsed: Sequence[tuple[int | None, Update | None]],
                           fence: Fence | None = None) -> BatchResult:
        return await self.store.atomic(lambda tx: self.router.route(tx, parsed), fence=fence)

    async def after_commit(self, result: BatchResult) -> None:
        """Answer button presses (the spinner): best effort, after the commit. Then, when a press applied a reorder
        point, the stock watcher's check; a failed check is logged and the scheduled one tries again."""
        for press, pressed in result.presses:
            await self.sender.answer_callback(press.callback_id, pressed.answer)
        if result.stock_changed and self.on_stock_change is not None:
            try:
                await self.on_stock_change()
            except StoreError as exc:
                log.error("stock check after an applied reorder point failed (%s); the scheduled check tries again",
                          exc)

    async def fetch(self, offset: int | None, timeout: int) -> list[tuple[int | None, Update | None]]:
        """One `getUpdates` call, parsed update by update. PTB's own get_updates parses the batch at once: one
        malformed update raises for all of them, and PTB then logs the raw batch, message texts included."""
        kwargs: dict[str, object] = {"timeout": timeout, "allowed_updates": ALLOWED_UPDATES}
        if offset is not None:
            kwargs["offset"] = offset
        with warnings.catch_warnings():   # PTB suggests get_updates for this endpoint: see the docstring
            warnings.simplefilter("ignore")
            try:
                raw = await self.bot.do_api_request("getUpdates", api_kwargs=kwargs, read_timeout=timeout + 10)
            except EndPointNotFound as exc:
                # do_api_request names a 401/404 "endpoint not found" once the bot is initialized: for getUpdates,
                # which always exists, it is Telegram refusing the token (revoked while running)
                if isinstance(exc.__cause__, InvalidToken):
                    raise exc.__cause__ from exc
                raise
        return [(r.get("update_id") if isinstance(r, dict) else None, parse(r, self.bot)) for r in raw or []]

    async def poll(self, *, drain: bool = False) -> None:
        """Long polling. With `drain`, stops after the first empty batch. Under a lease, raises `LeaseLost` when a
        batch's admission was refused by the fence (nothing admitted, nothing confirmed)."""
        offset: int | None = None
        failures = 0
        conflict_since: float | None = None
        loop = asyncio.get_running_loop()
        timeout, margin = self.poll_window()
        while not self._stop.is_set():
            fence = self.lease.fence if self.lease is not None else None
            if self.lease is not None and (fence is None or not self.lease.fresh(margin)):
                await self._sleep(0.05)      # cannot know the lease is current: no getUpdates now (C16)
                continue
            try:
                parsed = await self.fetch(offset, 0 if drain else timeout)
            except Conflict as exc:
                now = loop.time()
                conflict_since = now if conflict_since is None else conflict_since
                if self.lease is not None and self.lease.fence is not None and \
                        now - conflict_since <= 2 * self.lease.lease_s:
                    log.warning("getUpdates 409 Conflict while holding the poller lease: a stale ex-leader's poll "
                                "is still open; retrying in %.1f s", 1.0)
                    await self._sleep(1.0)
                    continue
                raise PartStopped(
                    "ingestion",
                    "Telegram says another program is polling this bot token (409 Conflict). shopbot never fights "
                    "it: stop the other poller (only one may run per token), then start shopbot again.") from exc
            except InvalidToken as exc:
                raise PartStopped("ingestion", "Telegram refused the bot token: check TELEGRAM_BOT_TOKEN.") from exc
            except RetryAfter as exc:        # flood control on getUpdates: wait as told, nothing was confirmed
                delay = retry_after_seconds(exc)
                log.warning("getUpdates flood control: waiting %.1f s", delay)
                await self._sleep(delay)
                continue
            except TelegramError as exc:
                # a network failure, or any other answer (403, 5xx, a body that is not the Bot API's): Telegram is an
                # outside server, and no answer of its stops the part (C21): retried with backoff, nothing confirmed
                failures += 1
                delay = retry_delay(failures)
                log.warning("getUpdates failed (%s); retrying in %.1f s", type(exc).__name__, delay)
                await self._sleep(delay)
                continue
            failures = 0
            conflict_since = None
            if not parsed:
                if drain:
                    return
                if timeout == 0:
                    await self._sleep(0.2)   # a lease too short for a long poll: poll about five times a second
                continue
            faults.reached("K1")
            try:
                result = await self.admit_parsed(parsed, fence)
            except LeaseLost:
                # The lease lapsed or was taken over while this batch was in hand: nothing was admitted or
                # confirmed; the new leader gets the same updates from Telegram (C1 absorbs the rest).
                log.warning("admission refused by the poller lease fence: this poller stops, offset not advanced")
                raise
            except StoreError as exc:
                # Nothing was acknowledged: the same updates come back with the same offset (C2).
                log.error("admission failed, batch not acknowledged (%s); retrying", exc)
                await self._sleep(1.0)
                continue
            faults.reached("K2")
            ids = [update_id for update_id, _ in parsed if isinstance(update_id, int)]
            if ids:
                offset = max(ids) + 1
            log.info("batch admitted updates=%d %s", len(parsed),
                     " ".join(f"{k}={v}" for k, v in sorted(result.outcomes.items())))
            await self.after_commit(result)
        if offset is not None:
            # Confirm the last admitted batch so Telegram does not redeliver it at the next start (C1 would absorb it).
            try:
                await self.bot.get_updates(offset=offset, timeout=0, allowed_updates=ALLOWED_UPDATES, limit=1)
            except Exception:
                pass

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass
