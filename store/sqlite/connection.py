"""One SQLite connection per process, through aiosqlite, with every transaction a short synchronous function.

Why functions and not awaited statements: an aiosqlite statement costs a thread round trip (~0.2 ms here), so a
transaction written as a chain of awaits is slow and, worse, can be interleaved with another coroutine's
statements on the same connection. Here a transaction is a plain function run whole in aiosqlite's connection
thread, one hop per transaction: it cannot await a network call or a model, and two transactions of this process
can never interleave (the thread runs one function at a time). `BEGIN IMMEDIATE` takes the write lock at the start,
so a transaction never fails half-way on a lock upgrade.

A transaction's function gets a `SqliteConnection`, the store's `Connection` (store/shared/connection.py): the SQL
of store/ marks its parameters as PostgreSQL does, `$1` .. `$n`, which SQLite reads as named parameters ("1", "2",
...), so the parameters are handed to sqlite3 keyed by their number (`numbered`). The statement's text is never
changed.
"""
from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite

from ..errors import IllegalTransition, NotShopbotDatabase, StoreBusy, StoreError, StoreUnavailable, trigger_table

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",     # NORMAL may lose the last commits on power loss, which would break C2
    "PRAGMA foreign_keys=ON",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
)


# SQLite's own integrity failures ("UNIQUE constraint failed: ..."); every other IntegrityError is a trigger's
# RAISE(ABORT, ...) (schema.sql: `C7: deliveries: ...`, or an order's or a sales day's refusal).
_CONSTRAINT = re.compile(r"(UNIQUE|NOT NULL|CHECK|FOREIGN KEY|PRIMARY KEY) constraint failed")


def translate(exc: sqlite3.Error) -> StoreError:
    """Driver errors become the store's own; nothing outside store/ sees sqlite3. A trigger's refusal is an
    IllegalTransition, as PostgreSQL's RAISE EXCEPTION is (store/postgres/connection.py); a constraint's failure
    stays a StoreError."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError) and not _CONSTRAINT.match(text):
        return IllegalTransition(text, table=trigger_table(text))
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreBusy(f"the database stayed locked by another process for over {BUSY_TIMEOUT_MS} ms: {text}")
    if isinstance(exc, sqlite3.OperationalError) and any(
            word in text for word in ("full", "readonly", "read-only", "disk I/O", "unable to open")):
        return StoreUnavailable(f"the database cannot be written: {text}")
    return StoreError(f"{type(exc).__name__}: {text}")


def opening_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """An error met while opening `path`, as one sentence naming the file."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and any(
            word in text for word in ("not a database", "malformed", "encrypted")):
        return NotShopbotDatabase(str(path), f"damaged or not SQLite: {text}")
    if isinstance(exc, sqlite3.OperationalError) and any(
            word in text for word in ("unable to open", "readonly", "read-only", "disk I/O")):
        return StoreUnavailable(f"cannot open the database {path}: {text} (is its folder writable, and the file "
                                "a readable regular file?)")
    return translate(exc)


async def _close_quietly(conn: aiosqlite.Connection) -> None:
    """Stop the connection's thread and wait until it has stopped (while the event loop still runs: a thread that
    answers a closed loop prints a traceback, one that is never stopped keeps the process alive)."""
    try:
        await conn.close()      # a failed connect has already queued the thread's stop (nothing to close)
    except Exception:           # the thread must stop; the opening error is the one to report
        conn.stop()
    thread = conn._thread
    if thread.is_alive():
        await asyncio.to_thread(thread.join, 10)


def configure(conn: sqlite3.Connection, max_pages: int | None = None) -> None:
    for pragma in PRAGMAS:
        conn.execute(pragma)
    if max_pages:
        # Test-only (SHOPBOT_DB_MAX_PAGES): a database that becomes full while the bot runs.
        conn.execute(f"PRAGMA max_page_count={int(max_pages)}")
    conn.row_factory = sqlite3.Row


_NUMBERS = tuple(str(n) for n in range(1, 101))


def numbered(params: Sequence[Any]) -> dict[str, Any]:
    """`params` keyed by their mark's number, `$1` the first: how sqlite3 binds SQLite's named marks. (Binding the
    named marks from a plain sequence is deprecated since Python 3.12.)"""
    if len(params) <= len(_NUMBERS):
        return dict(zip(_NUMBERS, params))
    return {str(n): value for n, value in enumerate(params, start=1)}


