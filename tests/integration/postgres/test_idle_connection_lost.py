"""A pooled connection the server ended while it sat idle (a server restart, pg_terminate_backend, an idle timeout)
is found dead at BEGIN, before anything of the transaction ran: the transaction runs once more on a fresh
connection instead of failing (a process starting up would otherwise exit on its first write). One ended inside a
transaction is `ConnectionLost` with the server's reason (nothing of it committed), which start-up runs again
(bot/supervision.py `at_start`; tests/acceptance/postgres/test_start_connection_lost.py)."""
from __future__ import annotations

import psycopg
import pytest

from store import ConnectionLost, ManualClock, Occurrence, StoreError, WorkKind, open_store
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


def ends_itself(conn) -> None:  # type: ignore[no-untyped-def]
    """A transaction's write, then the server ending its own connection (as pg_terminate_backend from anyone
    would), then the next statement."""
    conn.execute("INSERT INTO health_probe (id, probed_at) VALUES (1, '2026-01-01T00:00:00.000000Z')")
    conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    conn.execute("SELECT 1")


async def test_a_connection_ended_inside_a_transaction_is_connection_lost_with_the_servers_reason(pg_url: str,
                                                                                               clock: ManualClock):
    """Not `the connection is closed` (the ROLLBACK on the dead connection used to hide the reason, and start-up
    could not tell a lost connection from a broken database): the server's reason, as ConnectionLost, nothing
    written, and the next transaction runs on a fresh connection."""
    store = await open_store(pg_url, clock, capacity=5, debounce_ms=0)
    try:
        with pytest.raises(ConnectionLost) as lost:
            await store.db.write(ends_itself)      # type: ignore[attr-defined]
        assert "terminating connection due to administrator command" in str(lost.value)
        assert "nothing was written" in str(lost.value) and "connection is closed" not in str(lost.value)
        assert await store.db.read(lambda conn: conn.execute(   # type: ignore[attr-defined]
            "SELECT count(*) FROM health_probe").fetchone()[0]) == 0
        await store.admit(Occurrence("till:t1:r1", "till:t1", "{}", WorkKind.AGENT, "till:t1"))
    finally:
        await store.close()


async def test_a_raw_function_whose_connection_is_ended_is_connection_lost(pg_url: str, clock: ManualClock):
    """The migrations' path (a function managing its own transactions): its ROLLBACK on the dead connection does
    not hide the reason either."""
    store = await open_store(pg_url, clock, capacity=5, debounce_ms=0)

    def migration_like(conn) -> None:  # type: ignore[no-untyped-def]
        conn.execute("BEGIN")
        try:
            ends_itself(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    try:
        with pytest.raises(ConnectionLost, match="terminating connection due to administrator command"):
            await store.db.raw(migration_like)     # type: ignore[attr-defined]
        assert await store.schema_version() > 0
    finally:
        await store.close()


async def test_negative_control_an_error_the_server_answers_is_not_a_lost_connection(pg_url: str,
                                                                                     clock: ManualClock):
    """What start-up runs again is only a lost connection: a statement the server refuses stays what it was."""
    store = await open_store(pg_url, clock, capacity=5, debounce_ms=0)
    try:
        with pytest.raises(StoreError) as refused:
            await store.db.write(lambda conn: conn.execute("SELECT no_such_column FROM health_probe"))  # type: ignore[attr-defined]
        assert not isinstance(refused.value, ConnectionLost)
    finally:
        await store.close()
