"""The worker: claim a turn (C5), run the agent loop on it, finish with its report in one transaction (C6).

Transient model failures release the turn with backoff (C9); a refusal of this request fails it with an
explanation; a fault of the configuration stops the worker with the turn left pending (C7, last paragraph).
Work arrives by an in-process wake-up from admissions, and from other processes through `poll_changes` (SQLite's
`PRAGMA data_version`) checked once a second; on PostgreSQL another process's commit also wakes it at once through
LISTEN/NOTIFY (store/postgres/notify.py), a hint the once-a-second look backs up. An idle worker does nothing else,
but before it waits it offers a free slot's claim to this process's next admission (`Store.offer_claim`,
store/offers.py): an owner's message admitted then is claimed, its set-up read, in the admission's own commit, and
the worker starts the turn when it wakes with no database call before the model's set-up (C5 holds: that commit
returned before the model runs).
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from store import (
    Ask,
    Claim,
    Claimed,
    ClaimOffer,
    CountRequest,
    NotClaimed,
    Occurrence,
    OrderState,
    PartStopped,
    Policy,
    Proposal,
    ProposalState,
    Renewal,
    ReportDraft,
    Store,
    StoreError,
    Transaction,
    WorkKind,
    asks,
    faults,
    retry_delay,
    telegram_chat,
)
from worker import history as conversation
from worker.agent_loop import Limits, UnusableAnswer, run_agent
from worker.models.base import Model, ModelConfigFault, ModelRefused, ModelTransient, RefusalReason
from worker.money import ShopFormat
from worker.ordering import OrderingSettings
from worker.prompts import ShopContext, build_system
from worker.proposals import card_body, proposal_message
from worker.review import WEEKLY_REVIEW, ask_setting, weekly_review
from worker.till_counts import till_report
from worker.tools.insight import insight_tools
from worker.tools.shop import TurnContext, shop_registry

log = logging.getLogger("shopbot.worker")

DEFAULT_BACKOFF = (30.0, 120.0, 600.0)   # seconds before attempt 2, 3, ... of a transiently failed turn
PAUSE_AFTER = 3                          # consecutive transient model failures before claiming pauses


class _K4Model:
    """Wraps the model so that the fault point K4 sits inside the model call. Only while K4 is armed does the call
    run as a task of its own with a loop pass before the point (so that the request has started when it is
    reached): unarmed, that task and that pass let the loop's other callbacks (a receipt's HTTP call, the next
    getUpdates) run in the middle of a turn that needs no wait, 0.4 ms of a reply in bench.latency."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self.name = getattr(model, "name", "model")

    async def complete(self, system, messages, tools):  # type: ignore[no-untyped-def]
        if not faults.is_armed("K4"):
            return await self._model.complete(system, messages, tools)
        call = asyncio.ensure_future(self._model.complete(system, messages, tools))
        await asyncio.sleep(0)   # the request has started
        faults.reached("K4")
        return await call


class _StoreJournal:
    """The agent loop's journal, committed to the store: started before a tool acts, finished after (K5)."""

    def __init__(self, store: Store, ctx: TurnContext) -> None:
        self.store, self.ctx = store, ctx

    async def started(self, call_id: str, tool: str, arguments: dict[str, Any], effect: str) -> None:
        await self.store.op_started(self.ctx.run_id, call_id, tool, arguments, effect)
        self.ctx.current_call = call_id

    async def finished(self, call_id: str, status: str, result: dict[str, Any]) -> None:
        if call_id not in self.ctx.completed_calls:   # an external tool completes its operation itself (C11)
            await self.store.op_finished(self.ctx.run_id, call_id, status, result)
        faults.reached("K5")


