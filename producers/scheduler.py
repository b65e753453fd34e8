"""The producers' wake-up call: APScheduler 3.x (`AsyncIOScheduler`, memory job store) started inside the loop.

APScheduler is never the source of an occurrence (docs/contracts.md, "Facts at the edges"): it does not tell a job its
fire time and forgets fires missed while the process was down. Each job only calls a producer's catch-up (the clock, one
job per schedule) or check (the stock watcher); the producer works out from its stored cursor what is due. So jobs
coalesce, never run twice at once, and run however late they are (`misfire_grace_time=None`): a late wake-up is
harmless, the producer decides what is still within grace.

A wake-up that fails on the store (busy, full) is logged and the next one retries; any other exception is a bug and
stops `run()` with it, so the TaskGroup around it stops the process loudly instead of a job dying silently.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from datetime import UTC

from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from store import Fence, Lease, LeaseLost, StoreError

from .clock import ClockProducer
from .schedule import Schedule, parse_schedules, trigger_for
from .stock_watch import StockWatcher

log = logging.getLogger("shopbot.scheduler")

STOCK_JOB = "stock_watch"
JOB_OPTIONS = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


def stock_schedule(cron: str, timezone_name: str) -> Schedule:
    """The stock watcher's cron read with the same (Vixie) semantics as the shop's schedules; a wrong one raises
    ScheduleError naming `stock_watch`."""
    return parse_schedules([{"name": STOCK_JOB, "cron": cron, "prompt": "stock check"}],
                           shop_timezone=timezone_name)[0]


class ProducerScheduler:
    def __init__(self, clock: ClockProducer, watcher: StockWatcher, stock_trigger: CronTrigger,
                 lease: Lease | None = None) -> None:
        self.lease = lease       # the `producers` leader lease (bot.leadership.Leader); None: unfenced (drain, tests)
        self.clock = clock
        self.watcher = watcher
        self.stock_trigger = stock_trigger
        self.scheduler: AsyncIOScheduler | None = None
        self.started = asyncio.Event()   # set once the start-up catch-up committed and the jobs are scheduled
        self._bug: asyncio.Future[None] | None = None

    async def run(self) -> None:
        """Catch up once, then wake the producers on their triggers until cancelled."""
        self._bug = asyncio.get_running_loop().create_future()
        await self._wake("startup", self.clock.catch_up(fence=self._fence()))
        await self._wake("startup", self.watcher.check(self._fence()))
        scheduler = AsyncIOScheduler(jobstores={"default": MemoryJobStore()},
                                     executors={"default": AsyncIOExecutor()},
                                     job_defaults=JOB_OPTIONS, timezone=UTC)
        for name, schedule in self.clock.schedules.items():
            scheduler.add_job(self._clock_job, trigger_for(schedule), args=[name], id=f"clock:{name}",
                              name=f"clock:{name}", **JOB_OPTIONS)
        scheduler.add_job(self._stock_job, self.stock_trigger, id=STOCK_JOB, name=STOCK_JOB, **JOB_OPTIONS)
        self.scheduler = scheduler
        scheduler.start()
        log.info("producer wake-ups scheduled: %s", ", ".join(job.id for job in scheduler.get_jobs()))
        self.started.set()
        try:
            await self._bug
        finally:
            # AsyncIOScheduler.shutdown is queued on the loop; yield once so it has run when run() returns.
            scheduler.shutdown(wait=False)
            await asyncio.sleep(0)

    def _fence(self) -> Fence | None:
        """Every write of a wake-up is fenced by the `producers` lease (C16): a process whose lease lapsed admits
        nothing (LeaseLost, logged as a failed wake-up; the leadership runner stops this scheduler)."""
        if self.lease is None:
            return None
        fence: Fence | None = self.lease.fence
        if fence is None:
            raise LeaseLost("producers", "-", 0)
        return fence

    async def _clock_job(self, name: str) -> None:
        with contextlib.suppress(LeaseLost):     # demoted: the runner is stopping this scheduler
            await self._wake(f"clock:{name}", self.clock.catch_up(name, fence=self._fence()))

    async def _stock_job(self) -> None:
        with contextlib.suppress(LeaseLost):
            await self._wake(STOCK_JOB, self.watcher.check(self._fence()))

    async def _wake(self, job: str, work: Awaitable[object]) -> None:
        try:
            await work
        except StoreError as exc:
            log.error("producer wake-up failed job=%s: %s (the next wake-up tries again)", job, exc)
        except Exception as exc:
            log.critical("producer wake-up crashed job=%s: %r", job, exc)
            if self._bug is not None and not self._bug.done():
                self._bug.set_exception(exc)


def producer_scheduler(clock: ClockProducer, watcher: StockWatcher, stock_cron: str,
                       timezone_name: str) -> ProducerScheduler:
    return ProducerScheduler(clock, watcher, trigger_for(stock_schedule(stock_cron, timezone_name)))

