"""Group commit (store/sqlite/connection.py `Database.write`): the writes waiting when the connection thread becomes
free run in ONE `BEGIN IMMEDIATE ... COMMIT`, each in its own savepoint, on a real SQLite file.

The connection thread is held busy by a `raw` call that waits on an event (a thread event, set by the test, never a
sleep), so the writes issued meanwhile are all waiting when it becomes free. A commit is counted twice: by
`Database.commits` and by the commit frames in the WAL file itself (read from the file's bytes)."""
from __future__ import annotations

import asyncio
import sqlite3
import struct
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from store import StoreBusy, StoreError
from store.sqlite.connection import GROUP_MAX, Database, SqliteConnection, vacuum

DEADLINE_S = 10


def wal_commits(path: Path) -> int:
    """Commit frames in the WAL file (a frame whose 'database size after commit' is set), of its current salt."""
    data = Path(f"{path}-wal").read_bytes()
    if len(data) < 32:
        return 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salt = data[16:24]
    commits = 0
    for offset in range(32, len(data) - 24 - page_size + 1, 24 + page_size):
        header = data[offset:offset + 24]
        if header[8:16] != salt:
            break
        commits += struct.unpack(">I", header[4:8])[0] != 0
    return commits


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "group.sqlite3")

    def schema(raw: sqlite3.Connection) -> None:
        raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT)")
        raw.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        raw.execute("CREATE TABLE child (id INTEGER PRIMARY KEY, "
                    "parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    await database.raw(schema)
    yield database
    await database.close()


class Held:
    """The connection thread held busy (a `raw` call waiting on an event) until `release`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.started = threading.Event()
        self.go = threading.Event()
        self.task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> Held:
        def hold(raw: sqlite3.Connection) -> None:
            self.started.set()
            assert self.go.wait(DEADLINE_S), "the test never released the connection thread"
        self.task = asyncio.create_task(self.db.raw(hold))
        assert await asyncio.to_thread(self.started.wait, DEADLINE_S)
        return self

    def release(self) -> None:
        self.go.set()

    async def __aexit__(self, *exc: object) -> None:
        self.go.set()
        assert self.task is not None
        await self.task


async def issued(db: Database, *calls: tuple[Callable[..., Any], tuple[Any, ...]]) -> list[asyncio.Task[Any]]:
    """Start a write per call and return once every one of them is waiting for its group (in the issued order)."""
    tasks = []
    for fn, args in calls:
        tasks.append(asyncio.create_task(db.write(fn, *args)))
        await waiting(db, len(tasks))
    return tasks


async def waiting(db: Database, n: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while len(db._waiting) < n:
        assert loop.time() < deadline, f"{len(db._waiting)} writes waiting, not {n}"
        await asyncio.sleep(0)


def insert(conn: SqliteConnection, row_id: int, note: str = "") -> int:
    conn.execute("INSERT INTO t (id, note) VALUES ($1, $2)", (row_id, note))
    return row_id


def insert_then_fail(conn: SqliteConnection, row_id: int) -> None:
    conn.execute("INSERT INTO t (id, note) VALUES ($1, 'leaked')", (row_id,))
    raise ValueError("refused after its insert")


async def ids(db: Database) -> list[int]:
    return await db.read(lambda conn: [r[0] for r in conn.execute("SELECT id FROM t ORDER BY id").fetchall()])


async def test_writes_waiting_together_commit_once(db: Database):
    commits, frames = db.commits, wal_commits(db.path)
    async with Held(db) as held:
        tasks = await issued(db, *[(insert, (n,)) for n in range(1, 6)])
        held.release()
        assert await asyncio.gather(*tasks) == [1, 2, 3, 4, 5]
    assert await ids(db) == [1, 2, 3, 4, 5]
    assert db.commits == commits + 1
    assert wal_commits(db.path) == frames + 1


async def test_negative_control_groups_of_one_commit_each_write(db: Database):
    """With a group of at most one write, the same five writes are five commits: the count above sees groups."""
    db.group_max = 1
    commits, frames = db.commits, wal_commits(db.path)
    async with Held(db) as held:
        tasks = await issued(db, *[(insert, (n,)) for n in range(1, 6)])
        held.release()
        await asyncio.gather(*tasks)
    assert db.commits == commits + 5
    assert wal_commits(db.path) == frames + 5


async def test_a_group_holds_at_most_group_max_writes(db: Database):
    commits = db.commits
    async with Held(db) as held:
        tasks = await issued(db, *[(insert, (n,)) for n in range(1, GROUP_MAX + 9)])
        held.release()
        await asyncio.gather(*tasks)
    assert db.commits == commits + 2       # GROUP_MAX, then the 8 left


async def test_writes_of_a_group_run_in_the_order_issued(db: Database):
    order: list[int] = []

    def noted(conn: SqliteConnection, n: int) -> None:
        order.append(n)
        insert(conn, n)
    async with Held(db) as held:
        tasks = await issued(db, *[(noted, (n,)) for n in (3, 1, 2, 5, 4)])
        held.release()
        await asyncio.gather(*tasks)
    assert order == [3, 1, 2, 5, 4]


async def test_a_failing_write_rolls_back_alone_and_its_caller_gets_the_error(db: Database):
    commits, frames = db.commits, wal_commits(db.path)
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1,)), (insert_then_fail, (2,)), (insert, (3,)), (insert, (1,)),
                             (insert, (4,)))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == 1 and results[2] == 3 and results[4] == 4
    assert isinstance(results[1], ValueError) and str(results[1]) == "refused after its insert"
    # a database error of one write (its primary key taken by the first) is translated as before, and alone
    assert isinstance(results[3], StoreError) and "UNIQUE constraint failed" in str(results[3])
    assert await ids(db) == [1, 3, 4]        # the failing write's insert did not leak into the group's commit
    assert db.commits == commits + 1 and wal_commits(db.path) == frames + 1


async def test_a_failing_first_write_rolls_back_alone_and_the_others_still_commit_together(db: Database):
    """The first write of a group runs without a savepoint: its failure rolls the transaction back (it held nothing
    else yet) and the others run in a new one, still a single commit."""
    commits, frames = db.commits, wal_commits(db.path)
    async with Held(db) as held:
        tasks = await issued(db, (insert_then_fail, (1,)), (insert, (2,)), (insert_then_fail, (3,)), (insert, (4,)))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], ValueError) and isinstance(results[2], ValueError) and results[1::2] == [2, 4]
    assert await ids(db) == [2, 4]
    assert db.commits == commits + 1 and wal_commits(db.path) == frames + 1


async def test_a_failed_commit_fails_every_write_of_the_group(db: Database):
    """A deferred foreign key is checked at COMMIT: one write's orphan fails the group's COMMIT, and with it every
    write of the group (none was acknowledged); the connection is usable again at once."""
    commits, frames = db.commits, wal_commits(db.path)

    def orphan(conn: SqliteConnection) -> None:
        conn.execute("INSERT INTO child (id, parent_id) VALUES (1, 99)")     # no parent 99: fails at COMMIT
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1,)), (orphan, ()), (insert, (2,)))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, StoreError) and "FOREIGN KEY constraint failed" in str(r) for r in results), results
    assert await ids(db) == []
    assert await db.read(lambda conn: conn.execute("SELECT count(*) FROM child").fetchone()[0]) == 0
    assert db.commits == commits and wal_commits(db.path) == frames
    assert await db.write(insert, 7) == 7          # no transaction was left open
    assert await ids(db) == [7]


async def test_a_busy_database_fails_the_whole_group_and_is_reported(db: Database):
    await db.raw(lambda raw: raw.execute("PRAGMA busy_timeout=50"))
    other = sqlite3.connect(db.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")               # another process holds the write lock
    try:
        async with Held(db) as held:
            tasks = await issued(db, (insert, (1,)), (insert, (2,)))
            held.release()
            results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert all(isinstance(r, StoreBusy) for r in results), results
    assert db.last_write_failure is not None and isinstance(db.last_write_failure[1], StoreBusy)
    assert await db.write(insert, 3) == 3 and await ids(db) == [3]


async def test_a_transaction_rolled_back_under_a_write_fails_the_earlier_ones_and_the_later_ones_run_anew(
        db: Database):
    """SQLite may roll the whole transaction back under one statement (SQLITE_FULL, an I/O error): the writes run
    before it in the group lost their work with it and fail; the ones after it run in a new transaction."""
    commits = db.commits

    def rolled_back_under_it(conn: SqliteConnection) -> None:
        conn.execute("INSERT INTO t (id) VALUES (2)")
        conn.raw.execute("ROLLBACK")                 # what SQLite does on its own under such an error
        raise sqlite3.OperationalError("database or disk is full")
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1,)), (rolled_back_under_it, ()), (insert, (3,)), (insert, (4,)))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [type(r).__name__ for r in results[:2]] == ["StoreUnavailable", "StoreUnavailable"]
    assert results[2:] == [3, 4]
    assert await ids(db) == [3, 4]
    assert db.commits == commits + 1


class Recorder:
    """Commit hooks that record their calls and write one row of their own (as the refusal tallies do)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def before_commit(self, conn: SqliteConnection) -> None:
        self.calls.append("before_commit")
        conn.execute("INSERT INTO t (id, note) VALUES ($1, 'hook')", (1000 + len(self.calls),))

    def committed(self) -> None:
        self.calls.append("committed")

    def rolled_back(self) -> None:
        self.calls.append("rolled_back")


async def test_the_hooks_run_once_per_group_commit_inside_it(db: Database):
    hooks = Recorder()
    db.hooks = hooks
    frames = wal_commits(db.path)
    async with Held(db) as held:
        tasks = await issued(db, *[(insert, (n,)) for n in range(1, 4)])
        held.release()
        await asyncio.gather(*tasks)
    assert hooks.calls == ["before_commit", "committed"]
    assert await ids(db) == [1, 2, 3, 1001]          # the hook's row rode along, in the same single commit
    assert wal_commits(db.path) == frames + 1


async def test_the_hooks_do_not_run_for_a_group_that_changed_nothing(db: Database):
    hooks = Recorder()
    db.hooks = hooks
    commits = db.commits

    def look(conn: SqliteConnection) -> int:
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
    async with Held(db) as held:
        tasks = await issued(db, (look, ()), (insert_then_fail, (5,)), (look, ()))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == 0 and results[2] == 0 and isinstance(results[1], ValueError)
    assert hooks.calls == [] and db.commits == commits


async def test_a_failed_group_commit_rolls_the_hooks_back_once(db: Database):
    hooks = Recorder()
    db.hooks = hooks

    def orphan(conn: SqliteConnection) -> None:
        conn.execute("INSERT INTO child (id, parent_id) VALUES (1, 99)")
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1,)), (orphan, ()))
        held.release()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert hooks.calls == ["before_commit", "rolled_back"]
    assert await ids(db) == []


