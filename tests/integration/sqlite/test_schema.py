"""Migrations lead to schema.sql; a newer database is refused before anything changes; the instance lock."""
from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from importlib import resources

import pytest

from store import InstanceLock, InstanceLocked, NotShopbotDatabase, SchemaTooNew, SchemaTooOld, SqliteStore
from store.sqlite.migrations import LATEST, split_statements


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
    s = await SqliteStore.open(tmp_path / "migrated.sqlite3", clock)
    await s.close()
    migrated = sqlite3.connect(str(tmp_path / "migrated.sqlite3"))
    direct = sqlite3.connect(":memory:")
    for statement in split_statements(resources.files("store.sqlite").joinpath("schema.sql").read_text()):
        direct.execute(statement)
    assert shape(migrated) == shape(direct)
    assert migrated.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == LATEST
    assert migrated.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_newer_database_is_refused_before_anything_changes(db_path, clock):
    s = await SqliteStore.open(db_path, clock)
    await s.close()
    conn = sqlite3.connect(str(db_path))
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', 'n')", (LATEST + 1,))
    conn.commit()
    before = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer shopbot"):
        await SqliteStore.open(db_path, clock)
    conn = sqlite3.connect(str(db_path))
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == before
    conn.close()


async def test_an_older_database_is_refused_with_the_migrate_command(db_path, clock):
    s = await SqliteStore.open(db_path, clock)
    await s.close()
    conn = sqlite3.connect(str(db_path))
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
    conn.commit()
    conn.close()
    if LATEST == 1:
        pytest.skip("needs a second migration to build an older database")
    with pytest.raises(SchemaTooOld, match="shopbot migrate"):
        await SqliteStore.open(db_path, clock)


async def test_a_foreign_database_is_refused(db_path, clock):
    conn = sqlite3.connect(str(db_path))
    conn.execute("CREATE TABLE something_else (x)")
    conn.commit()
    conn.close()
    with pytest.raises(NotShopbotDatabase, match="no shopbot schema record"):
        await SqliteStore.open(db_path, clock)


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


def test_migration_7_counts_orders_approved_before_it_as_on_order_newest_per_item(tmp_path):
    from store.sqlite.invariants import check
    from store.sqlite.migrations import migrate
    path = tmp_path / "v6.sqlite3"
    conn = sqlite3.connect(str(path), isolation_level=None)
    migrate(conn, str(path), "2027-03-01T09:00:00.000000Z", up_to=6)
    conn.executescript("""
        INSERT INTO items (item, unit, on_hand, reorder_point, target, unit_cost_cents, updated_at)
            VALUES ('vanilla', 'tubs', 2, 8, 8, 300, 'n'), ('cone', 'boxes', 0, 2, 4, 100, 'n');
        INSERT INTO work (source, session, kind, payload, admitted_at) VALUES ('tg:1:1', 'tg:1', 'agent', 'x', 'n');
        INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at)
            VALUES ('r', 'w', 'tg:1', 1, 1, 0, 'n');
        INSERT INTO proposals (proposal_id, run_id, supplier, item, quantity, unit_cost_cents, total_cents, state,
                               created_at, updated_at, decided_at)
            VALUES (1, 'r', 's', 'vanilla', 6, 300, 1800, 'approved', 'n', 'n', '2027-02-01T09:00:00.000000Z'),
                   (2, 'r', 's', 'vanilla', 6, 300, 1800, 'approved', 'n', 'n', '2027-02-27T09:00:00.000000Z'),
                   (3, 'r', 's', 'cone', 4, 100, 400, 'approved', 'n', 'n', '2027-02-27T09:00:00.000000Z');
        INSERT INTO actions (proposal_id, idempotency_key, destination, payload, state, receipt, created_at, updated_at)
            VALUES (1, '0123456789abcdef0123456789abcde1', 'supplier:s', '{}', 'delivered', 'A', 'n', 'n'),
                   (2, '0123456789abcdef0123456789abcde2', 'supplier:s', '{}', 'delivered', 'B', 'n', 'n'),
                   (3, '0123456789abcdef0123456789abcde3', 'supplier:s', '{}', 'pending', NULL, 'n', 'n');
        UPDATE actions SET state = 'sending' WHERE proposal_id = 3;
        UPDATE actions SET state = 'failed' WHERE proposal_id = 3;
    """)
    # 0012 rebuilds `runs` (which the proposals reference): their rows and links survive it
    assert migrate(conn, str(path), "2027-03-01T09:00:00.000000Z")[:3] == [7, 11, 12]
    assert conn.execute("SELECT count(*) FROM proposals JOIN runs USING (run_id)").fetchone()[0] == 3
    rows = conn.execute("SELECT proposal_id, state, due_at FROM orders ORDER BY proposal_id").fetchall()
    assert rows == [(1, "received", "2027-02-04T09:00:00.000000Z"), (2, "on_order", "2027-03-02T09:00:00.000000Z"),
                    (3, "cancelled", "2027-02-27T09:00:00.000000Z")]
    conn.close()
    assert [v for v in check(path) if v.rule.startswith("O")] == []     # the on-order rules hold


async def test_a_photo_part_never_changes_what_it_sends(store, raw):
    """Negative control of migration 0018's trigger: a photo is as fixed as a text (C7)."""
    from store import Occurrence, ReportDraft, WorkKind
    await store.admit(Occurrence("clock:weekly_review:k", "clock:weekly_review", "r", WorkKind.AGENT, "tg:7"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("text", destination="tg:7", photo=b"\x89PNG one", caption="c"))
    with pytest.raises(sqlite3.IntegrityError, match="C7: a delivery never changes what it sends"):
        raw.execute("UPDATE deliveries SET photo = x'00' WHERE part = 1")
    assert raw.execute("SELECT photo FROM deliveries WHERE part = 1").fetchone()[0] == b"\x89PNG one"