class SqliteConnection:
    """The process's connection inside one transaction: the store's `Connection`. `raw` is sqlite3's own."""

    __slots__ = ("raw",)

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.raw.execute(sql, numbered(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self.raw.executemany(sql, map(numbered, rows))


class CommitHooks(Protocol):
    def before_commit(self, conn: SqliteConnection) -> None: ...

    def committed(self) -> None: ...

    def rolled_back(self) -> None: ...


class Database:
    """The process's single connection. `write` runs a function inside BEGIN IMMEDIATE ... COMMIT."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        # The last write that could not commit for the lock or the disk (never a refused move): (monotonic time,
        # error). /healthz reports it until a later write probe commits (store/sqlite/health.py).
        self.last_write_failure: tuple[float, StoreError] | None = None
        self.commits = 0          # write transactions that changed the database (each a durable, fsynced commit)
        self.hooks: CommitHooks | None = None

    @classmethod
    async def open(cls, path: Path, *, max_pages: int | None = None,
                   probe: Callable[[sqlite3.Connection], object] | None = None) -> Database:
        """Connect and configure. `probe(raw)` runs first, before any pragma changes the file (a foreign file is
        refused untouched: WAL mode would rewrite its header). Any failure closes the connection's thread before
        raising (a thread left open would keep the process alive for ever after the error was printed), and names
        the file."""
        conn = aiosqlite.connect(str(path), isolation_level=None)  # autocommit: we issue BEGIN ourselves
        try:
            await conn
        except sqlite3.Error as exc:
            await _close_quietly(conn)
            raise opening_error(exc, path) from exc
        db = cls(conn, path)
        try:
            def setup(raw: sqlite3.Connection) -> None:
                if probe is not None:
                    probe(raw)
                configure(raw, max_pages)
            await db._conn._execute(setup, db._conn._conn)  # type: ignore[no-untyped-call]
        except BaseException as exc:
            await _close_quietly(conn)
            if isinstance(exc, sqlite3.Error):
                raise opening_error(exc, path) from exc
            raise
        return db

    async def close(self) -> None:
        await self._conn.close()

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # aiosqlite runs every call in its connection thread; we hand it one whole function (see module doc).
        raw = self._conn._conn
        try:
            return await self._conn._execute(fn, raw)  # type: ignore[no-untyped-call]
        except sqlite3.Error as exc:
            raise translate(exc) from exc

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(conn, *args)` (a `SqliteConnection`) inside BEGIN IMMEDIATE ... COMMIT. When it changed anything,
        `hooks.before_commit` adds its own writes to the same commit (the in-memory counters ride along:
        store/shared/store.py `tally`)."""
        def transaction(raw: sqlite3.Connection) -> T:
            raw.execute("BEGIN IMMEDIATE")
            before = raw.total_changes
            hooked = False
            try:
                conn = SqliteConnection(raw)
                result = fn(conn, *args)
                if self.hooks is not None and raw.total_changes != before:
                    hooked = True
                    self.hooks.before_commit(conn)
                raw.execute("COMMIT")
            except BaseException:
                if raw.in_transaction:
                    raw.execute("ROLLBACK")
                if hooked and self.hooks is not None:
                    self.hooks.rolled_back()
                raise
            if raw.total_changes != before:
                self.commits += 1
            if hooked and self.hooks is not None:
                self.hooks.committed()
            return result
        try:
            return await self._call(transaction)
        except (StoreBusy, StoreUnavailable) as exc:
            self.last_write_failure = (time.monotonic(), exc)
            raise

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """A consistent read: one deferred transaction, so several queries see one snapshot."""
        def snapshot(raw: sqlite3.Connection) -> T:
            raw.execute("BEGIN")
            try:
                return fn(SqliteConnection(raw), *args)
            finally:
                raw.execute("ROLLBACK")
        return await self._call(snapshot)

    async def raw(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Outside any transaction, on sqlite3's own connection (migrations manage their own transactions, backup,
        pragmas); a statement with `$n` marks binds through `SqliteConnection` (or `numbered`) there too."""
        return await self._call(fn)