async def test_a_write_asking_for_the_hooks_itself_gets_them_once_in_its_groups_commit(db: Database):
    """store/shared/store.py `flush_counts`: a function calls `db.hooks.before_commit(conn)` itself. In a group that
    asks the group, which writes the hooks' rows once, after its last write; one asking and then failing is undone
    with its savepoint and asks nothing."""
    hooks = Recorder()
    db.hooks = hooks

    def flush(conn: SqliteConnection) -> str:
        assert db.hooks is not None
        db.hooks.before_commit(conn)
        return "flushed"

    def flush_then_fail(conn: SqliteConnection) -> None:
        assert db.hooks is not None
        db.hooks.before_commit(conn)
        raise ValueError("failed after asking")
    async with Held(db) as held:
        tasks = await issued(db, (flush_then_fail, ()), (flush, ()), (flush, ()))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], ValueError) and results[1:] == ["flushed", "flushed"]
    assert hooks.calls == ["before_commit", "committed"]
    assert await ids(db) == [1001]
    assert db.hooks is hooks                             # outside a write's function: the hooks themselves
    hooks.calls.clear()
    with pytest.raises(ValueError):
        await db.write(flush_then_fail)
    assert hooks.calls == [] and await ids(db) == [1001]


async def test_a_lone_write_runs_at_once_alone(db: Database):
    """Nothing waits to form a group: with the thread idle, a write runs as soon as it is issued, as a group of one
    (no other write is ever issued here, so it cannot have waited for one)."""
    commits = db.commits
    assert await db.write(insert, 1) == 1
    assert db.commits == commits + 1 and await ids(db) == [1]


