"""A pooled connection the server ended while it sat idle (a server restart, pg_terminate_backend, an idle timeout)
is found dead at BEGIN, before anything of the transaction ran: the transaction runs once more on a fresh
connection instead of failing (a process starting up would otherwise exit on its first write)."""
from __future__ import annotations

import psycopg

from store import ManualClock, Occurrence, WorkKind, open_store
from tests.support import postgres


def terminate_others(url: str) -> int:
    """End every other backend on the test's database: the store's idle pooled connections."""
    with psycopg.connect(postgres.DSN, autocommit=True) as admin:
        name = url.rsplit("/", 1)[1]
        return len(admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                 "AND pid <> pg_backend_pid()", (name,)).fetchall())


async def test_a_transaction_on_a_connection_ended_while_idle_runs_on_a_fresh_one(pg_url: str, clock: ManualClock):
    store = await open_store(pg_url, clock, capacity=5, debounce_ms=0)
    try:
        await store.admit(Occurrence("till:t1:r1", "till:t1", "{}", WorkKind.AGENT, "till:t1"))
        assert terminate_others(pg_url) >= 1
        result = await store.admit(Occurrence("till:t1:r2", "till:t1", "{}", WorkKind.AGENT, "till:t1"))
        assert result.work_id is not None
        assert (await store.status()).work.pending == 2
    finally:
        await store.close()
