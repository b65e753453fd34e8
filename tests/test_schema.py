"""Migrations lead to schema.sql; a newer database is refused before anything changes; the instance lock."""
from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from importlib import resources

import pytest

from store import InstanceLock, InstanceLocked, NotShopbotDatabase, SchemaTooNew, SchemaTooOld, Store
from store.migrations import LATEST, split_statements


def shape(conn: sqlite3.Connection) -> dict:
    """Columns, indexes, foreign keys and normalised trigger/index SQL of every object."""
    result = {}
    for name, kind, sql in conn.execute("SELECT name, type, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"):
        entry = {"type": kind, "sql": re.sub(r"\s+", " ", sql or "").strip() if kind in ("trigger", "index") else None}
        if kind == "table":
            entry["columns"] = conn.execute(f"PRAGMA table_xinfo({name})").fetchall()
            entry["fks"] = conn.execute(f"PRAGMA foreign_key_list({name})").fetchall()
            entry["indexes"] = sorted(tuple(r) for r in conn.execute(f"PRAGMA index_list({name})"))
        result[name] = entry
    return result


async def test_migrating_from_empty_gives_schema_sql(tmp_path, clock):
    s = await Store.open(tmp_path / "migrated.sqlite3", clock)
    await s.close()
    migrated = sqlite3.connect(str(tmp_path / "migrated.sqlite3"))
    direct = sqlite3.connect(":memory:")
    for statement in split_statements(resources.files("store").joinpath("schema.sql").read_text()):
        direct.execute(statement)
    assert shape(migrated) == shape(direct)
    assert migrated.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == LATEST
    assert migrated.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_newer_database_is_refused_before_anything_changes(db_path, clock):
    s = await Store.open(db_path, clock)
    await s.close()
    conn = sqlite3.connect(str(db_path))
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', 'n')", (LATEST + 1,))
    conn.commit()
    before = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer shopbot"):
        await Store.open(db_path, clock)
    conn = sqlite3.connect(str(db_path))
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == before
    conn.close()


async def test_an_older_database_is_refused_with_the_migrate_command(db_path, clock):
    s = await Store.open(db_path, clock)
    await s.close()
    conn = sqlite3.connect(str(db_path))
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
    conn.commit()
    conn.close()
    if LATEST == 1:
        pytest.skip("needs a second migration to build an older database")
    with pytest.raises(SchemaTooOld, match="shopbot migrate"):
        await Store.open(db_path, clock)


async def test_a_foreign_database_is_refused(db_path, clock):
    conn = sqlite3.connect(str(db_path))
    conn.execute("CREATE TABLE something_else (x)")
    conn.commit()
    conn.close()
    with pytest.raises(NotShopbotDatabase, match="no shopbot schema record"):
        await Store.open(db_path, clock)


def test_instance_lock_names_the_holder_and_dies_with_it(db_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from store import InstanceLock; from pathlib import Path\n"
         "l = InstanceLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)", str(db_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InstanceLocked, match=str(holder.pid)):
            InstanceLock(db_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with InstanceLock(db_path):   # released by the OS when the holder died
        pass