async def test_a_lone_failing_write_leaves_nothing(db: Database):
    commits = db.commits
    with pytest.raises(ValueError, match="refused after its insert"):
        await db.write(insert_then_fail, 1)
    await db.write(insert, 2)
    with pytest.raises(StoreError, match="UNIQUE constraint failed"):
        await db.write(insert, 2)
    assert await ids(db) == [2] and db.commits == commits + 1


async def test_writes_arriving_while_a_group_runs_form_the_next_group(db: Database):
    inside, go = threading.Event(), threading.Event()
    commits = db.commits

    def first(conn: SqliteConnection) -> int:
        insert(conn, 1)
        inside.set()
        assert go.wait(DEADLINE_S)
        return 1
    lone = asyncio.create_task(db.write(first))
    assert await asyncio.to_thread(inside.wait, DEADLINE_S)   # ran at once, alone: nothing else was issued yet
    tasks = await issued(db, *[(insert, (n,)) for n in (2, 3, 4)])
    go.set()
    assert await lone == 1 and await asyncio.gather(*tasks) == [2, 3, 4]
    assert db.commits == commits + 2


async def test_no_write_of_a_group_is_answered_before_its_commit(db: Database):
    """The first write's function has run, the second's is still running: the group has not committed, so the first
    caller has no answer yet. (An answer sent before the second function started would be on the event loop's queue
    ahead of the thread's wake-up that ends `to_thread` below.) After the COMMIT, a second connection sees each row
    the moment its caller's await returns."""
    inside, go = threading.Event(), threading.Event()

    def second(conn: SqliteConnection) -> int:
        insert(conn, 2)
        inside.set()
        assert go.wait(DEADLINE_S)
        return 2
    reader = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
    try:
        async with Held(db) as held:
            tasks = await issued(db, (insert, (1,)), (second, ()), (insert, (3,)))
            held.release()
            assert await asyncio.to_thread(inside.wait, DEADLINE_S)
            for _ in range(3):
                await asyncio.sleep(0)
            assert not tasks[0].done()
            go.set()
            for task in asyncio.as_completed(tasks):
                n = await task
                assert reader.execute("SELECT count(*) FROM t WHERE id = ?", (n,)).fetchone()[0] == 1
    finally:
        reader.close()


