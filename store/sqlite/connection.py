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

Group commit. Two coroutines often write at the same moment (the worker's finish and the relay's look), and each
commit costs an fsync (`synchronous=FULL`). So `write` does not run its transaction alone: the writes waiting when
the connection thread becomes free run together in ONE `BEGIN IMMEDIATE ... COMMIT`, each inside its own SAVEPOINT
(a group of one needs none), in the order they were issued, at most `GROUP_MAX` of them. Nothing waits to form a
group: every write queues one job on the connection thread, and the first of those jobs to run takes every write
then waiting, so a write issued while the thread is idle runs at once, alone, and the writes that arrive while a
group runs form the next.
- Each write is still all-or-nothing: a function that raises is rolled back to its savepoint alone and its caller
  gets the exception (translated as before); the others of its group commit.
- No caller gets its answer before the COMMIT that holds its write returned: the futures are resolved after it. A
  failed COMMIT (disk full, I/O) fails every write of the group with its error, and a kill anywhere inside a group
  (a fault point in a transaction's function, `finish-writes`) loses the whole uncommitted group, none of which was
  acknowledged. When SQLite rolls the whole transaction back under one write (SQLITE_FULL or an I/O error can, not
  just the statement), the writes run before it in the group fail with that error too, and the ones after it run
  in a new transaction.
- So the contracts hold as they did with one commit per write: C1/C2 (an admission is acknowledged only after the
  commit that holds it), C6 (a finish is one savepoint, all of it or nothing, in one durable commit), C7 (`sending`
  is committed before its caller, the relay, gets the answer that lets it make the HTTP call).
- The commit hooks (`CommitHooks`: the refusal tallies and held receipt sets that ride along with the next commit
  that writes anyway) run once per group, before its COMMIT, when one of its writes changed anything; a function
  that asks for them itself (`Database.hooks.before_commit(conn)`, store/shared/store.py `flush_counts`) asks the
  group to run them (see `_Asked`). `Database.commits` counts the real, durable commits: one per group that changed
  anything.
- Reads (`read`) and `raw` calls are jobs of the same thread, run between groups, never inside one; a write issued
  after another's await returned runs in a later transaction and sees it.
"""
from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import aiosqlite

from ..errors import IllegalTransition, NotShopbotDatabase, StoreBusy, StoreError, StoreUnavailable, trigger_table

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000

# The most writes one group commit holds. The fsync is shared by all of them, so 32 already takes more than 96 % of
# the commits out of a queue that long; a larger group would only make its first write wait longer for its answer
# (every function of the group runs before the COMMIT), hold the write lock longer against other processes, and keep
# the reads queued behind it waiting. One process rarely has more than a handful of writers at once.
GROUP_MAX = 32

# Each write of a group of more than one runs inside this savepoint (writes never nest: one at a time).
_SAVEPOINT, _UNDO, _RELEASE = "SAVEPOINT shopbot_write", "ROLLBACK TO shopbot_write", "RELEASE shopbot_write"

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",     # NORMAL may lose the last commits on power loss, which would break C2
    "PRAGMA foreign_keys=ON",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    # A write of a group runs in a savepoint, whose sub-journal keeps the first copy of every page it changes. On
    # disk (the default) a sub-journal past 64 KiB spills to a new temporary file: a finish changes about 25 pages,
    # so nearly every grouped finish opened, wrote and deleted a file (26 of 58 write calls per report in
    # bench.throughput). In memory it costs only what the write changes. VACUUM, whose copy of the whole database
    # is a temporary database too, switches back to a file for its run (`vacuum`).
    "PRAGMA temp_store=MEMORY",
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


def vacuum(conn: sqlite3.Connection) -> None:
    """VACUUM with its copy of the database built in a temporary file, not in memory (`temp_store` is MEMORY on the
    product's connection: a copy in memory would take as much RAM as the database is large)."""
    before = int(conn.execute("PRAGMA temp_store").fetchone()[0])
    conn.execute("PRAGMA temp_store=FILE")
    try:
        conn.execute("VACUUM")
    finally:
        conn.execute(f"PRAGMA temp_store={before}")


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


class _Asked:
    """What a write's function sees as `Database.hooks` while it runs in a group: its own `before_commit(conn)` asks
    the group for the ride-along rows, which the group writes once, in the same commit, after its last function (a
    function's own hook rows could not be undone with its savepoint alone: the hooks keep what they wrote in memory
    until `committed` or `rolled_back`)."""

    __slots__ = ("hooks", "asked")

    def __init__(self, hooks: CommitHooks) -> None:
        self.hooks = hooks
        self.asked = False

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def before_commit(self, conn: SqliteConnection) -> None:
        self.asked = True

    def committed(self) -> None:        # the group calls the hooks' own, once
        pass

    def rolled_back(self) -> None:
        pass


class _Write:
    """One `Database.write` waiting for its group: the function, and the future its caller awaits, resolved from the
    connection thread with (True, result) or (False, exception) once the group's COMMIT has returned (or failed)."""

    __slots__ = ("fn", "args", "future")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], future: asyncio.Future[tuple[bool, Any]]) -> None:
        self.fn = fn
        self.args = args
        self.future = future


