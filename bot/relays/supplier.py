"""The action relay (C11): delivers approved actions to the supplier outside any transaction, with the same
idempotency key on every attempt; `sending` is committed first. An unknown action is reconciled by asking the
supplier about its key, never blindly resent. Malformed or unauthorised actions are quarantined, never sent.
The owner hears the outcome of each action through the report outbox.

Under the `actions` leader lease (C16, `lease`: a bot.leadership.Leader) it is the one action relay: `sending` is
committed with the lease's fence and names it as the action's sender, and the lease's age is checked right before
each request; an action whose sender's lease lapsed while it was `sending` becomes unknown and is reconciled by its
key (a repeat is harmless: the supplier drops a repeated idempotency key).

C21: nothing the supplier answers stops the relay. The adapter bounds every call (bot/relays/supplier_client.py);
here any exception while handling one action is caught with that action, logged once, and the action is held after
`attempt_cap` failures (quarantined while it was never sent; unknown, for the operator's decision, once it may
have been). `stop()` cancels a call in flight, so a stop never waits on a slow supplier."""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections import Counter
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from bot.leadership import held
from bot.relays.supplier_client import ActionOutcomeKind, LookupKind, SupplierAdapter
from producers.telegram.owner import edit_order_card
from store import Action, ActionMove, ActionState, Fence, Lease, LeaseLost, Store, StoreError, faults, retry_delay

log = logging.getLogger("shopbot.actions")
T = TypeVar("T")


class Stopped(Exception):
    """`stop()` cancelled a supplier call in flight."""


ALLOWED_PAYLOAD_FIELDS = {"supplier", "reference", "lines"}
ALLOWED_LINE_FIELDS = {"item", "quantity"}


def validate(action: Action, known_destinations: set[str]) -> str | None:
    """Why an action must be quarantined, or None: unknown destination, a payload outside the allowed fields."""
    if action.destination not in known_destinations:
        return f"unknown destination {action.destination!r}"
    try:
        payload = json.loads(action.payload)
    except ValueError:
        return "the payload is not JSON"
    if not isinstance(payload, dict) or set(payload) - ALLOWED_PAYLOAD_FIELDS:
        return f"payload fields outside {sorted(ALLOWED_PAYLOAD_FIELDS)}"
    lines = payload.get("lines")
    if not isinstance(lines, list) or not lines:
        return "the payload has no order lines"
    for line in lines:
        if (not isinstance(line, dict) or set(line) != ALLOWED_LINE_FIELDS or not isinstance(line["item"], str)
                or not isinstance(line["quantity"], int) or isinstance(line["quantity"], bool)
                or line["quantity"] <= 0):
            return f"malformed order line {line!r}"
    return None


