"""The PostgreSQL integration tier's store: the worker's database, emptied for each test (tests/conftest.py's
pg_url), capacity 3."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from store import ManualClock, open_store
from store.postgres import PostgresStore


@pytest.fixture
async def pg(pg_url: str, clock: ManualClock) -> AsyncIterator[PostgresStore]:
    store = await open_store(pg_url, clock, capacity=3, debounce_ms=0)
    assert isinstance(store, PostgresStore)
    try:
        yield store
    finally:
        await store.close()
