"""PostgreSQL connections from a psycopg_pool.ConnectionPool, with every transaction a short synchronous function.

The shape is SQLite's (store/sqlite/connection.py): a transaction is one plain function run whole in a thread
(`asyncio.to_thread`) on one pooled connection, so it cannot await a network call or a model, and the
`Transaction` handed to producers and ingress stays synchronous. What differs: PostgreSQL has no global writer
lock, so every check-then-act that SQLite's BEGIN IMMEDIATE serialises takes its own guard (store/postgres/guards.py).

`PgConnection` is the store's `Connection` (store/shared/connection.py: `execute`, `executemany`, rows readable by
name and by position), so SQL that is the same in both dialects is written once, in store/shared; what differs is
written in PostgreSQL's words in this package (dialect.py, guards.py, leadership.py). Every statement of store/ marks
its parameters as PostgreSQL does, `$1` .. `$n`; the pool's cursors (`PgCursor`, a `psycopg.RawCursor`) send the
text as written and the parameters beside it, and the server binds them. Nothing rewrites a statement.
"""
from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.adapt import Loader
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import (
    CommitUnknown,
    ConnectionLost,
    IllegalTransition,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    trigger_table,
)
from ..locations import redact

T = TypeVar("T")

CONNECT_TIMEOUT_S = 5
# Every connection of this process carries this name (pg_stat_activity.application_name): an operator can tell the
# shopbot processes connected to the database apart (`shopbot status` lists them by lease holder, C16).
PROCESS_PREFIX = "shopbot "
PROCESS_NAME = f"{PROCESS_PREFIX}{os.getpid()}.{uuid.uuid4().hex[:8]}"
LOCK_TIMEOUT_MS = 5000        # like SQLite's busy timeout: a lock held longer is StoreBusy, never a hang


class Row(tuple):  # type: ignore[type-arg]
    """A row readable as `row["column"]` and `row[0]`, and convertible with dict(row), like sqlite3.Row."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], Row]:
    names = tuple(c.name for c in cursor.description or ())
    cls = type("Row", (Row,), {"_names": names})
    return lambda values: cls(values)


class _IntegralNumeric(Loader):
    """sum() of a bigint column is numeric in PostgreSQL: give back an int when it is whole (as SQLite does)."""

    def load(self, data: Any) -> Any:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class PgConnection:
    """One pooled connection inside one open transaction: the store's `Connection` (store/shared/connection.py). The
    SQL goes to the server unchanged, its `$n` marks bound there from `params` (a statement without parameters goes
    by the simple query protocol, so a migration file of several statements runs whole)."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = PgCursor(self.raw)         # whatever cursor the connection was opened with (the tests' own)
        cursor.execute(sql, params)
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            PgCursor(self.raw).executemany(sql, rows)


def translate(exc: psycopg.Error) -> StoreError:
    """Driver errors become the store's own, by SQLSTATE; nothing outside store/ sees psycopg."""
    text = str(exc).split("\nCONTEXT:")[0].strip()
    if isinstance(exc, pgerrors.RaiseException):     # the triggers' `Cn: ...` refusals (RAISE EXCEPTION, P0001)
        return IllegalTransition(text, table=trigger_table(text))
    if isinstance(exc, (pgerrors.LockNotAvailable, pgerrors.SerializationFailure, pgerrors.DeadlockDetected,
                        pgerrors.QueryCanceled)):
        return StoreBusy(f"the database stayed locked by another transaction longer than the statement waits for a "
                         f"lock (at most {LOCK_TIMEOUT_MS} ms): {text}")
    if isinstance(exc, (psycopg.OperationalError, pgerrors.DiskFull, pgerrors.ReadOnlySqlTransaction,
                        pgerrors.AdminShutdown, pgerrors.InsufficientPrivilege)):
        return StoreUnavailable(f"the database cannot be written: {text}")
    return StoreError(f"{type(exc).__name__}: {text}")


def commit_outcome_unknown(raw: psycopg.Connection[Any], exc: psycopg.Error) -> bool:
    """K16: a COMMIT that failed with the connection (lost, closed, a server that went away: no SQLSTATE, or class
    08 connection exception, 57 operator intervention) may have committed; a COMMIT the server answered with an
    error (a serialization failure, a deferred constraint) certainly did not."""
    state = exc.sqlstate
    return raw.broken or raw.closed or state is None or state.startswith(("08", "57"))


def configure(raw: psycopg.Connection[Any]) -> None:
    raw.row_factory = _row_factory
    raw.adapters.register_loader("numeric", _IntegralNumeric)


class _IdleConnectionLost(Exception):
    """A pooled connection was found dead at BEGIN, before anything of the transaction ran."""


def _lost(exc: BaseException) -> ConnectionLost:
    """A connection the server ended before COMMIT was sent, said with the server's own reason (a ROLLBACK tried on
    the dead connection fails with "the connection is closed": the first error is the one that says why)."""
    while isinstance(exc.__context__, psycopg.Error):
        exc = exc.__context__
    text = str(exc).strip().splitlines()
    return ConnectionLost(f"the database server ended the connection before the transaction committed (nothing "
                          f"was written): {text[0] if text else type(exc).__name__}")


