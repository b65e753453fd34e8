"""The store contract suite runs against every implementation of store/ports.py, through the ports only.

Add an implementation by adding its name to IMPLEMENTATIONS and a branch to `opened` (PostgreSQL joins here).
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from store import ManualClock, SqliteStore, Store

IMPLEMENTATIONS = ["sqlite"]
START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


async def opened(kind: str, tmp_path: Path, clock: ManualClock, **options: int) -> Store:
    if kind == "sqlite":
        return await SqliteStore.open(tmp_path / "contract.sqlite3", clock, **options)
    raise AssertionError(f"no such store implementation: {kind}")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(params=IMPLEMENTATIONS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(kind: str, tmp_path: Path, clock: ManualClock) -> AsyncIterator[Store]:
    s = await opened(kind, tmp_path, clock, capacity=3, debounce_ms=0, attempt_cap=3)
    try:
        yield s
    finally:
        await s.close()