async def test_writes_issued_before_close_are_answered(tmp_path: Path):
    db = await Database.open(tmp_path / "closing.sqlite3")
    await db.raw(lambda raw: raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT)"))
    async with Held(db) as held:
        tasks = await issued(db, *[(insert, (n,)) for n in range(1, 4)])
        closing = asyncio.create_task(db.close())
        held.release()
        assert await asyncio.gather(*tasks) == [1, 2, 3]
        await closing
    with pytest.raises(ValueError):
        await db.write(insert, 4)


async def test_every_caller_is_answered_even_when_the_hooks_fail_while_rolling_back(db: Database):
    """The last resort of `_run_waiting`: an error out of the group's own failure handling (here the hooks'
    `rolled_back`, after their `before_commit` failed) still answers every write of the group, and leaves no
    transaction open for the next."""
    class Broken(Recorder):
        def before_commit(self, conn: SqliteConnection) -> None:
            raise RuntimeError("before_commit failed")

        def rolled_back(self) -> None:
            raise RuntimeError("rolled_back failed")
    db.hooks = Broken()
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1,)), (insert, (2,)))
        held.release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [str(r) for r in results] == ["rolled_back failed", "rolled_back failed"]
    db.hooks = None
    assert await db.write(insert, 3) == 3 and await ids(db) == [3]


