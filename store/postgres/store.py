"""The PostgreSQL store: every port of store/ports.py on a PostgreSQL database (SHOPBOT_DB=postgresql://...).

A sibling of SQLite's store over the same base (store/shared/store.py: the transaction discipline and the shared
queries), never a subclass of it: each method is still one short transaction, a synchronous function run whole in a
thread on one pooled connection. What is PostgreSQL's own: the guarded statements of store/postgres/guards.py,
the URL, the pool, the migrations under an advisory lock, the change hint (migration 0015's counter of this
database's writes instead of `PRAGMA data_version`), the database clock, leases (C15), the database's size
(pg_database_size), and no file backup (pg_dump is the operator's tool).

Time. The triggers, leases and guards never read a clock. The times the contracts compare (admission, debounce,
not-before, report and delivery times) are the store's text times, taken from `Clock`; with the system clock that
is the database server's clock: the offset between this process and the server is measured when the store opens
and every minute after (half a round trip of error), so processes on machines whose clocks disagree still stamp
and compare on one clock (C5); the wake-up times (next claim, delivery, action) are handed back on the process's
clock, which is what its waits use. Any other clock (ManualClock in the tests) is used as it is.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from .. import redaction
from ..clock import Clock, SystemClock, to_text
from ..errors import CommitUnknown, NotClaimed, SchemaTooOld, StoreError
from ..locations import redact
from ..records import Claim, FinishOutcome, MetricsSnapshot, RecoverySummary, Renewal, Taken
from ..shared import inbox, outbox, stats
from ..shared import metrics as metric_reads
from ..shared.connection import Connection
from ..shared.health import reason as unwritable_reason
from ..shared.store import (
    DEFAULT_ATTEMPT_CAP,
    DEFAULT_CAPACITY,
    DEFAULT_DEBOUNCE_MS,
    DEFAULT_LEASE_S,
    BaseStore,
)
from ..shop_records import StateTallies
from . import guards, leadership, migrations, readback
from .connection import Database
from .dialect import POSTGRES
from .notify import Listener

log = logging.getLogger("shopbot.store")

OFFSET_REFRESH_S = 60.0
CLOCK_WARN_S = 2.0           # an offset to the server beyond this is said once at open
READ_BACK_WAITS = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0)   # a read-back that cannot reach the server is tried again


# Every write of a run starts with the lease fence (C15, store/postgres/guards.py `fence`), in its own transaction.
def _finish(conn: Connection, claim: Claim, draft: Any, now: str, **kwargs: Any) -> Any:
    guards.fence(conn, claim.run_id, claim.worker_id)
    guards.hold_epoch(conn, claim.session)
    return inbox.finish(conn, claim, draft, now, **kwargs)


def _release(conn: Connection, claim: Claim, *args: Any, **kwargs: Any) -> str | None:
    guards.fence(conn, claim.run_id, claim.worker_id)
    guards.hold_epoch(conn, claim.session)
    return inbox.release(conn, claim, *args, **kwargs)


def _fail(conn: Connection, claim: Claim, *args: Any, **kwargs: Any) -> str:
    guards.fence(conn, claim.run_id, claim.worker_id)
    return inbox.fail(conn, claim, *args, **kwargs)


def _forget(conn: Connection, session: str, by: str, now: str) -> tuple[int, int]:
    guards.lock_for_forget(conn, session)
    return inbox.forget(conn, session, by, now)


def _resolve(conn: Connection, report_id: str, decision: str, by: str, now: str) -> list[int]:
    guards.lock_unknown_parts(conn, report_id)
    return outbox.resolve(conn, report_id, decision, by, now)



class PostgresStore(BaseStore):
    """`store.ports.Store` on PostgreSQL (psycopg 3, a connection pool, READ COMMITTED with explicit guards)."""

    _admit = staticmethod(guards.admit)
    _admit_answered = staticmethod(guards.admit_answered)
    _finish = staticmethod(_finish)
    _release = staticmethod(_release)
    _fail = staticmethod(_fail)
    _guard_run = staticmethod(guards.fence)
    _forget = staticmethod(_forget)
    _approve = staticmethod(guards.approve)
    _resolve = staticmethod(_resolve)
    _producer_state = guards.ProducerState
    _sql = POSTGRES
    _leases = leadership
    _seed = staticmethod(guards.seed_shop)
    _sync = staticmethod(guards.sync_shop)
    _import_sales = staticmethod(guards.import_sales)
    _db_error = psycopg.Error
    db: Database

    def __init__(self, db: Any, clock: Clock, *, lease_s: float = DEFAULT_LEASE_S, **options: Any) -> None:
        super().__init__(db, clock, **options)
        if not lease_s > 0:
            raise ValueError(f"a lease must be a positive number of seconds, not {lease_s!r}")
        self.lease_s: float | None = float(lease_s)
        self._lease = float(lease_s)
        self._offset = timedelta(0)
        self._offset_at = float("-inf")
        self.listener: Listener | None = None

    def _claim(self, conn: Connection, worker_id: str, run_id: str, now: str, cutoff: str,
               skip_sessions: Sequence[str] = ()) -> Claim | None:
        return guards.claim(conn, worker_id, run_id, now, cutoff, skip_sessions, lease_s=self._lease)

    # ---- leases (C15) ---------------------------------------------------------------------------------------
    async def renew(self, claim: Claim) -> Renewal:
        """The run's lease extended by `lease_s` from now on the database clock, if it is still live (HELD); else
        ENDED (its own ending write committed) or LAPSED (never revived)."""
        return await self.db.write(lambda conn: guards.renew(conn, claim.run_id, self._lease))

    async def sweep_expired(self, *, sending: bool = True) -> RecoverySummary:
        """Recover every expired lease, one run per transaction (store/postgres/guards.py `sweep_one`); then (C16,
        with `sending`) every `sending` delivery and action whose sender's leader lease is no longer current becomes
        unknown (`sweep_sending`). Live leases and a live sender's sends are never touched."""
        released: list[int] = []
        failed: list[int] = []
        while True:
            done = await self.db.write(guards.sweep_one, self.now(), self.attempt_cap)
            if done is None:
                break
            (released if done[0] else failed).extend(done[1])
        unknown: list[int] = []
        if sending:
            unknown, _ = await self.sweep_sending()
        if released or failed:
            self.signals.work.notify()
        if failed or unknown:
            self.signals.deliveries.notify()
        return RecoverySummary(tuple(released), tuple(failed), tuple(unknown))

    @classmethod
    async def open(cls, url: Any, clock: Clock, *, capacity: int = DEFAULT_CAPACITY,
                   debounce_ms: int = DEFAULT_DEBOUNCE_MS, attempt_cap: int = DEFAULT_ATTEMPT_CAP,
                   create: bool = True, migrate: bool = False, max_pages: int | None = None,
                   secrets: Sequence[str] = (), pool_size: int = 8,
                   lease_s: float | None = DEFAULT_LEASE_S) -> PostgresStore:
        """Open the database at `url`. A database without shopbot's tables is given the current schema (when
        `create`); an older one is refused with the command that migrates it (unless `migrate`); a newer one is
        refused before anything changes. `max_pages` is SQLite's test-only cap and is refused here."""
        if max_pages:
            raise ValueError("SHOPBOT_DB_MAX_PAGES is SQLite's; a PostgreSQL database has no page cap")
        redaction.register(secrets)
        where = redact(str(url))
        db = await Database.open(str(url), max_size=pool_size)
        try:
            version = await db.raw(lambda conn: migrations.settled_version(conn, where))
            if version < migrations.LATEST:
                if version == 0 and not create:
                    raise SchemaTooOld(0, migrations.LATEST, where)
                if version > 0 and not migrate:
                    raise SchemaTooOld(version, migrations.LATEST, where)
                now = to_text(clock.now())
                await db.raw(lambda conn: migrations.migrate(conn, where, now))
            store = cls(db, clock, capacity=capacity, debounce_ms=debounce_ms, attempt_cap=attempt_cap,
                        lease_s=DEFAULT_LEASE_S if lease_s is None else lease_s)
            await store._measure_offset()
            if abs(store._offset.total_seconds()) > CLOCK_WARN_S:
                log.warning("this process's clock is %+.1f s off the database server's; times are stamped and leases "
                            "judged on the server's clock", -store._offset.total_seconds())
        except BaseException:
            await db.close()
            raise
        return store

    @property
    def location(self) -> str:
        return redact(self.db.url)

    # ---- the database clock -------------------------------------------------------------------------------
    async def _measure_offset(self) -> None:
        if not isinstance(self.clock, SystemClock):
            return
        before = self.clock.now()
        server = await self.db.read(lambda conn: conn.execute("SELECT clock_timestamp()").fetchone()[0])
        after = self.clock.now()
        self._offset = server - (before + (after - before) / 2)
        self._offset_at = time.monotonic()

    def now_dt(self) -> datetime:
        return self.clock.now() + self._offset

    # The wake-up times, handed to callers that wait on `clock` (the process's clock): moved back by the offset.
    def _on_process_clock(self, at: datetime | None) -> datetime | None:
        return at - self._offset if at else None

    async def database_now(self) -> datetime:
        """The server's clock (what the store stamps with when its clock is the system clock)."""
        return await self.db.read(lambda conn: conn.execute("SELECT clock_timestamp()").fetchone()[0])

    # ---- leader leases (C16): judged by the database clock alone -------------------------------------------------
    def _lease_span(self, lease_s: float) -> float:
        return lease_s

    # ---- K16: a commit whose answer was lost is read back, never guessed ---------------------------------------
    async def _settled(self, what: str, commit: Callable[[], Awaitable[Any]],
                       read: Callable[[Connection], tuple[str, Any]],
                       refused: Callable[[str], StoreError]) -> Any:
        """Run `commit`; when its connection was lost after COMMIT was sent, read the outcome back from the records
        on a fresh connection (store/postgres/readback.py): done (return it), not committed (run it again), or
        refused (`refused(why)` is raised). A read-back that cannot reach the server either is tried a few times,
        then the CommitUnknown stands (the worker gives the turn back, and a release finds it finished if it was)."""
        while True:
            try:
                return await commit()
            except CommitUnknown as lost:
                log.warning("commit outcome unknown for %s (%s); reading it back from the records", what, lost)
                verdict, value = await self._read_back(read, lost)
            log.info("commit outcome of %s read back: %s", what, verdict if verdict != "refused" else value)
            if verdict == readback.DONE:
                return value
            if verdict == readback.REFUSED:
                raise refused(f"its commit was lost and the records say it is {value}; nothing more is written")

    async def _read_back(self, read: Callable[[Connection], tuple[str, Any]],
                         lost: CommitUnknown) -> tuple[str, Any]:
        for wait in (*READ_BACK_WAITS, None):
            try:
                return await self.db.read(read)
            except StoreError:
                if wait is None:
                    raise lost from None
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def _commit_finish(self, body: Callable[[Any], FinishOutcome], claim: Claim,
                             next_run_id: str | None) -> FinishOutcome:
        return await self._settled(
            f"the finish of run {claim.run_id}", lambda: self.db.write(body),
            lambda conn: readback.finish_outcome(conn, claim, next_run_id),
            lambda why: NotClaimed(claim.run_id, why))

    async def _commit_sending(self, body: Callable[[Any], None], delivery_id: int) -> None:
        await self._settled(f"the sending mark of delivery {delivery_id}", lambda: self.db.write(body),
                            lambda conn: readback.sending_outcome(conn, delivery_id),
                            lambda why: StoreError(f"delivery {delivery_id} was not marked sending: {why}"))

    async def _commit_take(self, body: Callable[[Any], Taken], now: str, confirms: Sequence[tuple[int, str]],
                           sender: str | None) -> Taken:
        result: Taken = await self._settled(
            "the sending mark of delivery (the next due ones)", lambda: self.db.write(body),
            lambda conn: readback.take_outcome(conn, self._sql, now, confirms, sender),
            lambda why: StoreError(f"no delivery was marked sending: {why}"))
        return dataclasses.replace(result, next_wake=self._on_process_clock(result.next_wake))

    # ---- schema, change hints ---------------------------------------------------------------------------------
    async def listen(self) -> None:
        """Start this process's LISTEN connection (store/postgres/notify.py): another process's commit of pending
        work, deliveries or actions sets the matching signal at once; a reconnect or `SCAN_S` without a notification
        sets them all (a full scan). A hint only: `poll_changes` and every part's own periodic look stay."""
        if self.listener is None:
            self.listener = Listener(self.db.url, self.signals)
            self.listener.start()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()
        await super().close()

    async def schema_version(self) -> int:
        return await self.db.read(migrations.current_version)

    async def data_version(self) -> int:
        """Moves whenever a statement wrote work, deliveries or actions in this database (migration 0015's sequence,
        drawn by a statement trigger); a hint, like SQLite's: other databases of the server never move it."""
        if time.monotonic() - self._offset_at > OFFSET_REFRESH_S:
            await self._measure_offset()
        return int(await self.db.raw(
            lambda conn: conn.execute("SELECT last_value + (CASE WHEN is_called THEN 1 ELSE 0 END) "
                                      "FROM shopbot_changes").fetchone()[0]))

    # ---- operations: health, metrics, vacuum (PostgreSQL has no pages, WAL file or busy timeout of its own) -------
    async def writable(self, probe_interval_s: float = 5.0) -> str | None:
        """None while writes commit, else a fixed sentence why not: a one-row write probe at most every
        `probe_interval_s` (under the pool's lock timeout), as SQLite's (store/sqlite/health.py)."""
        last = self._last_probe
        if last is None or time.monotonic() - last[0] >= probe_interval_s:
            now = self.now()
            try:
                await self.db.write(lambda conn: conn.execute(
                    "INSERT INTO health_probe (id, probed_at) VALUES (1, $1) "
                    "ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at", (now,)))
                last = (time.monotonic(), None)
            except StoreError as exc:
                last = (time.monotonic(), exc)
            self._last_probe = last
        return unwritable_reason(last[1]) if last[1] is not None else None

    async def metrics(self, window_seconds: float = 3600.0, tallies: StateTallies | None = None) -> MetricsSnapshot:
        """SQLite's figures (store/shared/metrics.py `snapshot`); the sizes are the database's (pg_database_size),
        with no free pages and no WAL file of its own (the server's WAL is the cluster's)."""
        now_dt = self.now_dt()
        start, end = to_text(now_dt - timedelta(seconds=window_seconds)), to_text(now_dt)

        settled = await self._settled_ids()

        def read(conn: Connection) -> MetricsSnapshot:
            window = stats.window(conn, start, end)
            size = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
            return metric_reads.snapshot(conn, now_dt, metric_reads.Sizes(size), window, tallies, self._sql.oldest_open,
                                         settled)
        return await self.db.read(read)

    async def vacuum(self) -> tuple[int, int]:
        """VACUUM (autovacuum does this on its own; this runs it now). Returns the database's size before and after."""
        def run(conn: Connection) -> tuple[int, int]:
            def size() -> int:
                return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
            before = size()
            conn.execute("VACUUM")
            return before, size()
        return await self.db.raw(run)

    async def backup(self, target: str) -> None:
        raise StoreError(
            "a PostgreSQL store is backed up with PostgreSQL's own tools: "
            f"pg_dump --format=custom --file={target} '<SHOPBOT_DB>' (restore with pg_restore into an empty "
            "database, then `shopbot migrate`); point-in-time recovery needs WAL archiving on the server")

