"""A first `shopbot run` SIGKILLed while it creates its SQLite database (between two of the migrations it applies,
each one transaction): the next start finishes the creation and runs, instead of refusing a database it made
itself with "run `shopbot migrate`" (store/sqlite/migrations `CREATING`). Negative control: the same partial
database without the creation mark, as an older shopbot's database would be, is still refused."""
from __future__ import annotations

import asyncio
import sqlite3

import pytest

from bot.sandbox.bot_api import LocalBotApi
from store.sqlite import migrations
from tests.support.proc import Product


@pytest.fixture
async def api():
    async with LocalBotApi("778:schema-kill-token") as server:
        yield server


async def killed_while_creating(product: Product) -> int:
    await product.start("schema-step")
    await product.died_at_fault()
    (version,), = product.query("SELECT max(version) FROM schema_migrations")
    assert 0 < version < migrations.LATEST
    return int(version)


async def test_a_start_killed_while_creating_the_schema_is_finished_by_the_next(tmp_path, api):
    product = Product(tmp_path, api)
    await killed_while_creating(product)
    assert product.query("PRAGMA user_version") == [(migrations.CREATING,)]
    await product.start()
    try:
        await product.wait_db("SELECT max(version) FROM schema_migrations", [(migrations.LATEST,)])
        await product.wait_db("SELECT count(*) FROM items", [(3,)])        # seeded: it runs
    finally:
        assert await product.stop() == 0
    assert product.query("PRAGMA user_version") == [(0,)]
    rc, out = await product.check()
    assert rc == 0, out


async def test_a_partial_schema_without_the_creation_mark_is_still_refused(tmp_path, api):
    product = Product(tmp_path, api)
    version = await killed_while_creating(product)
    conn = sqlite3.connect(str(product.db))
    conn.execute("PRAGMA user_version = 0")              # as an older shopbot's database, made by migrations
    conn.commit()
    conn.close()
    proc = await product.start()
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode != 0 and "shopbot migrate" in err.decode(), err.decode()[-2000:]
    assert product.query("SELECT max(version) FROM schema_migrations") == [(version,)]   # nothing changed