class Database:
    """A pool of connections. `write` runs a function inside one READ COMMITTED transaction and commits it; `read`
    runs it inside a REPEATABLE READ, READ ONLY transaction (one snapshot for several queries)."""

    def __init__(self, pool: ConnectionPool[Any], url: str) -> None:
        self._pool = pool
        self.url = url
        # the store's in-memory counts (store/shared/tallies.py), written with the next write while there are any
        self.hooks: Any = None

    @classmethod
    async def open(cls, url: str, *, max_size: int = 8) -> Database:
        def connect() -> ConnectionPool[Any]:
            try:                      # one direct attempt first: a refused or failed login is reported at once
                psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
            except psycopg.Error as exc:
                reason = str(exc).replace(url, redact(url)).strip().splitlines()[0]
                raise StoreUnavailable(f"cannot connect to PostgreSQL at {redact(url)}: {reason}") from None
            pool: ConnectionPool[Any] = ConnectionPool(
                url, min_size=1, max_size=max_size, open=False, configure=configure, timeout=CONNECT_TIMEOUT_S,
                kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                        "cursor_factory": PgCursor, "prepare_threshold": None, "application_name": PROCESS_NAME,
                        "options": f"-c lock_timeout={LOCK_TIMEOUT_MS} -c TimeZone=UTC"})
            try:
                pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except PoolTimeout as exc:
                pool.close()
                raise StoreUnavailable(f"no PostgreSQL server answered at {redact(url)}: {exc}") from exc
            return pool
        return cls(await asyncio.to_thread(connect), url)

    async def close(self) -> None:
        await asyncio.to_thread(self._pool.close)

    def _run(self, begin: str, fn: Callable[..., T], args: tuple[Any, ...], commit: bool) -> T:
        try:
            return self._run_once(begin, fn, args, commit)
        except _IdleConnectionLost:
            # the server ended a connection while it sat idle in the pool (a restart, pg_terminate_backend, an idle
            # timeout): nothing of this transaction ran, so it runs once more on a fresh one
            return self._run_once(begin, fn, args, commit, retry=False)

    def _run_once(self, begin: str, fn: Callable[..., T], args: tuple[Any, ...], commit: bool,
                  retry: bool = True) -> T:
        try:
            with self._pool.connection() as raw:
                try:
                    raw.execute(begin)
                except psycopg.OperationalError as exc:
                    if raw.broken:
                        if retry:
                            raise _IdleConnectionLost() from None   # the pool discards the broken connection
                        raise _lost(exc) from exc
                    raise
                # the in-memory counts ride along with every write, as on SQLite (nothing is written when none are
                # held). Every write settles its hooks, held or not: a function may hand them its connection itself
                # (`flush_counts`), and counts held after this BEGIN may be written then; a share left unsettled
                # would stay in flight for ever
                hooks = self.hooks if commit else None     # the same object from before_commit to the end
                try:
                    result = fn(PgConnection(raw), *args)
                    if hooks is not None:
                        hooks.before_commit(PgConnection(raw))
                except BaseException as exc:
                    if hooks is not None:
                        hooks.rolled_back()
                    if raw.broken:
                        # the server ended the connection inside the transaction, so it rolled it back: a ROLLBACK
                        # here would only fail again ("the connection is closed") and hide why
                        raise _lost(exc) from exc
                    raw.execute("ROLLBACK")
                    raise
                if not commit:
                    raw.execute("ROLLBACK")
                    return result
                try:
                    raw.execute("COMMIT")
                except psycopg.Error as exc:
                    unknown = commit_outcome_unknown(raw, exc)
                    if hooks is not None:
                        # an outcome nobody can read back is taken as stored: the counts may be lost (as in a crash),
                        # never written twice; a receipt's set not stored is found pending and set again (C19)
                        if unknown:
                            hooks.committed()
                        else:
                            hooks.rolled_back()
                    if unknown:
                        raise CommitUnknown(f"the connection was lost after COMMIT was sent: "
                                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
                                            ) from exc
                    raise
                if hooks is not None:
                    hooks.committed()
                return result
        except PoolTimeout as exc:
            raise StoreBusy(f"no free database connection within {CONNECT_TIMEOUT_S} s: {exc}") from exc
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def run_write(self, fn: Callable[..., T], *args: Any) -> T:
        """Synchronously, in the caller's thread (the concurrency tests drive connections from threads)."""
        return self._run("BEGIN ISOLATION LEVEL READ COMMITTED", fn, args, commit=True)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(self.run_write, fn, *args)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(self._run, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", fn, args,
                                       False)

    async def raw(self, fn: Callable[[PgConnection], T]) -> T:
        """A function that manages its own transactions (migrations), on an autocommit connection."""
        def call() -> T:
            try:
                with self._pool.connection() as raw:
                    try:
                        return fn(PgConnection(raw))
                    except psycopg.Error as exc:
                        if raw.broken:      # ended by the server: its open transaction, if any, was rolled back
                            raise _lost(exc) from exc
                        raise
            except psycopg.Error as exc:
                raise translate(exc) from exc
        return await asyncio.to_thread(call)


class PgCursor(psycopg.RawCursor[Any]):
    """Server-side binding with PostgreSQL's own `$1` marks: psycopg parses nothing of the statement (no `%s`, and
    `%` is an ordinary character), so the text the server runs is the text written in store/. The pool's
    connections prepare nothing by name (`prepare_threshold=None`): every execution carries its text, as the simple
    protocol did before, so a transaction-mode pooler has no named statement to lose and K16's proxy
    (tests/support/pg_proxy.py) sees every statement. A new row's id comes from `INSERT ... RETURNING` (`lastval()`
    is the last value of ANY sequence this session drew: a trigger's sequence, migration 0015, draws after the
    INSERT's)."""