@dataclass
class WorkerSettings:
    worker_id: str = "worker-1"
    # sessions run at once, one turn per session: a long turn (a scheduled brief on a slow model) never holds the
    # owner's question, and the finishes of turns ending together share one SQLite commit (group commit)
    concurrency: int = 4
    limits: Limits = field(default_factory=Limits)
    backoff: Sequence[float] = DEFAULT_BACKOFF
    history_limit: int = 200              # history rows read; the token budget decides what the model sees
    history_tokens: int = 2000            # SHOPBOT_HISTORY_TOKENS
    supplier: str = "supplier"
    currency: str = "USD"
    locale: str = "en_US"
    shop_name: str = "the shop"
    hours: tuple[tuple[str, str], ...] = ()
    schedules: tuple[tuple[str, str], ...] = ()   # (name, cron), told to the model
    notice_destination: str | None = None   # the owner's chat for the worker's own notices and proposals
    shop_timezone: str = "UTC"
    order_max_cents: int | None = None
    day_max_cents: int | None = None
    proposal_expiry_s: float = 24 * 3600
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()   # the shop file's other names per item
    lead_time_days: int = 3                                  # the supplier's (reorder suggestions)
    ordering: OrderingSettings = field(default_factory=OrderingSettings)   # the shop file's [ordering]

    def fmt(self) -> ShopFormat:
        return ShopFormat(self.currency, self.locale, self.shop_timezone)

    def policy(self, now: datetime) -> Policy:
        return Policy(self.supplier, self.order_max_cents, self.day_max_cents,
                      day=now.astimezone(ZoneInfo(self.shop_timezone)).date().isoformat(),
                      expires_at=now + timedelta(seconds=self.proposal_expiry_s))


