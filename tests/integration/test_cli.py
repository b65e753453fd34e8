"""The operator CLI on real database files, as separate processes."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start
from tests.support import ROOT


def shopbot(*args: str, db: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    base.update({"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(quiet_shop(db.parent)), **env})
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, env=base,
                          timeout=60, cwd=db.parent)


def test_admit_prints_one_word_per_outcome(tmp_path):
    db = tmp_path / "s.sqlite3"
    assert shopbot("admit", "--source", "till:1:abc", "--session", "till:1", "--text", "t",
                   db=db).stdout == "accepted\n"
    assert shopbot("admit", "--source", "till:1:abc", "--session", "till:1", "--text", "t",
                   db=db).stdout == "duplicate\n"
    assert shopbot("admit", "--source", "till:1:abc", "--session", "till:1", "--text", "x",
                   db=db).stdout == "conflict\n"
    refused = shopbot("admit", "--source", "till:1:new", "--session", "till:1", "--text", "t", db=db,
                      SHOPBOT_CAPACITY="1")
    assert refused.stdout == "refused\n" and refused.returncode == 1
    status = json.loads(shopbot("status", "--json", db=db).stdout)
    assert status["work"]["pending"] == 1 and set(status["deliveries"]) == {
        "pending", "sending", "confirmed", "unknown", "failed", "denied"}
    assert status["counters"]["refused_capacity"] == 1
    human = shopbot("status", db=db).stdout
    assert "pending 1" in human and "λ" in human


def test_drain_reports_resolve_backup_restore(tmp_path):
    db = tmp_path / "s.sqlite3"
    shopbot("admit", "--source", "tg:5:1", "--session", "tg:5", "--text", "how much vanilla", db=db)
    drained = shopbot("run", "--drain", db=db)          # no Telegram: the worker runs, the report waits to be sent
    assert drained.returncode == 0, drained.stderr
    assert str(db.resolve()) in drained.stderr
    reports = json.loads(shopbot("reports", "--json", db=db).stdout)
    assert reports[0]["report"] == "r1.1" and reports[0]["work"] == [1]
    assert "vanilla on hand: 2 tubs" in reports[0]["body"] and reports[0]["deliveries"][0]["state"] == "pending"
    assert "r1.1" in shopbot("reports", "--limit", "1", db=db).stdout
    # the report is sent, but the reply is lost: unknown
    conn = sqlite3.connect(str(db))
    conn.execute("UPDATE deliveries SET state = 'sending'")
    conn.execute("UPDATE deliveries SET state = 'unknown'")
    conn.commit()
    backup = tmp_path / "backup.sqlite3"
    assert shopbot("backup", str(backup), db=db).returncode == 0
    resolved = shopbot("resolve", "r1.1", "--delivered", db=db)
    assert resolved.returncode == 0 and "delivered" in resolved.stdout
    assert conn.execute("SELECT state, receipt FROM deliveries").fetchone() == ("confirmed", None)
    assert conn.execute("SELECT decision FROM resolutions").fetchone() == ("delivered",)
    again = shopbot("resolve", "r1.1", "--resend", db=db)
    assert again.returncode == 1 and "no delivery awaiting a decision" in again.stderr
    conn.close()
    # a restore never resends silently: the unknown comes back unknown
    restored = shopbot("restore", str(backup), db=db)
    assert restored.returncode == 0, restored.stderr
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT state FROM deliveries").fetchone() == ("unknown",)
    conn.close()
    assert shopbot("check", db=db).returncode == 0


def test_restore_turns_pending_deliveries_into_unknown(tmp_path):
    db = tmp_path / "s.sqlite3"
    shopbot("admit", "--source", "tg:5:1", "--session", "tg:5", "--text", "stock", db=db)
    shopbot("run", "--drain", db=db)
    backup = tmp_path / "b.sqlite3"
    shopbot("backup", str(backup), db=db)
    assert shopbot("backup", str(backup), db=db).returncode == 1       # never overwrites
    shopbot("restore", str(backup), db=db)
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT state, reason FROM deliveries").fetchone()[0] == "unknown"


def test_forget_cancels_waiting_work(tmp_path):
    db = tmp_path / "s.sqlite3"
    shopbot("admit", "--source", "tg:5:1", "--session", "tg:5", "--text", "stock", db=db)
    out = shopbot("forget", "--session", "tg:5", db=db)
    assert "1 pending item(s) cancelled" in out.stdout
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT state FROM work").fetchone() == ("failed",)
    assert "operator:" in conn.execute("SELECT body FROM reports").fetchone()[0]
    assert shopbot("check", db=db).returncode == 0


def test_an_older_database_is_refused_by_run_and_migrated_by_migrate(tmp_path):
    from store.sqlite.migrations import LATEST, migrate
    db = tmp_path / "s.sqlite3"
    conn = sqlite3.connect(str(db), isolation_level=None)
    migrate(conn, str(db), "2027-01-01T00:00:00.000000Z", up_to=LATEST - 1)      # a database of the last release
    conn.close()
    refused = shopbot("run", "--drain", db=db)
    assert refused.returncode == 1 and "shopbot migrate" in refused.stderr
    migrated = shopbot("migrate", db=db)
    assert migrated.returncode == 0 and "backed up schema version" in migrated.stdout
    backups = list(tmp_path.glob("s.sqlite3.before-migration-*.bak"))
    assert len(backups) == 1                                    # the old database, whole, before any change
    old = sqlite3.connect(str(backups[0]))
    assert old.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] < LATEST
    assert old.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    old.close()
    assert shopbot("run", "--drain", db=db).returncode == 0
    again = shopbot("migrate", db=db)                           # nothing to migrate: no second backup
    assert again.returncode == 0 and "backed up" not in again.stdout
    assert len(list(tmp_path.glob("s.sqlite3.before-migration-*.bak"))) == 1


def test_shop_sync_keeps_counted_stock(tmp_path):
    db = tmp_path / "s.sqlite3"
    shopbot("run", "--drain", db=db)                            # seeds from the shop file
    conn = sqlite3.connect(str(db))
    conn.execute("UPDATE items SET on_hand = 9 WHERE item = 'vanilla'")
    conn.commit()
    edited = tmp_path / "shop.toml"
    edited.write_text((ROOT / "shop.example.toml").read_text().replace("unit_cost_cents = 300", "unit_cost_cents = 320")
                      + '\n[items.mint]\nunit = "tubs"\non_hand = 4\nreorder_point = 2\ntarget = 6\n'
                        'unit_cost_cents = 280\n')
    out = shopbot("shop", "sync", db=db, SHOPBOT_SHOP_FILE=str(edited))
    assert out.returncode == 0 and "vanilla: unit_cost_cents 300 -> 320" in out.stdout and "added mint" in out.stdout
    assert conn.execute("SELECT on_hand, unit_cost_cents FROM items WHERE item = 'vanilla'").fetchone() == (9, 320)
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'blue'\n" + (ROOT / "shop.example.toml").read_text())
    refused = shopbot("shop", "sync", db=db, SHOPBOT_SHOP_FILE=str(bad))
    assert refused.returncode == 2 and "unknown field colour" in refused.stderr


def test_check_cannot_check_a_missing_database(tmp_path):
    assert shopbot("check", db=tmp_path / "nope.sqlite3").returncode == 2
    assert shopbot("status", db=tmp_path / "nope.sqlite3").returncode == 1
