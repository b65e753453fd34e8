"""The SQLite store: every port of store/ports.py on one SQLite file (WAL, synchronous=FULL).

The shared queries and the transaction discipline are the base's (store/shared/store.py); this is what is SQLite's
own: the file path, `PRAGMA data_version`, the page cap and the file's sizes, the instance lock's consequences (no
leases: start-up recovery under the lock), the write probe, VACUUM and the online backup. The hooks are the shared
SQL as it is: one writer at a time (BEGIN IMMEDIATE) makes every check-then-act whole.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from .. import redaction
from ..clock import Clock, to_text
from ..errors import SchemaTooOld, StoreError
from ..records import Claim, MetricsSnapshot, RecoverySummary, Renewal
from ..shared import inbox, stats
from ..shared import metrics as metric_reads
from ..shared.store import DEFAULT_ATTEMPT_CAP, DEFAULT_CAPACITY, DEFAULT_DEBOUNCE_MS, DEFAULT_LEASE_S, BaseStore
from ..shop_records import StateTallies
from . import health, leadership, migrations
from .connection import BUSY_TIMEOUT_MS, Database, SqliteConnection, vacuum
from .dialect import SQLITE

__all__ = ["DEFAULT_ATTEMPT_CAP", "DEFAULT_CAPACITY", "DEFAULT_DEBOUNCE_MS", "DEFAULT_LEASE_S", "SqliteStore"]


class SqliteStore(BaseStore):
    """The embedded default implementation of `store.ports.Store`."""

    db: Database
    _sql = SQLITE
    _leases = leadership
    _db_error = sqlite3.Error

    # ---- lifecycle ----------------------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: Path | str, clock: Clock, *, capacity: int = DEFAULT_CAPACITY,
                   debounce_ms: int = DEFAULT_DEBOUNCE_MS, attempt_cap: int = DEFAULT_ATTEMPT_CAP,
                   create: bool = True, migrate: bool = False, max_pages: int | None = None,
                   secrets: Sequence[str] = (), lease_s: float | None = None) -> SqliteStore:
        """Open a database. A missing or empty one is created at the current schema (when `create`); an older one
        is refused with the command that migrates it (unless `migrate`); a newer one is refused before anything
        changes. `secrets` (the configured credentials) are masked in everything stored from outside text."""
        redaction.register(secrets)
        path = Path(path).resolve()
        db = await Database.open(path, max_pages=max_pages,
                                 probe=lambda conn: migrations.check_not_newer(conn, str(path)))
        try:
            version = await db.raw(lambda conn: migrations.check_not_newer(conn, str(path)))
            if version < migrations.LATEST:
                # a new database, or one whose creation a kill interrupted (migrations.CREATING): created on
                new = version == 0 or await db.raw(migrations.creation_unfinished)
                if new and not create:
                    raise SchemaTooOld(version, migrations.LATEST, str(path))
                if not new and not migrate:
                    raise SchemaTooOld(version, migrations.LATEST, str(path))
                now = to_text(clock.now())
                await db.raw(lambda conn: migrations.migrate(conn, str(path), now))
        except BaseException:
            await db.close()
            raise
        return cls(db, clock, capacity=capacity, debounce_ms=debounce_ms, attempt_cap=attempt_cap)

    @property
    def path(self) -> Path:
        return self.db.path

    @property
    def location(self) -> str:
        return str(self.db.path)

    async def data_version(self) -> int:
        """Changes when another connection commits (cheap cross-process change detection)."""
        return int(await self.db.raw(lambda conn: conn.execute("PRAGMA data_version").fetchone()[0]))

    async def listen(self) -> None:
        """Nothing on SQLite: one process per file wakes its parts in-process, and `poll_changes` notices another
        connection's commit (a CLI admission or resolution)."""

    async def renew(self, claim: Claim) -> Renewal:
        """No expiry on SQLite (one process owns the file under the instance lock): HELD while the run is open, then
        how it ended (`inbox.run_ended`)."""
        return await self.db.read(lambda conn: inbox.run_ended(conn, claim.run_id) or Renewal.HELD)

    async def sweep_expired(self, *, sending: bool = True) -> RecoverySummary:
        """No leases on SQLite: nothing ever expires (start-up `recover` under the instance lock is its recovery)."""
        return RecoverySummary((), (), ())

    async def metrics(self, window_seconds: float = 3600.0, tallies: StateTallies | None = None) -> MetricsSnapshot:
        """Operational figures for /metrics (store/shared/metrics.py `snapshot`, plus C14's `stats` over the window) in
        one read snapshot: never the write lock, no user data. Pass the same `tallies` dict at every call (the caller
        keeps it): the counts by state then cost only what changed since the last call."""
        now_dt = self.clock.now()
        start, end = to_text(now_dt - timedelta(seconds=window_seconds)), to_text(now_dt)

        def read(conn: SqliteConnection) -> MetricsSnapshot:
            return metric_reads.snapshot(conn, now_dt, self._sizes(conn), stats.window(conn, start, end), tallies,
                                         self._sql.oldest_open)
        return await self.db.read(read)

    def _sizes(self, conn: SqliteConnection) -> metric_reads.Sizes:
        page_size, page_count, free = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                                       for p in ("page_size", "page_count", "freelist_count"))
        wal = Path(f"{self.path}-wal")
        return metric_reads.Sizes(page_size * page_count, page_size * free, wal.stat().st_size if wal.exists() else 0)

    async def writable(self, probe_interval_s: float = 5.0) -> str | None:
        """None while writes can commit, else a fixed sentence why not (no path, no data). A write that failed for
        the lock or the disk counts until a later write probe commits; the probe (store/sqlite/health.py: the lock,
        room for new pages, a commit) runs at most every `probe_interval_s` and changes nothing anyone reads."""
        last_probe = self._last_probe
        if last_probe is None or time.monotonic() - last_probe[0] >= probe_interval_s:
            now = self.now()
            try:
                await self.db.raw(lambda conn: health.probe(conn, now, BUSY_TIMEOUT_MS))
                last_probe = (time.monotonic(), None)
            except StoreError as exc:
                last_probe = (time.monotonic(), exc)
            self._last_probe = last_probe
        if last_probe[1] is not None:
            return health.reason(last_probe[1])
        failure = self.db.last_write_failure
        if failure is not None and failure[0] > last_probe[0]:
            return health.reason(failure[1])
        return None

    async def vacuum(self) -> tuple[int, int]:
        """VACUUM: give the pages freed by a prune back to the file system. Holds the write lock for its whole
        run (seconds on a large file) and needs free disk of about the database's size. Returns the file size in
        bytes before and after."""
        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            def size() -> int:
                return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
            before = size()
            vacuum(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return before, size()
        return await self.db.raw(run)

    async def backup(self, target: str) -> None:
        """SQLite's online backup of the live database into `target` (a consistent copy, WAL included)."""
        path = Path(target)
        if path.exists():
            raise FileExistsError(f"{path} exists; choose a new path for the backup")

        def copy(conn: sqlite3.Connection) -> None:
            dest = sqlite3.connect(str(path))
            try:
                conn.backup(dest)
            finally:
                dest.close()
        await self.db.raw(copy)

    async def schema_version(self) -> int:
        return await self.db.read(migrations.current_version)
