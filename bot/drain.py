"""`shopbot run --drain`: recovery ran at start; admit what Telegram holds, run every due turn, send every due
delivery, until nothing due is left. The singletons' leader leases are held (and renewed) for the whole drain, so
a drain never runs beside another leader."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

from bot.housekeeping import sweep
from bot.leadership import Leader
from bot.parts import Parts
from store import Fence, Status, StoreError


@contextlib.asynccontextmanager
async def holding(leaders: dict[str, Leader], lease_s: float) -> AsyncIterator[None]:
    """Hold every leader lease (renewed in the background) for the body; refused while another process leads.
    Woken by the leaders' `changed` events (an acquisition), never by a polling sleep."""
    forever = asyncio.Event()

    async def hold(fence: Fence) -> None:
        await forever.wait()

    runners = [asyncio.create_task(leader.run(hold)) for leader in leaders.values()]
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2 * lease_s + 1
        while True:
            for leader in leaders.values():      # cleared before the check: a change after it wakes the wait
                leader.changed.clear()
            if all(leader.holding for leader in leaders.values()):
                break
            if loop.time() > deadline:
                busy = ", ".join(name for name, leader in leaders.items() if not leader.holding)
                raise StoreError(f"another shopbot process leads {busy} on this database: `run --drain` runs "
                                 "only while no other process runs the singletons; stop them first")
            await _any_change(leaders.values(), deadline - loop.time())
        yield
    finally:
        for leader in leaders.values():
            leader.stop()
        await asyncio.gather(*runners, return_exceptions=True)


async def _any_change(leaders: Iterable[Leader], timeout: float) -> None:
    waits = [asyncio.ensure_future(leader.changed.wait()) for leader in leaders]
    try:
        await asyncio.wait(waits, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def drain(p: Parts) -> Status:
    """Every due thing, in rounds, until a round does nothing; returns the status of what is left (not yet due)."""
    if p.producers:
        await p.producers.clock.catch_up(fence=p.producers._fence())
        await p.producers.watcher.check(p.producers._fence())
    while True:
        if p.ingress:
            await p.ingress.poll(drain=True)
        if p.store.lease_s is not None:
            await sweep(p.store)       # expired leases of other processes, as `run` sweeps them
        sent = await p.receipts.drain() if p.receipts else 0
        turns = await p.worker.drain()
        sent += await p.relay.drain() if p.relay else 0
        acted = await p.actions.drain() if p.actions else 0
        if acted:
            sent += await p.relay.drain() if p.relay else 0
        if not turns and not sent and not acted:
            break
    return await p.store.status()
