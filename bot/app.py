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
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC
from pathlib import Path
from typing import Any

from bot import config as config_module
from bot import telegram_setup
from bot.config import Config
from bot.drain import drain, holding
from bot.housekeeping import retention, sweep, sweeper
from bot.http import Health, HttpServer, health_route
from bot.leadership import NAMES, Leader, Presence, new_holder
from bot.logs import add_secret
from bot.metrics import MeteredModel, MeteredSender, Metrics, metrics_route
from bot.ops_page import OpsPage
from bot.parts import Parts
from bot.relays.progress import ProgressDrafts
from bot.relays.receipts import ReceiptRelay
from bot.relays.supplier import ActionRelay
from bot.relays.supplier_client import SupplierAdapter
from bot.relays.telegram import Relay, RelaySettings
from bot.relays.typing import TypingIndicator
from bot.shop_file import ShopSpec, load_shop
from bot.supervision import at_start, side_by_side, supervise
from bot.telegram_setup import initialize
from bot.till_openapi import openapi_route
from producers.clock import ClockProducer
from producers.scheduler import producer_scheduler
from producers.stock_watch import StockWatcher
from producers.telegram.client import make_bot
from producers.telegram.owner import ApprovalRules
from producers.telegram.polling import Ingress
from producers.telegram.webhook import webhook_route
from producers.till import TillApi, parse_till_tokens
from store import (
    Claim,
    Destination,
    InstanceLock,
    PartStopped,
    Status,
    Store,
    faults,
    open_store,
    parse_clock,
    telegram_chat,
    units,
)
from worker.agent_loop import Limits
from worker.models import ModelConfigFault, load_model
from worker.money import ShopFormat, language
from worker.worker import Worker, WorkerSettings

log = logging.getLogger("shopbot.app")


def stock_watcher(store: Store, cfg: Config, shop: ShopSpec) -> StockWatcher:
    """The stock watcher as every process builds it: the app, and `shopbot settings reset`, which checks at once. The
    same owner's chat and tolerance everywhere, so that a check anywhere admits and marks alike (a check without the
    owner's chat would pass the restock notices by)."""
    owner_chat = Destination.telegram(cfg.owner_chat_id) if cfg.owner_chat_id else None
    return StockWatcher(store, owner_chat, count_tolerance=shop.count_tolerance)


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
        # each database step of the start may be repeated: one whose connection the server ended is run again
        stopping = self._stopping
        store = await at_start("opening the database", lambda: open_store(
            cfg.db, clock, capacity=cfg.capacity, debounce_ms=cfg.debounce_ms, attempt_cap=cfg.attempt_cap,
            max_pages=cfg.db_max_pages, secrets=cfg.secrets(), lease_s=cfg.lease_s), stopping)
        self._stack.push_async_callback(store.close)
        log.info("database %s (schema %d)", store.location,
                 await at_start("reading the schema version", store.schema_version, stopping))
        if await at_start("seeding the shop", lambda: store.seed_shop(shop.items, str(cfg.shop_file)), stopping):
            log.info("shop seeded from %s: %d items", cfg.shop_file, len(shop.items))
        if store.lease_s is None:
            # one process owns the database (the instance lock): everything left running is this database's past
            summary = await at_start("recovering", store.recover, stopping)
        else:
            # several processes may share it (C15): only what expired is recovered, never a live process's turn
            summary = await at_start("recovering", lambda: sweep(store, at_start=True), stopping)
        log.info("recovery: %d released, %d failed, %d deliveries now unknown", len(summary.released),
                 len(summary.failed), len(summary.unknown_deliveries))
        await store.listen()      # PostgreSQL: other processes' commits wake this one's parts at once (a hint)
        owner_chat = Destination.telegram(cfg.owner_chat_id) if cfg.owner_chat_id else None
        health = Health()
        metrics = Metrics(lambda: self._parts_up(health),
                          start_mark=store.clock.now())   # turns count from here
        sender = bot = typing = progress = None
        if cfg.telegram_token:
            bot = make_bot(str(cfg.telegram_token), cfg.telegram_api_base_url)
            await initialize(bot, self._stopping)
            self._stack.push_async_callback(bot.shutdown)
            sender = MeteredSender(bot, metrics)
            typing = TypingIndicator(sender.typing, after_s=cfg.typing_after_ms / 1000)
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
        watcher = stock_watcher(store, cfg, shop)
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
                          lease=leaders["poller"], receipt=cfg.receipt_reaction,
                          on_stock_change=watcher.check) if bot and sender else None
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
            chat_id = telegram_chat(claim.destination)
            if p and chat_id is not None:
                if p.typing:
                    await stack.enter_async_context(p.typing.during(chat_id))
                if p.progress and chat_id > 0:          # drafts are for private chats only (an owner's is)
                    await stack.enter_async_context(p.progress.during(chat_id, claim.run_id))
            yield

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
                                              f"I had to stop my {name}: {exc}",
                                              Destination.telegram(self.cfg.owner_chat_id))

    async def _restarting(self, name: str, start: Any) -> None:
        assert self.parts
        await supervise(name, start, self.parts.health, self._stopping)

    async def run(self) -> None:
        p = self.parts
        assert p is not None
        self._install_signals()
        if p.sender:
            await telegram_setup.set_up(p.sender.bot, self.cfg)
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
                    lambda fence: side_by_side(relay.run(), receipts.run() if receipts else None), stop_relays)))
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
                cancel_on_stop.append(tasks.create_task(retention(p.store, self.cfg.retention_days, self._stopping)))
            if p.store.lease_s is not None:
                cancel_on_stop.append(tasks.create_task(sweeper(p.store, self._stopping)))
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
        async with holding(p.leaders, self.cfg.lease_s):
            return await drain(p)
