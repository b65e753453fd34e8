"""The delivery relay (C7): takes due deliveries in order, commits `sending` before each HTTP call, and records
an honest outcome after it. It never resends an unknown part by itself; it tells the owner once instead (C8).

One HTTP call per part; the network never sits inside a transaction. A look (`take_due`) marks up to `in_flight`
due parts `sending` in one transaction, each of a different chat and each with a token pacing lets go now, and
their calls go out at once; their receipts ride in the next look's commit. One per chat, so a chat's messages
still arrive in order; a report's next part waits for its earlier one's receipt.
Wakes on new reports (an in-process signal), on the earliest not-before time, when pacing lets a held send go
(token buckets per chat and over all chats, bot/relays/pacing.py), and once a second to notice commits made by
other processes (a CLI resolution).

Under the `relay` leader lease (C16, `lease`: a bot.leadership.Leader) it is the one sender: `sending` is committed
with the lease's fence and names the lease as the part's sender, and the lease's age is checked in-process right
before each send, after `sending` committed; a relay that cannot know its lease is current sends nothing (the part
stays `sending` until its sender's lease has lapsed, then becomes unknown). What no check can close is the moment
between that check and the request's bytes leaving: a relay frozen exactly there and resumed after a takeover may
still send once (each part of a look that the pause caught there), and the owner may then get a part twice, each
copy carrying its report id (docs/reliability.md).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.leadership import held
from bot.relays.notices import announce_unknowns
from bot.relays.pacing import Pacer, PacingSettings
from bot.relays.render import render_part
from bot.relays.sender import OutcomeKind, SendOutcome
from store import Ask, Delivery, Fence, Lease, LeaseLost, PartStopped, Store, StoreError, Taken, faults, retry_delay

log = logging.getLogger("shopbot.relay")


class Transport(Protocol):
    """What the relay needs from Telegram: one send, one HTTP request, never retried inside (`TelegramSender` is
    one; the benchmarks and tests bring their own)."""

    async def send(self, chat_id: int, text: str, asks: Sequence[Ask] = (), *,
                   reply_to: int | None = None) -> SendOutcome:
        """`text` is HTML (bot/relays/render.py); `asks` what it asks the owner (rendered as its buttons);
        `reply_to` the owner's message it answers."""

    async def edit(self, chat_id: int, message_id: int, text: str, asks: Sequence[Ask] = ()) -> SendOutcome:
        """Replace a message the bot sent (a card) in place: one request, the same outcomes as `send`."""

    async def send_photo(self, chat_id: int, photo: bytes, caption: str) -> SendOutcome:
        """A report's photo part (the weekly review's chart) with its HTML caption: one request, the same outcomes."""


@dataclass
class RelaySettings:
    chat_pace_s: float = 1.0          # a chat's bucket refills one message per this long (Telegram: about 1/s); 0: off
    global_per_s: int = 30            # the global bucket refills this many a second (Telegram: about 30); 0: off
    chat_burst: int = 3               # messages one chat may get at once before its pace applies
    global_burst: int = 30            # messages over all chats at once before the global rate applies
    not_sent_retry_s: float = 2.0     # a request that never left the machine is tried again after this long
    batch: int = 20
    # Parts of different chats sent at once (one look marks them all `sending`). Kept well under the bot's pool
    # of 8 connections (producers/telegram/client.py), which typing, drafts and reactions share; more in flight
    # would also turn more parts `unknown` when the process dies mid-send.
    in_flight: int = 4


