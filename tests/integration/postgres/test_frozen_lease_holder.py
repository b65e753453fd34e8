"""A process frozen (SIGSTOP, a VM pause) in the middle of a lease transaction must not freeze the lease for the
others. Found by tests/acceptance/postgres/test_three_processes.py: a standby stopped between its acquire
statement and its COMMIT held the relay's lease row locked (`INSERT ... ON CONFLICT DO UPDATE ... WHERE` locks the
conflicting row even when its WHERE is false), so the leader's renewal waited, timed out and demoted it, and no
process could take the relay over until the frozen one was continued.

Each test leaves a transaction open on a raw connection, as a frozen process would, and drives the others through
the store."""
from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from store.postgres import leadership
from store.postgres.connection import PgConnection, configure


def frozen(pg_url: str) -> psycopg.Connection:  # type: ignore[type-arg]
    raw = psycopg.connect(pg_url, autocommit=True, cursor_factory=psycopg.ClientCursor)
    configure(raw)
    raw.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
    return raw


async def test_a_standby_frozen_inside_its_acquire_does_not_block_the_leaders_renewal(pg, pg_url):
    generation = await pg.acquire_leader("relay", "leader", 30)
    assert generation == 1
    standby = frozen(pg_url)
    try:
        assert leadership.acquire(PgConnection(standby), "relay", "standby", 30) is None   # and not committed
        started = time.monotonic()
        assert await asyncio.wait_for(pg.renew_leader("relay", "leader", 1, 30), 3)
        assert time.monotonic() - started < 1.0                 # no wait on the standby's transaction
    finally:
        standby.close()


async def test_negative_control_an_open_upsert_on_the_row_does_block_it(pg, pg_url):
    """The statement the acquire used to be: its open transaction keeps the row locked (so the test above would
    catch its return)."""
    await pg.acquire_leader("relay", "leader", 30)
    standby = frozen(pg_url)
    try:
        standby.execute(
            "INSERT INTO leader_leases (name, holder, generation, expires_at, acquired_at, renewed_at) "
            "VALUES ('relay', 'standby', 1, clock_timestamp(), clock_timestamp(), clock_timestamp()) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder "
            "WHERE leader_leases.expires_at <= clock_timestamp()")
        with pytest.raises((TimeoutError, Exception)):
            await asyncio.wait_for(pg.renew_leader("relay", "leader", 1, 30), 1.5)
    finally:
        standby.close()


async def test_an_expired_lease_is_still_taken_over_by_one_acquire(pg, pg_url):
    assert await pg.acquire_leader("poller", "old", 0.2) == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:      # waited out on the database clock
        deadline = time.monotonic() + 10
        while not conn.execute("SELECT expires_at <= clock_timestamp() FROM leader_leases").fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    results = await asyncio.gather(pg.acquire_leader("poller", "one", 30), pg.acquire_leader("poller", "two", 30))
    assert sorted(r for r in results if r is not None) == [2] and results.count(None) == 1
