"""Fixtures of every tier: a clean environment, a manual clock, a real SQLite store per test, and (for the SQLite
integration tier) an independent raw connection to its file."""
from __future__ import annotations

import os
import sqlite3
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from store import ManualClock, SqliteStore, units
from tests.support import postgres as pg_support  # imported first: it reads SHOPBOT_TEST_PG_DSN before any test

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
RAM_DISK = Path("/dev/shm")
RAM_DISK_FREE = 1 << 30      # the suite leaves a few MB per run (pytest keeps the last three runs' folders)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts two workers per core. Most of a test's time is spent waiting (on the bot's processes, leases
    running out, servers, commits): one worker per core kept the cores less than half busy (the suite's CPU time was
    about 40% of its test time), so a second worker per core runs in those waits. Doubled up to 8 (never fewer than
    one per core): each worker holds its own PostgreSQL connections and template database. The environment's
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set (None leaves it to pytest-xdist)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0))
    return max(cores, min(2 * cores, 8))


def pytest_configure(config: pytest.Config) -> None:
    """Temporary folders (tmp_path, tempfile, the bot's processes) on a RAM disk when there is one with room: every
    SQLite commit (synchronous=FULL) and every new file's fsync then costs nothing instead of milliseconds of disk
    flush, and the suite makes thousands of them. They are the same real files to SQLite (WAL, locks,
    shared memory). Not when TMPDIR or --basetemp says where they go, nor on an xdist worker (it inherits the
    choice: the controller sets TMPDIR before starting the workers and gives each its folder under the base)."""
    if hasattr(config, "workerinput") or config.option.basetemp or os.environ.get("TMPDIR"):
        return
    try:
        usable = RAM_DISK.is_dir() and os.access(RAM_DISK, os.W_OK) and \
            os.statvfs(RAM_DISK).f_bavail * os.statvfs(RAM_DISK).f_frsize >= RAM_DISK_FREE
    except OSError:
        usable = False
    if usable:
        os.environ["TMPDIR"] = str(RAM_DISK)
        tempfile.tempdir = str(RAM_DISK)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the operator's own SHOPBOT_* or TELEGRAM_* settings (a .env or an exported token)."""
    for key in list(os.environ):
        if key.startswith(("SHOPBOT_", "TELEGRAM_")):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def no_shop_unit_words():
    """A started App sets the shop file's unit words for its process (store/units.py): no test inherits them."""
    units.use(())
    yield
    units.use(())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "shop.sqlite3"


@pytest.fixture
async def store(db_path: Path, clock: ManualClock):
    s = await SqliteStore.open(db_path, clock, capacity=5, debounce_ms=0)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def raw(db_path: Path, store):
    """An independent connection to the same file, as another process would have."""
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("PRAGMA busy_timeout=5000")
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def pg_template():
    """A migrated PostgreSQL template database (tests/support/postgres.py); skipped without a server."""
    yield from pg_support.make_template()


@pytest.fixture(scope="session")
def pg_worker_database(pg_template: str):
    """This worker's PostgreSQL database, copied from the template once (tests/support/worker_database.py)."""
    from tests.support.worker_database import WorkerDatabase
    database = WorkerDatabase(pg_template)
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture
def pg_url(pg_worker_database) -> str:
    """This worker's PostgreSQL database, emptied back to a freshly migrated one's state; shared by its tests."""
    pg_support.server_or_skip()
    return str(pg_worker_database.emptied())


@pytest.fixture
def pg_fresh_url(pg_template: str):
    """A PostgreSQL database of this test's own, copied from the template and dropped afterwards: for the bot's
    processes (none may outlive its test into another's data), a changed schema, several databases."""
    pg_support.server_or_skip()
    yield from pg_support.fresh_database(pg_template)


@pytest.fixture
def pg_empty_url():
    """An empty PostgreSQL database (no schema), for the migration tests; skipped without a server."""
    yield from pg_support.empty_database()