class Worker:
    def __init__(self, store: Store, model: Model, settings: WorkerSettings | None = None, *,
                 on_turn: Callable[[Claim], AbstractAsyncContextManager[object]] | None = None,
                 on_stock_change: Callable[[], Awaitable[object]] | None = None) -> None:
        self.store = store
        self.model = _K4Model(model)
        self.settings = settings or WorkerSettings()
        self.registry = shop_registry()
        for tool in insight_tools():
            self.registry.register(tool)
        self.on_turn = on_turn            # around the model call, e.g. "typing…": best effort, never the outbox
        self.on_stock_change = on_stock_change   # the stock watcher checks after every stock change
        self.turns_done = 0
        self._consecutive_transient = 0
        self._paused_until: float | None = None
        self._stop = asyncio.Event()
        self._lost: set[str] = set()       # run ids whose lease was lost (C15): nothing more of them is written
        self._looked: dict[str, Claimed] = {}   # run id -> its finish looked for the next turn, found none (when due)
        self._polled_at = float("-inf")    # when poll_changes last ran (loop time)

    def stop(self) -> None:
        self._stop.set()
        self.store.signals.work.notify()

    # ---- loops -----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run until `stop()`; raises PartStopped on a configuration fault."""
        loop = asyncio.get_running_loop()
        active: dict[int, asyncio.Task[Claimed | None]] = {}      # slot -> its chain of turns
        look = True                               # claim only when something may have changed
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    look = await self._step(loop, active, look)
                    failures = 0
                except StoreError as exc:
                    # a full, busy or unreadable database: said loudly, waited out, never a dead worker
                    failures += 1
                    delay = retry_delay(failures)
                    log.error("worker cannot use the database (%s); trying again in %.1f s", exc, delay)
                    await self._wait(delay)
                    look = True
        finally:
            for task in active.values():
                task.cancel()
            for task in active.values():
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    async def _claim(self) -> Claim | None:
        """C5, with the turn's set-up (history, shop) read in the claim's own transaction."""
        return await self.store.claim(self.settings.worker_id, history_limit=self.settings.history_limit)

    async def _wait(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass

    async def _step(self, loop: asyncio.AbstractEventLoop, active: dict[int, asyncio.Task[Claimed | None]],
                    look: bool) -> bool:
        """One pass of the worker loop: collect finished chains, claim while there is room, wait for a reason to
        look again (an admission, a finished turn, a due time, another process's commit). No read precedes a claim
        or a wait: an empty claim, and a finish that found no next turn, carry the next due time (`next_wake`)."""
        looked: list[Claimed] = []         # chains ended by a finish that found no next turn in its own commit
        for slot in [s for s, t in active.items() if t.done()]:
            idle = active.pop(slot).result()   # re-raises PartStopped and bugs: loud, never silent
            if idle is not None:
                looked.append(idle)        # nothing was claimable then; what came since signals: no claim to redo
            else:
                look = True
        paused = self._paused_until is not None and loop.time() < self._paused_until
        if self._paused_until is not None and not paused:
            self._paused_until, look = None, True
        exhausted: Claimed | None = None   # nothing claimable right now, and when something will be
        while look and not paused and len(active) < self.settings.concurrency and not self._stop.is_set():
            claimed = await self.store.claim_or_wake(self.settings.worker_id, history_limit=self.settings.history_limit)
            if claimed.claim is None:
                exhausted = claimed
                break
            slot = next(i for i in range(self.settings.concurrency) if i not in active)
            active[slot] = asyncio.create_task(self._chain(claimed.claim))
        due = exhausted.next_wake if exhausted is not None else (
            _earliest(c.next_wake for c in looked) if looked and not look else None)
        timeout = 1.0
        if due is not None:
            timeout = min(timeout, max(0.0, (due - self.store.clock.now()).total_seconds()))
        # a free slot's claim rides in the next admission's commit (store/offers.py): no claim of its own after it
        offer = None
        if not paused and len(active) < self.settings.concurrency and not self._stop.is_set():
            offer = self.store.offer_claim(self.settings.worker_id, history_limit=self.settings.history_limit)
        started = loop.time()
        try:
            signalled = await self.store.signals.work.wait_or(
                [*active.values(), *([offer.taken] if offer is not None else [])], timeout)
        except BaseException:
            if offer is not None:
                await self._give_back_offer(offer)
            raise
        if offer is not None and (taken := await offer.withdraw()) is not None:
            if self._stop.is_set() or self._paused_until is not None:
                await self._give_back_offer(offer)
            else:                       # the turn starts at once: its claim and set-up came with the admission
                slot = next(i for i in range(self.settings.concurrency) if i not in active)
                active[slot] = asyncio.create_task(self._chain(taken))
            handed = True               # an admission woke it: no look at other processes' commits before the turn
        else:
            handed = False
        changed = False
        if not signalled and not handed and (loop.time() - started >= timeout or
                                             loop.time() - self._polled_at >= 1.0):
            # another process committed (admit, resolve, forget): looked for once a second, never at an in-process
            # wake-up, which claims anyway (no database call between an admission and its claim)
            self._polled_at = loop.time()
            changed = await self.store.poll_changes()
        return signalled or changed or due is not None   # a finished chain is looked at above, on the next pass

    async def _chain(self, claim: Claim | None) -> Claimed | None:
        """Run turns one after another: each finish claims the next due turn in its own commit. When the chain ended
        because its last finish found no next turn, what that finish read of the next due time (the worker need not
        look again at once); else None."""
        looked = None
        while claim is not None and not self._stop.is_set() and self._paused_until is None:
            current = claim
            try:
                claim = await self.run_turn(current)
            except StoreError as exc:
                await self._give_back(current, exc)
                return None
            looked = self._looked.pop(current.run_id, None)
        if claim is not None:   # claimed by the last finish, but we stop or pause: give it back, attempt not counted
            await asyncio.shield(self.store.release(claim, delay_seconds=0, reason="worker stopping", refund=True))
            return None
        return looked

    async def _give_back_offer(self, offer: ClaimOffer) -> None:
        """A claim offered and taken by an admission while this worker stopped, paused or was cancelled: given back
        (the attempt not counted), never lost. A transaction still carrying the offer is waited for."""
        taken = await offer.withdraw()
        if taken is not None:
            await asyncio.shield(self.store.release(taken, delay_seconds=0, reason="worker stopping", refund=True))

    async def _give_back(self, claim: Claim, exc: StoreError) -> None:
        """The database failed during a turn: its result could not be stored. The turn goes back to pending (the
        attempt not counted) as soon as the database takes writes again; until then it stays running, and a
        restart's recovery would release it the same way."""
        log.error("turn run_id=%s could not be stored (%s); giving it back when the database recovers",
                  claim.run_id, exc)
        delay = 0.5
        while not self._stop.is_set():
            try:
                await self.store.release(claim, delay_seconds=0, reason="database unavailable", refund=True)
                return
            except NotClaimed:
                return                      # it was finished or released after all
            except StoreError:
                await self._wait(delay)
                delay = min(30.0, delay * 2)

    async def drain(self) -> int:
        """Run every turn that is due now, one after another, until none is or `stop()`; returns the turns run. A
        stop during a turn cancels it (a model call in flight is abandoned, the turn released, not failed)."""
        count = 0
        claim = await self._claim() if not self._stop.is_set() else None
        while claim is not None:
            claim = await self._unless_stopped(self.run_turn(claim))
            count += 1
            if self._stop.is_set():
                if claim is not None:
                    await self.store.release(claim, delay_seconds=0, reason="worker stopping", refund=True)
                break
            if claim is None:
                claim = await self._claim()
        return count

    async def _unless_stopped(self, turn: Awaitable[Claim | None]) -> Claim | None:
        """The turn's result, or None when `stop()` came first: then the turn is cancelled and has released itself."""
        task = asyncio.ensure_future(turn)
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return None
        return task.result()

    # ---- one turn -----------------------------------------------------------------------------------------------
    async def run_turn(self, claim: Claim) -> Claim | None:
        """Run one turn; returns the next turn when its finish claimed one in the same commit. On a store whose
        claims are leases (C15) the turn runs beside its renewal (`_keep_lease`); a lost lease cancels it and
        nothing more of its run is written."""
        log.info("turn started run_id=%s session=%s work=%s attempt=%d", claim.run_id, claim.session,
                 ",".join(str(i.work_id) for i in claim.items), claim.attempt)
        lease = getattr(self.store, "lease_s", None)
        if not lease:
            return await self._turn(claim)
        turn = asyncio.create_task(self._turn(claim))
        keeper = asyncio.create_task(self._keep_lease(claim, turn, lease))
        try:
            return await turn
        except asyncio.CancelledError:
            if claim.run_id in self._lost and not self._cancelling():
                return None             # the lease was lost: the turn was cancelled and wrote nothing
            raise
        finally:
            keeper.cancel()
            self._lost.discard(claim.run_id)

    @staticmethod
    def _cancelling() -> bool:
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0

    async def _turn(self, claim: Claim) -> Claim | None:
        faults.reached("K3")
        next_claim = None
        try:
            if claim.session.startswith("till:"):
                await self._till_turn(claim)
            elif claim.session == f"clock:{WEEKLY_REVIEW}":
                await self._review_turn(claim)
            else:
                next_claim = await self._agent_turn(claim)
        except NotClaimed as exc:
            log.warning("turn discarded run_id=%s: %s", claim.run_id, exc)
        self.turns_done += 1
        return next_claim

    async def _keep_lease(self, claim: Claim, turn: asyncio.Task[Claim | None], lease: float) -> None:
        """C15: renew the run's lease every third of it, each renewal bounded by that period and never buffered. A
        renewal refused (the lease lapsed), timed out or failed counts as lost: the turn is cancelled and writes
        nothing (no release, no fail); a live process's sweep recovers it after expiry. Not once the run ended by its
        own write (the turn ends by itself), nor while its ending write is in flight: that write's fence judges the
        lease in its own transaction, and a cancellation could only lose what it commits (the next claim)."""
        period = lease / 3
        while not turn.done():
            await asyncio.sleep(period)
            try:
                async with asyncio.timeout(period):   # not wait_for: a cancellation with the answer is kept (3.11)
                    renewal: Renewal | None = await self.store.renew(claim)
                why = "the lease had lapsed"
            except TimeoutError:
                renewal, why = None, f"the renewal took longer than {period:.2f} s"
            except StoreError as exc:
                renewal, why = None, f"the renewal failed ({type(exc).__name__})"
            if renewal is Renewal.ENDED or turn.done():
                return
            if renewal is Renewal.HELD or self.store.ending(claim):
                continue
            self._lost.add(claim.run_id)
            log.error("lease lost run_id=%s: %s; the turn is abandoned and nothing of it is written",
                      claim.run_id, why)
            turn.cancel()
            return

    async def _till_turn(self, claim: Claim) -> None:
        """A till count is applied without a model: stock set and count events recorded inside the finish
        transaction, and a report rendered from the applied counts (for the till's GET)."""
        requests = [CountRequest(item.source, json.loads(item.payload)["counts"]) for item in claim.items]
        faults.reached("K6")
        await self.store.finish_counts(claim, requests, till_report)
        if self.on_stock_change is not None:
            await self.on_stock_change()

    async def _review_turn(self, claim: Claim) -> None:
        """The weekly review (worker/review.py) is written from the records, without a model: its text, its chart as
        the report's photo part, and Apply / Keep under each suggestion it offers, all in the finish transaction."""
        review = await weekly_review(self.store, now=self.store.clock.now(), timezone=self.settings.shop_timezone,
                                     lead_days=self.settings.lead_time_days, settings=self.settings.ordering,
                                     fmt=self.settings.fmt())
        destination = claim.destination
        questions: list[Ask] = []

        def apply(tx: Transaction) -> None:
            questions.clear()            # a finish run again starts afresh (K16)
            if (chat := telegram_chat(destination)) is not None:
                questions.extend(ask_setting(tx, offer, chat) for offer in review.offers)

        faults.reached("K6")
        await self.store.finish(claim, lambda: ReportDraft(review.text, destination=destination, asks=tuple(questions),
                                                           photo=review.chart, caption=review.caption),
                                apply=apply, stop_reason="weekly review written from the records")

    async def _agent_turn(self, claim: Claim) -> Claim | None:
        user_text = "\n".join(item.payload for item in claim.items)
        setup = claim.setup   # read with the claim; not when the claim came back from a lost commit's read-back (K16)
        exchanges = setup.exchanges if setup else await self.store.exchanges(claim.session, self.settings.history_limit)
        history = conversation.fit(conversation.exchanges(exchanges), self.settings.history_tokens)
        allowed = frozenset({claim.session.split(":", 1)[1]}) if claim.session.startswith("stock:") else None
        ctx = TurnContext(self.store, claim.run_id, self.settings.supplier, allowed, self.settings.currency,
                          policy=self.settings.policy(self.store.clock.now()), timezone=self.settings.shop_timezone,
                          locale=self.settings.locale,
                          aliases=dict(self.settings.aliases), lead_time_days=self.settings.lead_time_days,
                          ordering=self.settings.ordering, chat_id=_chat(claim.destination))
        fmt = self.settings.fmt()
        shop = ShopContext(self.settings.shop_name, fmt, self.settings.hours, self.settings.schedules)
        items = list(setup.shop_items) if setup else await self.store.shop_items()
        system, head, context_figures = build_system(shop, items, self.store.clock.now())
        around = self.on_turn(claim) if self.on_turn is not None else contextlib.nullcontext()
        try:
            async with around:          # entered and left without waiting for anything (bot/relays/typing.py)
                result = await run_agent(model=self.model, registry=self.registry, system=system, history=history,
                                         user_text=user_text, journal=_StoreJournal(self.store, ctx), context=ctx,
                                         limits=self.settings.limits, fmt=fmt, context_figures=context_figures,
                                         turn_head=head, shop_words=[i.item for i in items])
        except UnusableAnswer as exc:
            log.warning("model answer unusable run_id=%s: %s", claim.run_id, exc)
            await self.store.fail(claim, ReportDraft(
                "Sorry, the model's answer could not be used: it wrote a tool call as text that could not be run, "
                "twice. It will not be retried; please ask again, perhaps in other words.",
                destination=claim.destination, is_error=True), stop_reason="model answer unusable")
            return None
        except ModelTransient as exc:
            await self._transient(claim, exc)
            return None
        except ModelRefused as exc:
            log.warning("model refused run_id=%s status=%s", claim.run_id, exc.status)
            text = (f"Sorry, the model refused this request ({exc.detail}). It will not be retried; please rephrase it."
                    if exc.reason is not RefusalReason.CONTEXT_WINDOW else
                    "Sorry, this request and its conversation are too long for the model's context window. It will "
                    "not be retried; /forget starts the conversation afresh, or lower SHOPBOT_HISTORY_TOKENS.")
            await self.store.fail(claim, ReportDraft(text, destination=claim.destination, is_error=True),
                                  stop_reason="model refused")
            return None
        except ModelConfigFault as exc:
            await asyncio.shield(self.store.release(claim, delay_seconds=0, reason="model configuration fault",
                                                    refund=True))
            raise PartStopped("worker", f"the model rejected the configuration (status {exc.status}): {exc.detail}. "
                                "Fix SHOPBOT_MODEL / SHOPBOT_MODEL_API_KEY and restart; work is kept pending.") from exc
        except asyncio.CancelledError:
            # Shutdown abandons the model call: the turn goes back without counting this attempt. A lost lease
            # writes nothing: the run is no longer this worker's (C15).
            if claim.run_id not in self._lost:
                await asyncio.shield(self.store.release(claim, delay_seconds=0, reason="shutdown", refund=True))
            raise
        self._consecutive_transient = 0
        faults.reached("K6")
        apply, draft = self._card(claim, result.text, ctx.offers)
        outcome = await self.store.finish(
            claim, draft, user_text=user_text, apply=apply,
            model_said=(result.model_text, conversation.encode(result.exchange)),
            stop_reason=result.stop_reason, usage=(result.model_calls, result.input_tokens, result.output_tokens),
            after=self._announce_proposals(claim), claim_next=self.settings.worker_id,
            history_limit=self.settings.history_limit)
        log.info("turn finished run_id=%s report_id=%s stop=%s", claim.run_id, outcome.report_id, result.stop_reason)
        if outcome.looked:
            self._looked[claim.run_id] = Claimed(None, outcome.next_wake)
        return outcome.next_claim

    def _card(self, claim: Claim, text: str, offers: Sequence[tuple[str, str]] = ()):  # type: ignore[no-untyped-def]
        """In the finish transaction, for a turn answered in a Telegram chat: its proposals, rendered from their
        records, go in its report (one message, the card) with Approve / Reject for each one awaiting approval; one
        rejected by policy is shown with the reason (C11). What the run's tools offered to ask (`offers`: an
        order's Received, what /pending lists) follows, for targets still awaiting that decision."""
        destination = claim.destination
        found: list[Proposal] = []
        questions: list[Ask] = []

        def apply(tx: Transaction) -> None:
            found.clear()                # a finish run again (its first commit did not happen, K16) starts afresh
            questions.clear()
            chat_id = telegram_chat(destination)
            if chat_id is None:
                return
            found.extend(tx.run_proposals(claim.run_id))
            open_ones = [p for p in found if p.state is ProposalState.PROPOSED]
            questions.extend(tx.ask("proposal", str(p.proposal_id), chat_id, named=len(open_ones) > 1)
                             for p in open_ones)
            mine = {("proposal", str(p.proposal_id)) for p in found}
            questions.extend(offered_asks(tx, [offer for offer in offers if offer not in mine], chat_id))

        def draft() -> ReportDraft:
            body = card_body(found, text, self.settings.fmt()) if found else text
            return ReportDraft(body, destination=destination, asks=tuple(questions))
        return apply, draft

    def _announce_proposals(self, claim: Claim):  # type: ignore[no-untyped-def]
        """In the finish transaction, for a turn whose answer does not go to a Telegram chat: each proposal of the
        run goes to the owner's chat as its own message, rendered from the record, asking Approve or Reject;
        one rejected by policy is shown with the reason (C11)."""
        destination = None if telegram_chat(claim.destination) is not None else self.settings.notice_destination

        def after(tx: Transaction, report_id: str) -> None:
            chat_id = telegram_chat(destination)
            if destination is None or chat_id is None:
                return
            for proposal in tx.run_proposals(claim.run_id):
                text = proposal_message(proposal, self.settings.fmt())
                target = str(proposal.proposal_id)
                asked = ((tx.ask("proposal", target, chat_id),) if proposal.state is ProposalState.AWAITING_APPROVAL
                         else ())
                tx.admit_answered(
                    Occurrence(f"notice:proposal:{target}", "notice:proposal", text, WorkKind.NOTICE, destination),
                    functools.partial(_card, body=text, asks=asked, destination=destination))
        return after

    async def _transient(self, claim: Claim, exc: ModelTransient) -> None:
        backoff = self.settings.backoff
        delay = backoff[min(claim.attempt - 1, len(backoff) - 1)]
        if exc.retry_after:
            delay = max(delay, exc.retry_after)
        failed = await self.store.release(claim, delay_seconds=delay, reason=f"model unavailable: {exc.detail}")
        log.warning("model transient failure run_id=%s status=%s %s", claim.run_id, exc.status,
                    f"failed at the attempt cap: {failed}" if failed else f"released for {delay:.0f} s")
        self._consecutive_transient += 1
        if self._consecutive_transient >= PAUSE_AFTER:
            pause = max(backoff)
            self._consecutive_transient = 0
            self._paused_until = asyncio.get_running_loop().time() + pause
            log.error("model failed %d times in a row: claiming paused for %.0f s", PAUSE_AFTER, pause)
            await self._notice("model_paused", f"The model service failed {PAUSE_AFTER} times in a row. I paused for "
                               "a while instead of using up every request's attempts; your requests are kept and "
                               "will be answered when it is back.")

    async def _notice(self, kind: str, text: str) -> None:
        if self.settings.notice_destination is not None:
            await self.store.notice(kind, f"{self.store.clock.now().astimezone(UTC):%Y-%m-%dT%H:%M}", text,
                                    self.settings.notice_destination)


def _earliest(times: Iterable[datetime | None]) -> datetime | None:
    """The earliest of the wake-up times given (None: none)."""
    return min((t for t in times if t is not None), default=None)


def _chat(destination: str | None) -> int | None:
    """The owner's chat a turn answers (`tg:<chat_id>`), or None."""
    return telegram_chat(destination)


def offered_asks(tx: Transaction, offers: Sequence[tuple[str, str]], chat_id: int) -> list[Ask]:
    """What a reply offers to ask, each a fresh prompt stored with its target (C8), only for a target still
    awaiting that decision; the answers are the ones /pending asks (producers/telegram/owner.py), so a press is
    decided in the same place."""
    found: list[Ask] = []
    for kind, target in offers:
        if kind == "order":
            order = tx.order(int(target))
            if order is None or order.state is not OrderState.ON_ORDER:
                continue
            late = order.due_at <= tx.at
            found.append(tx.ask("order", target, chat_id, verbs=asks.order_verbs(late), named=True))
        elif kind == "proposal":
            proposal = tx.proposal(int(target))
            if proposal is None or proposal.state is not ProposalState.AWAITING_APPROVAL:
                continue
            found.append(tx.ask("proposal", target, chat_id, named=True))
        elif kind == "unknown" and tx.unknown_prompt_open(target):
            found.append(tx.ask("unknown", target, chat_id, named=True))
    return found


def _card(tx: Transaction, work_id: int, *, body: str, asks: tuple[Ask, ...], destination: str) -> ReportDraft:
    """A proposal's own message in the owner's chat: the record rendered, with what it asks."""
    return ReportDraft(body, destination=destination, asks=asks)
