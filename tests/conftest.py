from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from store import ManualClock, SqliteStore

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


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