class Relay:
    def __init__(self, store: Store, transport: Transport, allowed: Callable[[int], bool],
                 settings: RelaySettings | None = None, lease: Lease | None = None) -> None:
        self.lease = lease
        self.store = store
        self.transport = transport
        self.allowed = allowed
        self.settings = settings or RelaySettings()
        s = self.settings
        self.pacer = Pacer(PacingSettings(s.chat_pace_s, s.chat_burst, s.global_per_s, s.global_burst))
        self._carry: list[tuple[int, str]] = []         # receipts not yet committed
        self._empty: Taken | None = None                # the last look's answer when it found nothing due
        self._stop = asyncio.Event()
        self.sent = 0

    def stop(self) -> None:
        self._stop.set()
        self.store.signals.deliveries.notify()

    def _paced(self, now: float) -> list[int]:
        """Chats whose bucket has no token now (bot/relays/pacing.py): left out of the next query."""
        return self.pacer.blocked_chats(now)

    def pace_delay(self, now: float) -> float | None:
        """Seconds until pacing lets a held send go (a chat's bucket or the global one refills); None: none held."""
        return self.pacer.next_ready(now)

    def _held(self) -> Fence | None:
        return held(self.lease, "relay")

    async def run(self) -> None:
        failures = 0
        self._carry = []         # receipts from an earlier term: those parts are swept to unknown, never confirmed late
        while not self._stop.is_set():
            try:
                await self._run()
            except LeaseLost:
                raise                # the lease is gone: this relay stops at once (bot/leadership.py demotes)
            except StoreError as exc:
                # a full, busy or unreadable database: said loudly, waited out, never a dead relay. A part whose
                # outcome could not be recorded stays `sending` and becomes `unknown` at the next start.
                failures += 1
                delay = retry_delay(failures)
                log.error("relay cannot use the database (%s); trying again in %.1f s", exc, delay)
                await self.store.signals.deliveries.wait(delay)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        await announce_unknowns(self.store)
        while not self._stop.is_set():
            if await self.deliver_due(loop.time) >= self.settings.batch:
                continue               # a full batch: more may be due at once
            timeout = 1.0
            # the look that found nothing due says when the next held part is (read in its transaction); a round
            # ended by pacing instead waits for pacing, which no held part can go before
            wake = self._empty.next_wake if self._empty is not None else None
            if wake is not None:
                timeout = min(timeout, max(0.0, (wake - self.store.clock.now()).total_seconds()))
            paced = self.pace_delay(loop.time())
            if paced is not None:
                timeout = min(timeout, paced)
            await self.store.signals.deliveries.wait(timeout)

    async def drain(self) -> int:
        """Send every delivery that is due now, waiting out per-chat pacing; returns the parts handled."""
        loop = asyncio.get_running_loop()
        handled = 0
        await announce_unknowns(self.store)
        while True:
            n = await self.deliver_due(loop.time)
            handled += n
            if n:
                continue
            if not await self.store.due_deliveries(1):
                return handled
            await asyncio.sleep(self.pace_delay(loop.time()) or 0.05)   # only pacing holds them: wait it out

    async def deliver_due(self, monotonic: Callable[[], float]) -> int:
        """Send due deliveries, up to a batch, one HTTP call each, as far as pacing allows now; never sleeps (the
        caller waits `pace_delay`). Each look reads and marks `sending` in one transaction (`take_due`) up to
        `in_flight` parts of chats pacing lets through, and commits the receipts of the parts sent before it (one
        commit per look); the last receipts ride in the look that finds nothing more due, or are committed alone
        when pacing holds the rest."""
        handled = 0
        self._empty = None
        while handled < self.settings.batch and not self._stop.is_set():
            limit = min(self.settings.in_flight, self.settings.batch - handled)
            room = self.pacer.global_room(monotonic())
            if room is not None:
                limit = min(limit, room)
            if limit <= 0:
                break
            parts = await self._take(monotonic, limit)
            if not parts:
                break
            await self._deliver_all(parts, monotonic)
            handled += len(parts)
        await self._flush()
        return handled

    async def _take(self, monotonic: Callable[[], float], limit: int) -> tuple[Delivery, ...]:
        """The next due parts of chats pacing lets through, now `sending`, with the receipts carried so far."""
        carry, self._carry = self._carry, []
        try:
            taken = await self.store.take_due(self._paced(monotonic()), confirms=carry, fence=self._held(),
                                              refuse=lambda chat_id: not self.allowed(chat_id), limit=limit)
        except LeaseLost:
            await self._confirm(carry)    # those parts were confirmed by Telegram: their guarded moves stay true
            raise
        for denied in taken.denied:
            log.warning("delivery denied report_id=%s chat=%s", denied.report_id, denied.chat_id)
        if not taken.deliveries:
            self._empty = taken
        return taken.deliveries

    async def _deliver_all(self, parts: Sequence[Delivery], monotonic: Callable[[], float]) -> None:
        """Send the parts of one look at once. Every outcome is recorded before the first error is raised, and the
        receipts of the parts that went out are committed first: a relay stopped by one part's error (a refused
        token) must not leave the others `sending`, to be asked about as `unknown` after they arrived."""
        if len(parts) == 1:     # a reply's usual look: awaited directly, no task for gather to make on its path
            await self.deliver(parts[0], monotonic)
            return
        outcomes = await asyncio.gather(*(self.deliver(part, monotonic) for part in parts), return_exceptions=True)
        errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if errors:
            with contextlib.suppress(StoreError):     # the database failing too: the error to raise is the first
                await self._flush()
            raise errors[0]

    async def _flush(self) -> None:
        carry, self._carry = self._carry, []
        await self._confirm(carry)

    async def _confirm(self, receipts: Sequence[tuple[int, str]]) -> None:
        """Receipts committed outside a look: one commit on SQLite (its writes group), concurrent transactions on
        PostgreSQL."""
        if receipts:
            await asyncio.gather(*(self.store.mark_confirmed(*receipt) for receipt in receipts))

    async def deliver(self, delivery: Delivery, monotonic: Callable[[], float] = lambda: 0.0) -> str:
        """Send one part `take_due` marked `sending`, and record the outcome."""
        faults.reached("K7")
        self._held()                  # right before the send: the lease still current as far as this process knows
        self.pacer.take(delivery.chat_id, monotonic())
        try:
            html = render_part(delivery.text, delivery.report_id)
            if delivery.photo is not None:        # a photo part: the same states and outcomes as a message
                outcome = await self.transport.send_photo(delivery.chat_id, delivery.photo, html)
            elif delivery.edit_of is not None:    # a card edited in place: a delivery of its own, same outcomes
                outcome = await self.transport.edit(delivery.chat_id, delivery.edit_of, html, delivery.asks)
            else:
                outcome = await self.transport.send(delivery.chat_id, html, delivery.asks, reply_to=delivery.reply_to)
        except asyncio.CancelledError:
            # Shutdown while the request may be on the wire: that is exactly `unknown`.
            await asyncio.shield(self.store.mark_unknown(delivery.delivery_id, "stopped while sending"))
            raise
        if outcome.kind is OutcomeKind.RETRY_LATER:      # 429: the chat, and every send, wait out retry_after
            self.pacer.flood(delivery.chat_id, outcome.retry_after or 1.0, monotonic())
        return await self.record(delivery, outcome)

    async def record(self, delivery: Delivery, outcome: SendOutcome) -> str:
        ident = f"report_id={delivery.report_id} part={delivery.part}/{delivery.parts}"
        if outcome.kind is OutcomeKind.CONFIRMED:
            faults.reached("K20" if delivery.photo is not None else "K8")
            self._carry.append((delivery.delivery_id, outcome.receipt or ""))   # committed by the next look
            self.sent += 1
            log.info("delivered %s message_id=%s", ident, outcome.receipt)
        elif outcome.kind is OutcomeKind.NOT_SENT:
            await self.store.mark_not_sent(delivery.delivery_id, outcome.reason, self.settings.not_sent_retry_s)
            log.warning("not sent, will retry %s: %s", ident, outcome.reason)
        elif outcome.kind is OutcomeKind.RETRY_LATER:
            await self.store.mark_not_sent(delivery.delivery_id, outcome.reason, outcome.retry_after or 1.0)
            log.warning("flood control %s: retry after %s s", ident, outcome.retry_after)
        elif outcome.kind is OutcomeKind.FAILED:
            await self.store.mark_failed(delivery.delivery_id, outcome.reason)
            log.warning("delivery refused %s: %s", ident, outcome.reason)
        elif outcome.kind is OutcomeKind.UNKNOWN:
            await self._flush()
            await self.store.mark_unknown(delivery.delivery_id, outcome.reason)
            log.warning("delivery unknown %s: %s (never resent without a decision)", ident, outcome.reason)
            await announce_unknowns(self.store)
        elif outcome.kind is OutcomeKind.CONFIG_FAULT:
            await self.store.mark_not_sent(delivery.delivery_id, outcome.reason)
            raise PartStopped("relay", f"Telegram refused the bot token ({outcome.reason}); fix TELEGRAM_BOT_TOKEN and "
                               "restart. Deliveries are kept.")
        return outcome.kind
