"""K18 at the store: a process that opens the database while another is migrating it (an empty database, both
started at once) waits for the migration to finish instead of mistaking the half-built schema for an old one. The
negative control is the same half-built schema with no migration running: refused as older, nothing changed."""
from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import psycopg
import pytest

from store import ManualClock, SchemaTooOld, open_store
from store.postgres import migrations
from store.postgres.connection import PgConnection, PgCursor, configure

NOW = "2027-03-01T09:00:00.000000Z"


def connect(url: str) -> PgConnection:
    raw = psycopg.connect(url, autocommit=True, cursor_factory=PgCursor)
    configure(raw)
    return PgConnection(raw)


async def test_a_process_starting_beside_a_migration_waits_for_it(pg_empty_url):
    migrating, watcher = connect(pg_empty_url), connect(pg_empty_url)
    try:
        migrations._session_lock(migrating, shared=False)          # the other process's `migrate` is under way
        migrations._migrate(migrating, "test", NOW, up_to=6)        # ... and half done
        opening = asyncio.create_task(open_store(pg_empty_url, ManualClock(datetime(2027, 3, 1, tzinfo=UTC))))
        deadline = time.monotonic() + 10
        waiting = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock_shared%'")
        while not watcher.execute(waiting).fetchone()[0]:
            assert time.monotonic() < deadline and not opening.done()
            await asyncio.sleep(0.01)
        assert not opening.done()                                   # it waits for the run lock
        migrations._migrate(migrating, "test", NOW, up_to=None)
        migrating.execute("SELECT pg_advisory_unlock($1)", (migrations.RUN_LOCK,))
        store = await asyncio.wait_for(opening, 10)
        assert await store.schema_version() == migrations.LATEST
        await store.close()
    finally:
        migrating.raw.close()
        watcher.raw.close()


async def test_negative_control_a_half_built_schema_without_a_migration_running_is_refused(pg_empty_url):
    conn = connect(pg_empty_url)
    try:
        migrations.migrate(conn, "test", NOW, up_to=6)
    finally:
        conn.raw.close()
    with pytest.raises(SchemaTooOld):
        await open_store(pg_empty_url, ManualClock(datetime(2027, 3, 1, tzinfo=UTC)))