def _resolve(outcomes: list[tuple[_Write, bool, Any]]) -> None:
    """On the event loop: each write's answer, in the group's order (a caller gone, its future cancelled: skipped)."""
    for write, ok, value in outcomes:
        if not write.future.done():
            write.future.set_result((ok, value))


class Database:
    """The process's single connection. `write` runs a function inside BEGIN IMMEDIATE ... COMMIT, in a group with
    the writes waiting beside it (module doc)."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        # The last write that could not commit for the lock or the disk (never a refused move): (monotonic time,
        # error). /healthz reports it until a later write probe commits (store/sqlite/health.py).
        self.last_write_failure: tuple[float, StoreError] | None = None
        self.commits = 0          # durable, fsynced commits: one per group of writes that changed the database
        self._hooks: CommitHooks | None = None
        self._waiting: deque[_Write] = deque()   # issued, not yet taken by a group (appended on the loop only)
        self._asked: _Asked | None = None        # while a write's function runs in the connection thread
        self.group_max = GROUP_MAX

    @property
    def hooks(self) -> CommitHooks | None:
        """The commit hooks; a write's function, in the connection thread, sees `_Asked` in their place."""
        asked = self._asked
        if asked is not None and threading.get_ident() == self._conn._thread.ident:
            return asked
        return self._hooks

    @hooks.setter
    def hooks(self, hooks: CommitHooks | None) -> None:
        self._hooks = hooks

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
        """`fn(conn, *args)` (a `SqliteConnection`) inside BEGIN IMMEDIATE ... COMMIT, in its own savepoint of a group
        (module doc). When a write of the group changed anything, `hooks.before_commit` adds its own writes to the
        same commit (the in-memory counters ride along: store/shared/store.py `tally`). Returns, or raises the
        function's error, only after the group's COMMIT returned."""
        conn = self._conn
        if not conn._running or conn._connection is None:
            raise ValueError("Connection closed")           # as aiosqlite's own calls
        write = _Write(fn, args, asyncio.get_running_loop().create_future())
        self._waiting.append(write)
        # One job per write: by the time it runs, every write issued before this one has been taken, so this one is
        # taken by this job at the latest (by an earlier job's group if it was already waiting then).
        conn._tx.put_nowait((None, self._run_waiting))
        ok, value = await write.future
        if ok:
            return cast(T, value)
        if isinstance(value, sqlite3.Error):
            error = translate(value)
            if isinstance(error, (StoreBusy, StoreUnavailable)):
                self.last_write_failure = (time.monotonic(), error)
            raise error from value
        raise value

    def _run_waiting(self) -> None:
        """A job of the connection thread: the writes waiting now (at most `group_max`), as one group."""
        if not self._waiting:         # taken by an earlier job's group
            return
        group: list[_Write] = []
        while len(group) < self.group_max:
            try:
                group.append(self._waiting.popleft())
            except IndexError:
                break
        while group:
            try:
                outcomes, group = self._run_group(group)
            except BaseException as exc:     # a bug, or the ROLLBACK failed: every caller still gets an answer
                outcomes, group = [(write, False, exc) for write in group], []
                self._end_quietly()
            self._answer(outcomes)

    def _end_quietly(self) -> None:
        """No transaction is left open for the next group (its BEGIN would fail)."""
        try:
            raw = self._conn._conn
            if raw.in_transaction:
                raw.execute("ROLLBACK")
        except Exception:               # the error is reported already; the next group's BEGIN reports its own
            pass

    def _answer(self, outcomes: list[tuple[_Write, bool, Any]]) -> None:
        loops: dict[asyncio.AbstractEventLoop, list[tuple[_Write, bool, Any]]] = {}
        for outcome in outcomes:
            loops.setdefault(outcome[0].future.get_loop(), []).append(outcome)
        for loop, some in loops.items():
            try:
                loop.call_soon_threadsafe(_resolve, some)
            except RuntimeError:             # its loop is closed: nobody waits any more
                pass

    def _run_group(self, group: list[_Write]) -> tuple[list[tuple[_Write, bool, Any]], list[_Write]]:
        """Run `group` in one transaction, each write in its own savepoint, in order. Returns each write's outcome (to
        be answered now) and the writes not run yet, when SQLite rolled the transaction back under one of them."""
        raw = self._conn._conn
        hooks = self._hooks
        conn = SqliteConnection(raw)
        asking = None if hooks is None else _Asked(hooks)
        run: list[tuple[_Write, bool, Any]] = []
        changed = asked = hooked = False
        try:
            raw.execute("BEGIN IMMEDIATE")
            for n, write in enumerate(group):
                # the first write needs no savepoint: its failure rolls back the transaction, which holds nothing
                # else yet, and the writes after it run in a new one
                ok, value, write_changed, write_asked = self._run_one(raw, conn, write, asking, n == 0)
                if not ok and not raw.in_transaction:    # gone: the first write's failure, or SQLite rolled it back
                    lost = [(w, False, value) for w, _, _ in run] + [(write, False, value)]
                    return lost, group[n + 1:]
                run.append((write, ok, value))
                changed = changed or write_changed
                asked = asked or write_asked
            hooked = hooks is not None and (changed or asked)
            if hooks is not None and hooked:
                before = raw.total_changes
                hooks.before_commit(conn)
                changed = changed or raw.total_changes != before
            raw.execute("COMMIT")
        except BaseException as error:   # BEGIN, a savepoint, the hooks or the COMMIT failed: nothing is durable
            if raw.in_transaction:
                raw.execute("ROLLBACK")
            if hooked and hooks is not None:
                hooks.rolled_back()
            return [(write, False, error) for write in group], []
        if changed:
            self.commits += 1
        if hooked and hooks is not None:
            hooks.committed()
        return run, []

    def _run_one(self, raw: sqlite3.Connection, conn: SqliteConnection, write: _Write, asking: _Asked | None,
                 first: bool) -> tuple[bool, Any, bool, bool]:
        """One write of a group in its savepoint: (ok, result or exception, changed anything, asked for the hooks).
        A function that raises is rolled back to its savepoint alone (unless SQLite already rolled back the whole
        transaction under it). The first write of a transaction needs no savepoint: its failure rolls it back."""
        if not first:
            raw.execute(_SAVEPOINT)
        before = raw.total_changes
        if asking is not None:
            asking.asked = False
        self._asked = asking
        try:
            result = write.fn(conn, *write.args)
        except BaseException as exc:
            if raw.in_transaction:
                if first:
                    raw.execute("ROLLBACK")
                else:
                    raw.execute(_UNDO)
                    raw.execute(_RELEASE)
            return False, exc, False, False
        finally:
            self._asked = None
        if not first:
            raw.execute(_RELEASE)
        return True, result, raw.total_changes != before, asking is not None and asking.asked

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
