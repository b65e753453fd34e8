"""A process frozen (SIGSTOP, a VM pause) in the middle of a lease transaction must not freeze the lease for the
others. Found by tests/acceptance/postgres/test_three_processes.py: a standby stopped between its acquire
statement and its COMMIT held the relay's lease row locked (`INSERT ... ON CONFLICT DO UPDATE ... WHERE` locks the
conflicting row even when its WHERE is false), so the leader's renewal waited, timed out and demoted it, and no
process could take the relay over until the frozen one was continued.

Each test leaves a transaction open on a raw connection, as a frozen process would, and drives the others through
the store."""
from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from store import Fence, StoreBusy, StoreError, StoreUnavailable
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


def wait_lapsed(pg_url: str, name: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:      # waited out on the database clock
        deadline = time.monotonic() + 10
        while not conn.execute("SELECT expires_at <= clock_timestamp() FROM leader_leases WHERE name = %s",
                               (name,)).fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.02)


async def taken_over_within(pg, name: str, seconds: float) -> int | None:  # type: ignore[no-untyped-def]
    """A standby asking for the lapsed lease the way `Leader` does (every half second, each answer awaited a third
    of the lease) until it gets it or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            generation = await asyncio.wait_for(pg.acquire_leader(name, "standby", 3), 2)
        except (StoreError, TimeoutError):
            generation = None
        if generation:
            return int(generation)
        await asyncio.sleep(0.5)
    return None


class FrozenInside:
    """A store transaction (`pg.db.run_write`) that runs `first(conn)` and then blocks, as a leader frozen (SIGSTOP,
    a VM pause) inside it would, until `thaw`; what its end was is kept in `ended`."""

    def __init__(self, pg, first) -> None:  # type: ignore[no-untyped-def]
        self.inside, self.release = threading.Event(), threading.Event()
        self.ended: list[BaseException | str] = []

        def body(conn) -> None:  # type: ignore[no-untyped-def]
            first(conn)
            conn.execute("INSERT INTO counters (minute, kind, count) VALUES ('2027-03-01T09:00', 'frozen', 1)")
            self.inside.set()
            self.release.wait(30)

        def run() -> None:
            try:
                pg.db.run_write(body)
                self.ended.append("committed")
            except BaseException as exc:     # what ended it is the result
                self.ended.append(exc)
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.inside.wait(10)

    def thaw(self) -> BaseException | str:
        self.release.set()
        self.thread.join(10)
        return self.ended[0]


@pytest.mark.parametrize("inside", ["a fenced write", "its renewal"])
async def test_a_leader_frozen_inside_a_lease_transaction_does_not_keep_its_lapsed_lease_from_a_standby(
        pg, pg_url, inside):
    """Found by the K14 flake: the relay's every look is a fenced write (`take_due`), so a leader frozen at a
    random moment was often frozen inside one, its lease row locked FOR SHARE; once the lease lapsed no standby could
    take it (each acquire waited out the 5 s lock timeout, holding a pooled connection) until the frozen process was
    continued. The server now ends a lease transaction left idle for `FROZEN_MS`: the standby takes the lease over
    soon after, and the frozen write commits nothing."""
    generation = await pg.acquire_leader("relay", "leader", 0.5)
    fence = Fence("relay", "leader", generation)
    if inside == "a fenced write":
        frozen_leader = FrozenInside(pg, lambda conn: leadership.fence(conn, fence))
    else:
        frozen_leader = FrozenInside(pg, lambda conn: leadership.renew(conn, "relay", "leader", generation, 0.5))
    try:
        wait_lapsed(pg_url, "relay")
        started = time.monotonic()
        assert await taken_over_within(pg, "relay", leadership.FROZEN_MS / 1000 + 5) == generation + 1
        assert time.monotonic() - started < leadership.FROZEN_MS / 1000 + 5
    finally:
        ended = frozen_leader.thaw()
    assert isinstance(ended, StoreUnavailable), ended      # its connection was ended: nothing of it committed
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM counters WHERE kind = 'frozen'").fetchone()[0] == 0


async def test_negative_control_a_frozen_lease_row_lock_without_the_bound_keeps_the_standby_out(pg, pg_url):
    """The fence as it was (no bound on its transaction's idleness), frozen on a plain connection: the standby
    never gets the lapsed lease while it stays frozen, so the test above would catch the bound's absence. Each
    acquire still comes back within a third of the lease (it never waits for the row longer than its caller)."""
    generation = await pg.acquire_leader("relay", "leader", 0.5)
    holder = frozen(pg_url)
    try:
        assert holder.execute("SELECT 1 FROM leader_leases WHERE name = 'relay' AND holder = 'leader' "
                              "AND generation = %s FOR SHARE", (generation,)).fetchone()
        wait_lapsed(pg_url, "relay")
        started = time.monotonic()
        with pytest.raises(StoreBusy):
            await pg.acquire_leader("relay", "standby", 3)
        assert time.monotonic() - started < 3.0              # a third of the lease, not the 5 s lock timeout
        assert await taken_over_within(pg, "relay", leadership.FROZEN_MS / 1000 + 2) is None
    finally:
        holder.close()
    assert await pg.acquire_leader("relay", "standby", 3) == generation + 1      # once it is gone, at once