class ActionRelay:
    def __init__(self, store: Store, adapter: SupplierAdapter, destinations: set[str], owner_chat: str | None, *,
                 retry_s: float = 5.0, reconcile_every_s: float = 5.0, lease: Lease | None = None,
                 attempt_cap: int = 3) -> None:
        self.lease = lease        # a bot.leadership.Leader, or None (drain, tests): unfenced
        self.store = store
        self.adapter = adapter
        self.destinations = destinations
        self.owner_chat = owner_chat
        self.retry_s = retry_s
        self.reconcile_every_s = reconcile_every_s
        self.attempt_cap = attempt_cap
        self._stop = asyncio.Event()
        self._inflight: asyncio.Future[Any] | None = None
        self._failures: Counter[int] = Counter()   # action_id -> exceptions while handling it (this process)
        self._held_ids: set[int] = set()           # unknown actions whose lookups broke C21: not asked again
        self._said: dict[int, str] = {}            # the last "still unknown" reason logged per action
        self._phase = "pending"                    # how far the action in hand got (what a failure means)

    def stop(self) -> None:
        self._stop.set()
        if self._inflight is not None:
            self._inflight.cancel()                # a supplier call in flight ends now (K21)
        self.store.signals.actions.notify()

    async def _outside(self, call: Awaitable[T]) -> T:
        """A supplier call that `stop()` can cancel; raises Stopped when it did."""
        if self._stop.is_set():
            if inspect.iscoroutine(call):
                call.close()                   # never started: closed, so no "never awaited" warning
            raise Stopped()
        inflight = asyncio.ensure_future(call)
        self._inflight = inflight
        try:
            return await inflight
        except asyncio.CancelledError:
            if self._stop.is_set() and inflight.cancelled():
                current = asyncio.current_task()
                if current is None or not current.cancelling():
                    raise Stopped() from None
            raise
        finally:
            self._inflight = None

    async def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                await self._run()
            except LeaseLost:
                raise                # the lease is gone: this relay stops at once (bot/leadership.py demotes)
            except Stopped:
                return
            except StoreError as exc:       # said loudly and waited out; an action found `sending` is reconciled
                failures += 1
                delay = retry_delay(failures)
                log.error("action relay cannot use the database (%s); trying again in %.1f s", exc, delay)
                await self.store.signals.actions.wait(delay)

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.store.expire_proposals()
            await self.reconcile()
            handled = await self.deliver_due()
            if handled:
                continue
            timeout = self.reconcile_every_s if await self.store.unknown_actions() else 1.0
            wake = await self.store.next_action_time()
            if wake is not None:
                timeout = min(timeout, max(0.0, (wake - self.store.clock.now()).total_seconds()))
            await self.store.signals.actions.wait(timeout)

    async def drain(self) -> int:
        await self.reconcile()
        handled = 0
        while n := await self.deliver_due():
            handled += n
            await self.reconcile()
        return handled

    async def deliver_due(self) -> int:
        due = await self.store.due_actions()
        for action in due:
            if self._stop.is_set():
                break
            await self._guarded(action, self.deliver)
        return len(due)

    async def _guarded(self, action: Action, handle: Any) -> None:
        """C21: one action's handling; an exception stays with that action (logged once, counted, the action held
        after `attempt_cap` of them), never ends the relay. The database's own faults and a stop pass through."""
        self._phase = "pending" if action.state is ActionState.PENDING else "unknown"
        try:
            await handle(action)
        except (LeaseLost, StoreError, Stopped, asyncio.CancelledError):
            raise
        except Exception as exc:
            self._failures[action.action_id] += 1
            count = self._failures[action.action_id]
            reason = f"an error while handling it ({type(exc).__name__})"
            log.error("action handling failed action_id=%s (%d of %d): %s: %s", action.action_id, count,
                      self.attempt_cap, type(exc).__name__, str(exc)[:300])
            if self._phase == "sending":        # the request may have reached the supplier: reconcile by key
                await self.store.action_move(ActionMove.MARK_UNKNOWN, action.action_id, reason)
            elif count >= self.attempt_cap and self._phase == "pending":
                await self._quarantine(action, f"{reason}, {count} times")
            elif count >= self.attempt_cap and self._phase == "unknown":
                self._held_ids.add(action.action_id)
                await self._tell(action, "unknown", f"I could not confirm order #{action.proposal_id} with the "
                                 f"supplier ({reason}). Please check with them; the operator decides it "
                                 "(`shopbot actions`).")

    async def _quarantine(self, action: Action, problem: str) -> None:
        await self.store.action_move(ActionMove.QUARANTINE, action.action_id, problem)
        log.error("action quarantined action_id=%s: %s", action.action_id, problem)
        await self._tell(action, "quarantined",
                         f"Order #{action.proposal_id} was held back and not sent: {problem}. "
                         "The operator can release or void it (`shopbot actions --quarantined`).")

    async def deliver(self, action: Action) -> str:
        self._phase = "pending"
        problem = validate(action, self.destinations)
        if problem:
            await self._quarantine(action, problem)
            return "quarantined"
        await self.store.action_move(ActionMove.MARK_SENDING, action.action_id, fence=self._held())
        self._phase = "sending"
        faults.reached("K9")
        self._held()                  # right before the request: the lease still current as far as we know
        try:
            outcome = await self._outside(self.adapter.place(action.idempotency_key, json.loads(action.payload)))
        except (asyncio.CancelledError, Stopped):
            await asyncio.shield(self.store.action_move(ActionMove.MARK_UNKNOWN, action.action_id,
                                                        "stopped while sending"))
            self._phase = "done"
            raise
        self._phase = "done" if outcome.kind is not ActionOutcomeKind.NOT_SENT else "sending"
        if outcome.kind is ActionOutcomeKind.DELIVERED:
            faults.reached("K10")
            await self.store.action_move(ActionMove.MARK_DELIVERED, action.action_id, outcome.receipt)
            log.info("action delivered action_id=%s order=%s", action.action_id, outcome.receipt)
            await self._tell(action, "delivered", f"Order #{action.proposal_id} is confirmed by the supplier "
                             f"(their order id {outcome.receipt}).")
        elif outcome.kind is ActionOutcomeKind.NOT_SENT:
            delay = outcome.retry_after or self.retry_s
            not_before = self.store.clock.now() + timedelta(seconds=delay)
            await self.store.action_move(ActionMove.MARK_NOT_SENT, action.action_id, not_before, outcome.reason)
            log.warning("action not sent action_id=%s: %s; retry in %.0f s", action.action_id, outcome.reason, delay)
        elif outcome.kind is ActionOutcomeKind.FAILED:
            await self.store.action_move(ActionMove.MARK_FAILED, action.action_id, outcome.reason)
            log.error("action failed action_id=%s: %s", action.action_id, outcome.reason)
            await self._tell(action, "failed", f"Order #{action.proposal_id} failed: {outcome.reason}. Nothing was "
                             "ordered and the spending was released.")
        elif outcome.held:
            await self.store.action_move(ActionMove.MARK_UNKNOWN, action.action_id, outcome.reason)
            self._hold(action, outcome.reason)
            await self._tell(action, "unknown", f"Order #{action.proposal_id} may have reached the supplier, but "
                             f"{outcome.reason}. Please check with them; the operator decides it (`shopbot actions`).")
        else:
            await self.store.action_move(ActionMove.MARK_UNKNOWN, action.action_id, outcome.reason)
            log.warning("action unknown action_id=%s: %s (reconciling by key, never resent blindly)",
                        action.action_id, outcome.reason)
        return outcome.kind

    def _hold(self, action: Action, reason: str) -> None:
        """An answer that broke C21 after the supplier may have taken the order: unknown, left to the operator
        (never resent blindly, C11) and not asked about again by this process."""
        self._held_ids.add(action.action_id)
        log.error("action held for the operator action_id=%s: %s", action.action_id, reason)

    def _held(self) -> Fence | None:
        return held(self.lease, "actions")

    async def reconcile(self) -> None:
        """Ask the supplier about every unknown action's key: found -> delivered; absent -> sent again with the same
        key; no answer -> asked again later."""
        for action in await self.store.unknown_actions():
            if action.action_id not in self._held_ids:
                await self._guarded(action, self._reconcile_one)

    async def _reconcile_one(self, action: Action) -> None:
        if not self.adapter.can_lookup and self.adapter.drops_repeated_keys:
            # the supplier declares it drops a repeated key: sending again cannot order twice
            await self.store.decide_action(action.action_id, "resend", "system:idempotent supplier",
                                           detail="the supplier drops repeated keys: sending it again")
            return
        if not self.adapter.can_lookup:
            await self._tell(action, "unknown", f"I could not confirm order #{action.proposal_id} with the "
                             "supplier. Please check with them before ordering again.")
            return
        found = await self._outside(self.adapter.lookup(action.idempotency_key))
        if found.kind is LookupKind.FOUND:
            await self.store.decide_action(action.action_id, "reconciled_found", "system:reconciliation",
                                           receipt=found.receipt, detail="the supplier has the order")
            log.info("action reconciled action_id=%s: delivered as %s", action.action_id, found.receipt)
            await self._tell(action, "delivered", f"Order #{action.proposal_id} is confirmed by the supplier "
                             f"(their order id {found.receipt}).")
        elif found.kind is LookupKind.ABSENT:
            await self.store.decide_action(action.action_id, "reconciled_absent", "system:reconciliation",
                                           detail="the supplier has no order with this key: sending it again")
            log.info("action reconciled action_id=%s: absent at the supplier, sending again", action.action_id)
        elif found.held:
            self._hold(action, found.reason)
            await self._tell(action, "unknown", f"I could not confirm order #{action.proposal_id} with the "
                             f"supplier: {found.reason}. Please check with them; the operator decides it "
                             "(`shopbot actions`).")
        elif self._said.get(action.action_id) != found.reason:     # logged once, not at every reconcile round
            self._said[action.action_id] = found.reason
            log.warning("action still unknown action_id=%s: %s", action.action_id, found.reason)

    async def _tell(self, action: Action, outcome: str, text: str) -> None:
        """The outcome as a new message (the owner must notice it), and on the order's card, edited in place."""
        if self.owner_chat:
            await self.store.notice(f"action:{action.action_id}", outcome, text, self.owner_chat)
        await self.store.atomic(lambda tx: edit_order_card(tx, action.proposal_id, text, outcome))
