"""The store contract suite runs against every implementation of store/ports.py, through the ports only.

Add an implementation by adding its name to IMPLEMENTATIONS and a branch to `opened`. PostgreSQL's tests share their
worker's database, emptied between tests back to a freshly migrated one's state (tests/support/worker_database.py);
they are skipped without a server.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from store import ManualClock, SqliteStore, Store, open_store

IMPLEMENTATIONS = ["sqlite", "postgres"]
START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


async def opened(kind: str, tmp_path: Path, clock: ManualClock, pg_url: str | None = None, **options: int) -> Store:
    if kind == "sqlite":
        return await SqliteStore.open(tmp_path / "contract.sqlite3", clock, **options)
    if kind == "postgres":
        assert pg_url is not None
        return await open_store(pg_url, clock, **options)
    raise AssertionError(f"no such store implementation: {kind}")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(params=IMPLEMENTATIONS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(kind: str, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL database's URL for a postgres test (emptied for it), None for SQLite."""
    return str(request.getfixturevalue("pg_url")) if kind == "postgres" else None


@pytest.fixture
async def store(kind: str, tmp_path: Path, clock: ManualClock, location: str | None) -> AsyncIterator[Store]:
    s = await opened(kind, tmp_path, clock, location, capacity=3, debounce_ms=0, attempt_cap=3)
    try:
        yield s
    finally:
        await s.close()
