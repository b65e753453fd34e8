"""The receipt relay (C19): sets the reaction that tells the owner a message was stored.

A receipt row is written in the message's admission transaction (producers/telegram/routing.py); this relay, never
the ingress, sets it with `setMessageReaction`. Setting a reaction is idempotent (a bot has one reaction per message;
setting the same one again changes nothing), so unlike a message's delivery (C7) an outcome that may or may not
have reached Telegram is simply tried again, and a crash between the commit and the call (K19) only delays it:
after a restart the receipt is still pending and is set. A definite refusal (400, 403) or the attempt cap fails it.

It runs beside the report relay under the same `relay` leader lease, in its own task: a reply never waits behind a
receipt, and a receipt, committed before the turn that answers its message can even be claimed, is normally on the
owner's phone first.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from bot.relays.sender import OutcomeKind, SendOutcome
from store import Receipt, Store, StoreError, faults, retry_delay

log = logging.getLogger("shopbot.receipts")

MAX_ATTEMPTS = 20          # then the receipt is failed (the answer still comes: a receipt is only a hint of storage)
RETRY_S = 2.0              # an unknown or unsent attempt is tried again after this long
CONFIG_RETRY_S = 30.0      # a refused bot token: the report relay stops and says so; receipts wait
LOOK_S = 1.0               # a look (a read) at least this often, however many receipts are handed over


class Reacts(Protocol):
    async def react(self, chat_id: int, message_id: int, emoji: str) -> SendOutcome: ...


class ReceiptRelay:
    def __init__(self, store: Store, sender: Reacts, allowed: Callable[[int], bool], *, batch: int = 20) -> None:
        self.store = store
        self.sender = sender
        self.allowed = allowed
        self.batch = batch
        self._stop = asyncio.Event()
        self.set = 0
        self.more = False          # the last look found a full batch: look again at once
        self.next_wake: datetime | None = None   # read with the last look: the earliest not-before still to come
        self._looked_at = float("-inf")          # when the last look (a read) began, on the loop's clock

    def stop(self) -> None:
        self._stop.set()
        self.store.signals.receipts.notify()

    async def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                handled = await self.set_due()
                failures = 0
                if handled and self.more:
                    continue
                timeout = 1.0
                if self.next_wake is not None:
                    timeout = min(timeout, max(0.0, (self.next_wake - self.store.clock.now()).total_seconds()))
            except StoreError as exc:
                failures += 1
                timeout = retry_delay(failures)
                log.error("receipt relay cannot use the database (%s); trying again in %.1f s", exc, timeout)
            await self.store.signals.receipts.wait(timeout)

    async def drain(self) -> int:
        """Set every receipt due now (`run --drain`, the demo), their sets stored before it returns; returns how
        many were tried."""
        total = 0
        while n := await self.set_due():
            total += n
        await self.store.flush_held()
        return total

    async def set_due(self) -> int:
        """Set the receipts due now, one by one. Those this process's admissions just wrote are handed over
        (`fresh_receipts`) and need no read; else, and at least once a second, a look is one read (the next
        wake-up time read with it). A set is no commit of its own (`hold_set`: stored with the next commit that
        writes anyway). So the relay's store work never queues ahead of a turn's claim or finish, and its HTTP call
        is made while the claim commits. Returns how many were tried."""
        now = asyncio.get_running_loop().time()
        fresh = self.store.fresh_receipts()      # taken even when a look follows: the look finds them
        if fresh and now - self._looked_at < LOOK_S:
            due, self.more = fresh, False
        else:
            self._looked_at = now
            look = await self.store.due_receipts_or_wake(self.batch)
            due, self.more, self.next_wake = list(look.due), len(look.due) >= self.batch, look.next_wake
        handled = 0
        for receipt in due:
            if self._stop.is_set():
                break
            await self.set_one(receipt)
            handled += 1
        return handled

    async def set_one(self, receipt: Receipt) -> OutcomeKind | None:
        """Set one receipt and record the outcome (a set is held, to ride along with the next commit)."""
        ident = f"chat={receipt.chat_id} message_id={receipt.message_id}"
        if not self.allowed(receipt.chat_id):          # C3 at send time, as for replies
            await self.store.receipt_failed(receipt.receipt_id, "the chat is no longer allow-listed (C3)")
            return None
        faults.reached("K19")
        outcome = await self.sender.react(receipt.chat_id, receipt.message_id, receipt.emoji)
        kind = outcome.kind
        if kind is OutcomeKind.CONFIRMED:
            self.store.hold_set(receipt.receipt_id)
            self.set += 1
            log.info("receipt set %s", ident)
        elif kind is OutcomeKind.FAILED:
            await self.store.receipt_failed(receipt.receipt_id, outcome.reason)
            log.warning("receipt refused %s: %s", ident, outcome.reason)
        elif receipt.attempts + 1 >= MAX_ATTEMPTS:
            await self.store.receipt_failed(receipt.receipt_id, f"gave up after {MAX_ATTEMPTS} attempts: "
                                            f"{outcome.reason}")
            log.warning("receipt given up %s: %s", ident, outcome.reason)
        else:
            # not sent, 429 or unknown: tried again (idempotent: an unknown one that did reach Telegram is set twice
            # to the same reaction, which changes nothing)
            wait = (outcome.retry_after or RETRY_S) if kind is OutcomeKind.RETRY_LATER else (
                CONFIG_RETRY_S if kind is OutcomeKind.CONFIG_FAULT else RETRY_S)
            await self.store.receipt_retry(receipt.receipt_id, outcome.reason, wait)
            log.info("receipt %s %s, tried again in %.1f s: %s", kind, ident, wait, outcome.reason)
        return kind
