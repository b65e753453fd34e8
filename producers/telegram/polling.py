"""Telegram long polling with admit-then-ack (C2).

Polling calls `getUpdates` itself and sends the higher offset only after the whole batch was admitted in one
committed transaction (PTB's `Updater` confirms a batch before any handler ran, so it cannot give C2).
"""
from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Protocol

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter

from store import Store, StoreError, faults

from . import owner
from .client import retry_after_seconds
from .routing import ALLOWED_UPDATES, BatchResult, Router, parse

log = logging.getLogger("shopbot.ingress")


class IngressStopped(Exception):
    """Ingestion stopped for a reason an operator must fix (another poller on the token, a bad token)."""


class PressAnswers(Protocol):
    """The best-effort call made after a batch with button presses committed (the relay's sender has it). A
    decided card is edited through the outbox (its press's report edits it in place, C7), never from here."""

    async def answer_callback(self, callback_id: str, text: str) -> None: ...


class Ingress:
    def __init__(self, store: Store, bot: Bot, sender: PressAnswers, owner_ids: Callable[[], frozenset[int]], *,
                 poll_timeout: int = 25, rules: owner.ApprovalRules | None = None) -> None:
        self.store = store
        self.bot = bot
        self.sender = sender
        self.router = Router(owner_ids, rules)
        self.poll_timeout = poll_timeout
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def admit_raw(self, raw_updates: Sequence[object]) -> BatchResult:
        """Parse each update alone, then admit the whole batch in one transaction (raises StoreError on failure)."""
        parsed = [(raw.get("update_id") if isinstance(raw, dict) else None, parse(raw, self.bot))
                  for raw in raw_updates]
        return await self.admit_parsed(parsed)

    async def admit_parsed(self, parsed: Sequence[tuple[int | None, Update | None]]) -> BatchResult:
        return await self.store.atomic(lambda tx: self.router.route(tx, parsed))

    async def after_commit(self, result: BatchResult) -> None:
        """Answer button presses (the spinner): best effort, after the commit."""
        for press, pressed in result.presses:
            await self.sender.answer_callback(press.callback_id, pressed.answer)

    async def fetch(self, offset: int | None, timeout: int) -> list[tuple[int | None, Update | None]]:
        """One `getUpdates` call, parsed update by update. PTB's own get_updates parses the batch at once: one
        malformed update raises for all of them, and PTB then logs the raw batch, message texts included."""
        kwargs: dict = {"timeout": timeout, "allowed_updates": ALLOWED_UPDATES}
        if offset is not None:
            kwargs["offset"] = offset
        with warnings.catch_warnings():   # PTB suggests get_updates for this endpoint: see the docstring
            warnings.simplefilter("ignore")
            raw = await self.bot.do_api_request("getUpdates", api_kwargs=kwargs, read_timeout=timeout + 10)
        return [(r.get("update_id") if isinstance(r, dict) else None, parse(r, self.bot)) for r in raw or []]

    async def poll(self, *, drain: bool = False) -> None:
        """Long polling. With `drain`, stops after the first empty batch."""
        offset: int | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                parsed = await self.fetch(offset, 0 if drain else self.poll_timeout)
            except Conflict as exc:
                raise IngressStopped(
                    "Telegram says another program is polling this bot token (409 Conflict). shopbot never fights "
                    "it: stop the other poller (only one may run per token), then start shopbot again.") from exc
            except InvalidToken as exc:
                raise IngressStopped("Telegram refused the bot token: check TELEGRAM_BOT_TOKEN.") from exc
            except RetryAfter as exc:        # flood control on getUpdates: wait as told, nothing was confirmed
                delay = retry_after_seconds(exc)
                log.warning("getUpdates flood control: waiting %.1f s", delay)
                await self._sleep(delay)
                continue
            except NetworkError as exc:
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                log.warning("getUpdates failed (%s); retrying in %.1f s", type(exc).__name__, delay)
                await self._sleep(delay)
                continue
            failures = 0
            if not parsed:
                if drain:
                    return
                continue
            faults.reached("K1")
            try:
                result = await self.admit_parsed(parsed)
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
