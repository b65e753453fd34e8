"""PostgreSQL's change hint (`poll_changes`, migration 0015) counts this database's writes alone: another database
on the same server, however busy, never wakes this one's workers; a write here does."""
from __future__ import annotations

import psycopg

from store import ManualClock, Occurrence, WorkKind, open_store
from tests.support import postgres


async def test_writes_in_another_database_of_the_server_never_move_the_hint(pg_url: str, clock: ManualClock):
    store = await open_store(pg_url, clock, capacity=5, debounce_ms=0)
    try:
        await store.poll_changes()
        with psycopg.connect(postgres.DSN, autocommit=True) as other:    # the server's admin database
            other.execute("CREATE TEMP TABLE busy (n int)")
            for n in range(5):
                other.execute("INSERT INTO busy VALUES (%s)", (n,))
        assert not await store.poll_changes()       # the snapshot's xmax (the old hint) moved five times here
        await store.admit(Occurrence("till:t1:r1", "till:t1", "{}", WorkKind.AGENT, "till:t1"))
        assert await store.poll_changes()
    finally:
        await store.close()
