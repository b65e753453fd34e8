"""The composition root: builds every part from the configuration and runs them in one TaskGroup.

Wiring only. On SQLite one process per database owns recovery, the worker and the relays (C10): the instance lock is
taken before anything else and held for the life of the process. On PostgreSQL any number of processes share the
database (C15, C16): none resets anything at start; each sweeps expired leases at start and every half lease; every
process runs the worker and the HTTP server (till, webhook, health); the singletons (the Telegram poller, the report
relay, the clock and stock producers, the action relay) each run only in the process that holds their leader lease
(bot/leadership.py). The same code runs on SQLite, where the one process always leads.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from telegram.error import InvalidToken, NetworkError, RetryAfter

from bot import config as config_module
from bot.config import Config
from bot.http import Health, HttpServer, health_route
from bot.leadership import NAMES, Leader, Presence, new_holder
from bot.logs import add_secret
from bot.metrics import MeteredModel, MeteredSender, Metrics, metrics_route
from bot.ops_page import OpsPage
from bot.relays.notices import announce_unknowns
from bot.relays.progress import ProgressDrafts
from bot.relays.receipts import ReceiptRelay
from bot.relays.sender import TelegramSender
from bot.relays.supplier import ActionRelay
from bot.relays.supplier_client import SupplierAdapter
from bot.relays.telegram import Relay, RelaySettings
from bot.relays.typing import TypingIndicator
from bot.shop_file import ShopSpec, load_shop
from bot.till_openapi import openapi_route
from producers.clock import ClockProducer
from producers.scheduler import ProducerScheduler, producer_scheduler
from producers.stock_watch import StockWatcher
from producers.telegram.client import make_bot
from producers.telegram.owner import COMMANDS, ApprovalRules
from producers.telegram.polling import Ingress
from producers.telegram.routing import ALLOWED_UPDATES
from producers.telegram.webhook import webhook_route
from producers.till import TillApi, parse_till_tokens
from store import (
    Claim,
    InstanceLock,
    PartStopped,
    Status,
    Store,
    StoreError,
    faults,
    open_store,
    parse_clock,
    to_text,
    units,
)
from worker.agent_loop import Limits
from worker.models import ModelConfigFault, load_model
from worker.money import ShopFormat, language
from worker.worker import Worker, WorkerSettings

log = logging.getLogger("shopbot.app")
RETENTION_EVERY_S = 86400.0


@dataclass
class Parts:
    store: Store
    shop: ShopSpec
    worker: Worker
    relay: Relay | None
    ingress: Ingress | None
    sender: TelegramSender | None
    http: HttpServer | None
    health: Health
    actions: ActionRelay | None = None
    producers: ProducerScheduler | None = None
    typing: TypingIndicator | None = None
    leaders: dict[str, Leader] | None = None
    presence: Presence | None = None
    receipts: ReceiptRelay | None = None
    progress: ProgressDrafts | None = None


async def _side_by_side(*bodies: Coroutine[Any, Any, None] | None) -> None:
    """The report relay and the receipt relay (C19) under one leader lease, each in its own task so that a reply
    never waits behind a receipt; the first failure (a lost lease) ends both and is raised as it is."""
    tasks = [asyncio.create_task(body) for body in bodies if body is not None]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc


async def supervise(name: str, start: Callable[[], Awaitable[None]], health: Health, stopping: asyncio.Event, *,
                    first_delay: float = 1.0) -> None:
    """C21: a part that crashes on a bug is reported in /healthz, restarted with backoff, and never ends the
    process (its work is in the database: an action left `sending` becomes unknown and is reconciled)."""
    crashes = 0
    while not stopping.is_set():
        try:
            await start()
            return
        except Exception as exc:
            crashes += 1
            delay = min(60.0, first_delay * 2 ** min(crashes - 1, 6))
            log.critical("%s crashed (%s: %s); restarting in %.1f s", name, type(exc).__name__, str(exc)[:300],
                         delay, exc_info=crashes == 1)
            health.fail(name, f"the {name} part crashed ({type(exc).__name__}) and is restarting")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), delay)
        health.clear(name)


class StartAborted(Exception):
    """SIGINT/SIGTERM arrived while the bot was still starting."""


class App:
    def __init__(self, cfg: Config, *, poll_timeout: int = 25) -> None:
        self.cfg = cfg
        self.poll_timeout = poll_timeout
        self.parts: Parts | None = None
        self._stack = AsyncExitStack()
        self._stopping = asyncio.Event()

    def owner_ids(self) -> frozenset[int]:
        return frozenset(self.cfg.owner_ids)

    def allowed_chat(self, chat_id: int) -> bool:
        return chat_id in self.cfg.owner_ids

    async def __aenter__(self) -> App:
        try:
            return await self._build()
        except BaseException:
            await self._stack.aclose()     # a failed start closes what it opened (the store's thread would hang)
            raise

    async def _build(self) -> App:
        cfg = self.cfg
        self._install_signals()        # from the first moment: a stop during start-up is clean too
        for secret in cfg.secrets():   # redacted from every log line and every /healthz reason, however started
            add_secret(secret)
        faults.arm(cfg.fault)
        if isinstance(cfg.db, Path):       # the instance lock is SQLite's (one process per file, C10)
            self._stack.enter_context(InstanceLock(cfg.db.resolve()))
        shop = load_shop(cfg.shop_file)
        clock = parse_clock(cfg.clock, test_mode=cfg.test_mode)
        store = await open_store(cfg.db, clock, capacity=cfg.capacity, debounce_ms=cfg.debounce_ms,
                                 attempt_cap=cfg.attempt_cap, max_pages=cfg.db_max_pages, secrets=cfg.secrets(),
                                 lease_s=cfg.lease_s)
        self._stack.push_async_callback(store.close)
        log.info("database %s (schema %d)", store.location, await store.schema_version())
        if await store.seed_shop(shop.items, str(cfg.shop_file)):
            log.info("shop seeded from %s: %d items", cfg.shop_file, len(shop.items))
        if store.lease_s is None:
            # one process owns the database (the instance lock): everything left running is this database's past
            summary = await store.recover()
        else:
            # several processes may share it (C15): only what expired is recovered, never a live process's turn
            summary = await self._sweep(store, at_start=True)
        log.info("recovery: %d released, %d failed, %d deliveries now unknown", len(summary.released),
                 len(summary.failed), len(summary.unknown_deliveries))
        await store.listen()      # PostgreSQL: other processes' commits wake this one's parts at once (a hint)
        owner_chat = f"tg:{cfg.owner_chat_id}" if cfg.owner_chat_id else None
        health = Health()
        metrics = Metrics(lambda: self._parts_up(health),
                          start_mark=to_text(store.clock.now()))   # turns count from here
        sender = bot = typing = progress = None
        if cfg.telegram_token:
            bot = make_bot(str(cfg.telegram_token), cfg.telegram_api_base_url)
            await self._initialize(bot)
            self._stack.push_async_callback(bot.shutdown)
            sender = MeteredSender(bot, metrics)
            typing = TypingIndicator(sender.typing)
            self._stack.push_async_callback(typing.aclose)     # before the Bot's client closes
            progress = ProgressDrafts(sender.draft, store.run_steps, after_s=cfg.progress_after_ms / 1000,
                                      language=language(shop.locale))
            self._stack.push_async_callback(progress.aclose)
        try:
            model = MeteredModel(load_model(cfg.model, base_url=cfg.model_base_url or None,
                                            api_key=str(cfg.model_api_key) or None, timeout=cfg.model_timeout_s,
                                            max_tokens=cfg.model_max_tokens), metrics)
        except ModelConfigFault as exc:   # no key and no base URL: said as a configuration error, not a traceback
            raise config_module.ConfigError(
                f"SHOPBOT_MODEL={cfg.model} needs SHOPBOT_MODEL_API_KEY (or SHOPBOT_MODEL_BASE_URL for a local "
                f"server that needs no key): {exc.detail}") from None
        holder = new_holder()          # this process in the leader leases: random at every start (C16)
        leaders = {name: Leader(store, name, holder, cfg.lease_s) for name in NAMES}
        presence = Presence(store, holder, cfg.lease_s)
        clock_producer = ClockProducer(store, shop.schedules, owner_chat)
        watcher = StockWatcher(store, owner_chat, count_tolerance=shop.count_tolerance)
        scheduler = producer_scheduler(clock_producer, watcher, shop.stock_cron, shop.timezone)
        scheduler.lease = leaders["producers"]
        units.use(shop.unit_words)     # "1 tub", "2 tubs" in every text (store/units.py)
        worker = Worker(store, model, WorkerSettings(
            # each process its own holder name in `runs.worker_id` (which process holds which lease, C15)
            worker_id=f"worker-{socket.gethostname()}-{os.getpid()}",
            concurrency=cfg.worker_concurrency, supplier=shop.supplier, currency=shop.currency, locale=shop.locale,
            shop_name=shop.name, hours=shop.hours, history_tokens=cfg.history_tokens,
            limits=Limits(max_seconds=cfg.turn_timeout_s),
            schedules=tuple((s.name, s.cron) for s in shop.schedules),
            notice_destination=owner_chat, shop_timezone=shop.timezone, order_max_cents=shop.order_max_cents,
            day_max_cents=shop.day_max_cents, proposal_expiry_s=cfg.proposal_expiry_hours * 3600,
            aliases=shop.aliases, lead_time_days=shop.lead_time_days, ordering=shop.ordering),
            on_turn=self._typing if sender else None, on_stock_change=watcher.check)
        supplier_destination = f"supplier:{shop.supplier}"
        actions = None
        if cfg.supplier_url:
            adapter = SupplierAdapter(cfg.supplier_url, str(cfg.supplier_token), deadline=cfg.supplier_timeout_s)
            self._stack.push_async_callback(adapter.aclose)
            actions = ActionRelay(store, adapter, {supplier_destination}, owner_chat, lease=leaders["actions"],
                                  attempt_cap=cfg.attempt_cap)
        else:
            log.warning("SHOPBOT_SUPPLIER_URL is not set: approved orders wait in the action outbox, none is sent")
        rules = ApprovalRules(shop.timezone, shop.day_max_cents, supplier_destination, shop.lead_time_days,
                              money=ShopFormat(shop.currency, shop.locale, shop.timezone).cents)
        relay = Relay(store, sender, self.allowed_chat, RelaySettings(
            chat_pace_s=cfg.chat_pace_ms / 1000, global_per_s=cfg.global_pace_per_s, chat_burst=cfg.chat_burst,
            global_burst=cfg.global_burst), lease=leaders["relay"]) if sender else None
        # always run where the relay runs: receipts stored before SHOPBOT_RECEIPT_REACTION was emptied are still set
        receipts = ReceiptRelay(store, sender, self.allowed_chat) if sender else None
        ingress = Ingress(store, bot, sender, self.owner_ids, poll_timeout=self.poll_timeout, rules=rules,
                          lease=leaders["poller"], receipt=cfg.receipt_reaction) if bot and sender else None
        routes = [health_route(store, health), metrics_route(store, metrics, str(cfg.metrics_token))]
        if ingress and cfg.webhook_url:
            routes.append(webhook_route(ingress, str(cfg.webhook_secret)))
        routes += TillApi(store, parse_till_tokens(str(cfg.till_tokens))).routes() + [openapi_route()]
        if cfg.ops_token:
            routes += OpsPage(store, str(cfg.ops_token)).routes()
        http = (HttpServer(routes, cfg.http_host, cfg.http_port, allowed_hosts=cfg.http_hosts)
                if cfg.http_port >= 0 else None)
        self.parts = Parts(store, shop, worker, relay, ingress, sender, http, health, actions, scheduler, typing,
                           leaders, presence, receipts, progress)
        return self

    async def _initialize(self, bot: Any) -> None:
        """`getMe` at start. Telegram unreachable (the network is not up yet) is waited out with backoff; a refused
        token is a configuration error and stops the start; SIGINT/SIGTERM during the wait stop it cleanly."""
        delay = 0.5
        while True:
            try:
                await bot.initialize()
                return
            except InvalidToken:
                raise
            except (NetworkError, RetryAfter) as exc:
                log.warning("Telegram is not reachable at start (%s); trying again in %.1f s",
                            type(exc).__name__, delay)
                try:
                    await asyncio.wait_for(self._stopping.wait(), delay)
                    raise StartAborted("stopped while waiting for Telegram at start")
                except TimeoutError:
                    pass
                delay = min(30.0, delay * 2)

    def _parts_up(self, health: Health) -> dict[str, bool]:
        """Every part this process runs, and whether it still runs (a part stopped on a fault is in `health`)."""
        p = self.parts
        if p is None:
            return {}
        present = {"worker": True, "relay": p.relay is not None, "ingress": p.ingress is not None,
                   "actions": p.actions is not None, "producers": p.producers is not None, "http": p.http is not None}
        return {name: name not in health.faults for name, here in present.items() if here}

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop)
            except (NotImplementedError, RuntimeError):
                pass

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    @contextlib.asynccontextmanager
    async def _typing(self, claim: Claim) -> AsyncIterator[None]:
        """"typing…" in the reply's chat while the model runs, never awaited on the reply's path (relays/typing.py),
        and the progress drafts naming the run's steps (relays/progress.py, C20)."""
        p = self.parts
        async with contextlib.AsyncExitStack() as stack:
            if p and claim.destination and claim.destination.startswith("tg:"):
                chat_id = int(claim.destination[3:])
                if p.typing:
                    await stack.enter_async_context(p.typing.during(chat_id))
                if p.progress and chat_id > 0:          # drafts are for private chats only (an owner's is)
                    await stack.enter_async_context(p.progress.during(chat_id, claim.run_id))
            yield

    async def _telegram_setup(self) -> None:
        p = self.parts
        assert p and p.sender
        bot = p.sender.bot
        try:
            await bot.set_my_commands([(name, what) for name, what in COMMANDS.items()])
            if self.cfg.webhook_url:
                await bot.set_webhook(self.cfg.webhook_url, secret_token=str(self.cfg.webhook_secret),
                                      max_connections=1, allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
                log.info("webhook mode: Telegram posts to the configured URL")
            else:
                await bot.delete_webhook(drop_pending_updates=False)   # never drop pending updates
        except Exception as exc:
            log.error("Telegram setup failed: %s", type(exc).__name__)
        if self.cfg.owner_chat_id:
            try:
                await bot.send_chat_action(self.cfg.owner_chat_id, "typing")
            except Exception as exc:
                log.error("cannot write to the owner chat %s (%s): the owner must open the bot in Telegram and press "
                          "Start once; until then briefs and notices wait in the outbox", self.cfg.owner_chat_id,
                          type(exc).__name__)
        if not self.cfg.owner_ids:
            log.warning("SHOPBOT_OWNER_IDS is empty: every Telegram sender will be refused")

    def stop(self) -> None:
        self._stopping.set()
        p = self.parts
        if p is None:
            return
        p.worker.stop()
        for part in (p.relay, p.ingress, p.http, p.actions, p.presence, *(p.leaders or {}).values()):
            if part is not None:
                part.stop()

    async def _supervised(self, name: str, coro: Any) -> None:
        """A part that stops on a configuration fault stays stopped, loudly, and /healthz says so; a bug crashes the
        whole TaskGroup (never a silent death)."""
        assert self.parts
        try:
            await coro
        except PartStopped as exc:
            log.critical("%s stopped: %s", name, exc)
            self.parts.health.fail(name, str(exc))
            if self.cfg.owner_chat_id:
                day = f"{self.parts.store.clock.now().astimezone(UTC):%Y-%m-%d}"
                await self.parts.store.notice("config", f"{name}:{day}",
                                              f"I had to stop my {name}: {exc}", f"tg:{self.cfg.owner_chat_id}")

    async def _restarting(self, name: str, start: Any) -> None:
        assert self.parts
        await supervise(name, start, self.parts.health, self._stopping)

    async def _retention(self, days: int) -> None:
        """SHOPBOT_RETENTION_DAYS: prune once at start and then once a day (short transactions; see store/retention.py).
        A failure is logged and tried again the next day."""
        assert self.parts
        while not self._stopping.is_set():
            try:
                done = await self.parts.store.prune(days)
                log.info("retention: pruned %s", ", ".join(f"{kind}={n}" for kind, n in done.items()))
            except StoreError as exc:
                log.error("retention failed (%s); the next daily run tries again", type(exc).__name__)
            await self.parts.store.clock.sleep(RETENTION_EVERY_S)

    async def _sweep(self, store: Store, at_start: bool = False) -> Any:
        """C15: recover expired leases; C16: a `sending` delivery or action becomes unknown once its sender's leader
        lease is no longer current (a live sender's are left alone, at start too), and the owner is told."""
        assert store.lease_s is not None
        summary = await store.sweep_expired()
        if summary.unknown_deliveries and not at_start:
            await announce_unknowns(store)
        return summary

    async def _sweeper(self) -> None:
        """C15: every process sweeps expired leases every half lease (a dead or paused process's turns restart
        within about the lease plus half of it). A failure is logged and tried at the next period."""
        assert self.parts and self.parts.store.lease_s is not None
        store = self.parts.store
        period = self.parts.store.lease_s / 2
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), period)
                return
            except TimeoutError:
                pass
            try:
                summary = await self._sweep(store)
            except StoreError as exc:
                log.error("lease sweep failed (%s); trying again in %.1f s", type(exc).__name__, period)
                continue
            if summary.released or summary.failed or summary.unknown_deliveries:
                log.info("lease sweep: %d released, %d failed, %d deliveries now unknown", len(summary.released),
                         len(summary.failed), len(summary.unknown_deliveries))

    async def run(self) -> None:
        p = self.parts
        assert p is not None
        self._install_signals()
        if p.sender:
            await self._telegram_setup()
        log.info("shopbot running: model=%s telegram=%s http=%s", self.cfg.model,
                 "webhook" if self.cfg.webhook_url else ("polling" if p.ingress else "off"),
                 f"{self.cfg.http_host}:{self.cfg.http_port}" if p.http else "off")
        assert p.leaders is not None and p.presence is not None
        lead = p.leaders
        async with asyncio.TaskGroup() as tasks:
            # Stopping cancels admission and the worker (an abandoned model call releases its turn without
            # counting the attempt; an unacknowledged batch comes back, C2) and lets a send in flight finish. A
            # singleton runs only while this process holds its leader lease; a clean stop resigns it (C16).
            tasks.create_task(p.presence.run())
            cancel_on_stop = [tasks.create_task(self._supervised("worker", p.worker.run()))]
            if p.ingress and not self.cfg.webhook_url:
                ingress = p.ingress
                cancel_on_stop.append(tasks.create_task(self._supervised(
                    "ingress", lead["poller"].run(lambda fence: ingress.poll()))))
            if p.relay:
                relay, receipts = p.relay, p.receipts

                def stop_relays() -> None:
                    relay.stop()
                    if receipts:
                        receipts.stop()
                tasks.create_task(self._supervised("relay", lead["relay"].run(
                    lambda fence: _side_by_side(relay.run(), receipts.run() if receipts else None), stop_relays)))
            if p.actions:
                actions = p.actions
                tasks.create_task(self._restarting(
                    "actions", lambda: lead["actions"].run(lambda fence: actions.run(), actions.stop)))
            if p.http:
                tasks.create_task(p.http.serve())
            if p.producers:
                producers = p.producers
                cancel_on_stop.append(tasks.create_task(lead["producers"].run(lambda fence: producers.run())))
            if self.cfg.retention_days:
                cancel_on_stop.append(tasks.create_task(self._retention(self.cfg.retention_days)))
            if p.store.lease_s is not None:
                cancel_on_stop.append(tasks.create_task(self._sweeper()))
            await self._stopping.wait()
            self.stop()
            for task in cancel_on_stop:
                task.cancel()
        log.info("shopbot stopped")

    async def drain(self) -> Status:
        """`run --drain`: recovery ran at start; admit what Telegram holds, run every due turn, send every due
        delivery, until nothing due is left; returns the status of what is left (not yet due). The singletons'
        leases are held (and renewed) for the whole drain, so a drain never runs beside another leader."""
        p = self.parts
        assert p is not None and p.leaders is not None
        async with self._holding(p.leaders):
            return await self._drain(p)

    @contextlib.asynccontextmanager
    async def _holding(self, leaders: dict[str, Leader]) -> Any:
        """Hold every leader lease (renewed in the background) for the body; refused while another process leads."""
        forever = asyncio.Event()
        runners = [asyncio.create_task(leader.run(lambda fence: forever.wait())) for leader in leaders.values()]
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 2 * self.cfg.lease_s + 1
            while not all(leader.holding for leader in leaders.values()):
                if loop.time() > deadline:
                    busy = ", ".join(name for name, leader in leaders.items() if not leader.holding)
                    raise StoreError(f"another shopbot process leads {busy} on this database: `run --drain` runs "
                                     "only while no other process runs the singletons; stop them first")
                await asyncio.sleep(0.02)
            yield
        finally:
            for leader in leaders.values():
                leader.stop()
            await asyncio.gather(*runners, return_exceptions=True)

    async def _drain(self, p: Parts) -> Status:
        if p.producers:
            await p.producers.clock.catch_up(fence=p.producers._fence())
            await p.producers.watcher.check(p.producers._fence())
        while True:
            if p.ingress:
                await p.ingress.poll(drain=True)
            if p.store.lease_s is not None:
                await self._sweep(p.store)       # expired leases of other processes, as `run` sweeps them
            sent = await p.receipts.drain() if p.receipts else 0
            turns = await p.worker.drain()
            sent += await p.relay.drain() if p.relay else 0
            acted = await p.actions.drain() if p.actions else 0
            if acted:
                sent += await p.relay.drain() if p.relay else 0
            if not turns and not sent and not acted:
                break
        return await p.store.status()
