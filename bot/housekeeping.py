"""The periodic chores of every process: the lease sweep (PostgreSQL, C15/C16) and the daily retention prune
(SHOPBOT_RETENTION_DAYS). Each loop ends when `stopping` is set; a failure is logged and tried at the next period."""
from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.relays.notices import announce_unknowns
from store import RecoverySummary, Store, StoreError

log = logging.getLogger("shopbot.app")
RETENTION_EVERY_S = 86400.0


async def sweep(store: Store, at_start: bool = False) -> RecoverySummary:
    """C15: recover expired leases; C16: a `sending` delivery or action becomes unknown once its sender's leader
    lease is no longer current (a live sender's are left alone, at start too), and the owner is told."""
    assert store.lease_s is not None
    summary = await store.sweep_expired()
    if summary.unknown_deliveries and not at_start:
        await announce_unknowns(store)
    return summary


async def sweeper(store: Store, stopping: asyncio.Event) -> None:
    """C15: every process sweeps expired leases every half lease (a dead or paused process's turns restart
    within about the lease plus half of it)."""
    assert store.lease_s is not None
    period = store.lease_s / 2
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), period)
            return
        try:
            summary = await sweep(store)
        except StoreError as exc:
            log.error("lease sweep failed (%s); trying again in %.1f s", type(exc).__name__, period)
            continue
        if summary.released or summary.failed or summary.unknown_deliveries:
            log.info("lease sweep: %d released, %d failed, %d deliveries now unknown", len(summary.released),
                     len(summary.failed), len(summary.unknown_deliveries))


async def retention(store: Store, days: int, stopping: asyncio.Event) -> None:
    """Prune once at start and then once a day, on the store's clock (short transactions; see
    store/shared/retention.py)."""
    while not stopping.is_set():
        try:
            done = await store.prune(days)
            log.info("retention: pruned %s", ", ".join(f"{kind}={n}" for kind, n in done.items()))
        except StoreError as exc:
            log.error("retention failed (%s); the next daily run tries again", type(exc).__name__)
        await store.clock.sleep(RETENTION_EVERY_S)
