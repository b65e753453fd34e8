"""The ChangeNotification port for every store: after `listen`, a commit made through another connection (another
process's store) wakes this store's parts, by a notification (PostgreSQL) or by `poll_changes` (both)."""
from __future__ import annotations

import asyncio
from pathlib import Path

from store import ManualClock, Occurrence, Store, WorkKind
from tests.contract.store.conftest import opened


async def woken(store: Store, timeout: float = 10.0) -> bool:
    """The work signal, or a change `poll_changes` noticed, within the deadline (polled, never slept out)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await store.signals.work.wait(0.05) or await store.poll_changes():
            return True
    return False


async def test_another_connections_admission_wakes_a_listening_store(kind: str, tmp_path: Path, clock: ManualClock,
                                                                     location: str | None, store: Store):
    await store.listen()
    await store.listen()                 # idempotent: one listener per store
    other = await opened(kind, tmp_path, clock, location, capacity=3, debounce_ms=0)
    try:
        await woken(store, 2.0)          # the start's own scan (and SQLite's first data_version) is consumed
        while await store.signals.work.wait(0):
            pass
        await store.poll_changes()
        await other.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
        assert await woken(store)
        claim = await store.claim("w1")
        assert claim is not None and [i.source for i in claim.items] == ["tg:1:1"]
    finally:
        await other.close()