def temporary_files() -> list[str]:
    """SQLite's temporary files this process holds open (Linux: an `etilqs_` file, deleted as soon as opened)."""
    fds = Path("/proc/self/fd")
    links = []
    for fd in fds.iterdir():
        try:
            links.append(str(fd.readlink()))
        except OSError:             # closed meanwhile
            continue
    return [link for link in links if "etilqs_" in link]


async def sub_journal_files(db: Database) -> list[str]:
    """Run a group of two writes whose second, inside its savepoint, rewrites every page of a table of 300 KiB (far
    past the 64 KiB an on-disk sub-journal keeps before it spills to a file), and return the temporary files the
    process held at that moment."""
    await db.write(lambda conn: conn.executemany("INSERT INTO t (id, note) VALUES ($1, $2)",
                                                 [(n, "x" * 1000) for n in range(1, 301)]))
    seen: list[str] = []

    def rewrite(conn: SqliteConnection) -> None:
        conn.execute("UPDATE t SET note = upper(note)")
        seen.extend(temporary_files())
    async with Held(db) as held:
        tasks = await issued(db, (insert, (1000,)), (rewrite, ()))
        held.release()
        await asyncio.gather(*tasks)
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the process's open files from /proc")
async def test_a_grouped_writes_savepoint_journal_stays_in_memory(db: Database):
    """A write of a group runs in a savepoint; its sub-journal lives in memory (`temp_store=MEMORY`), so a large
    write opens no temporary file (bench/RESULTS.md: on disk, most grouped finishes opened, wrote and deleted one)."""
    assert await db.raw(lambda raw: raw.execute("PRAGMA temp_store").fetchone()[0]) == 2
    assert await sub_journal_files(db) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the process's open files from /proc")
async def test_negative_control_a_sub_journal_on_disk_is_seen(db: Database):
    """With temporary storage on disk, the same write's sub-journal is a temporary file, and the check above sees it."""
    await db.raw(lambda raw: raw.execute("PRAGMA temp_store=FILE"))
    assert await sub_journal_files(db) != []


@pytest.mark.parametrize("helper", [True, False], ids=["vacuum", "negative-control-bare-VACUUM"])
async def test_vacuum_builds_its_copy_in_a_file_and_the_connection_keeps_memory(db: Database, helper: bool):
    """VACUUM's copy of the database is a temporary database: with the connection's temp_store=MEMORY it would be
    built in RAM, as large as the file. `vacuum` switches to a file for its run and back after; a bare VACUUM (the
    negative control) runs with memory, and the check sees it."""
    def run(raw: sqlite3.Connection) -> tuple[list[str], int]:
        statements: list[str] = []
        raw.set_trace_callback(statements.append)
        try:
            if helper:
                vacuum(raw)
            else:
                raw.execute("VACUUM")
        finally:
            raw.set_trace_callback(None)
        return statements, raw.execute("PRAGMA temp_store").fetchone()[0]
    statements, after = await db.raw(run)
    pragmas_before = [s for s in statements[:statements.index("VACUUM")] if s.startswith("PRAGMA temp_store")]
    assert after == 2
    assert (pragmas_before[-1:] == ["PRAGMA temp_store=FILE"]) is helper
