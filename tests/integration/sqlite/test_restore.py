"""Verified restore: a file that is not a shopbot database or fails integrity_check is refused (exit 2, one line,
nothing changed); the database a restore replaces is moved aside under a timestamped name, its last commits kept."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.integration.sqlite.test_damaged_databases import damaged_page, foreign_sqlite, foreign_text
from tests.integration.test_cli import shopbot


def live(tmp_path: Path) -> Path:
    db = tmp_path / "live.sqlite3"
    assert shopbot("admit", "--source", "till:1:first", "--session", "till:1", "--text", "a", db=db).returncode == 0
    return db


def sources(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT source FROM work ORDER BY work_id")]
    finally:
        conn.close()


def empty_sqlite(tmp: Path) -> Path:
    db = tmp / "empty.sqlite3"
    sqlite3.connect(db).close()
    db.write_bytes(b"")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 1")     # a valid SQLite file with no tables at all
    conn.close()
    return db


def inconsistent_index(tmp: Path) -> Path:
    """A shopbot database that opens and reads without an error, but whose index disagrees with its table: only
    `PRAGMA integrity_check` sees it."""
    db = tmp / "inconsistent.sqlite3"
    assert shopbot("admit", "--source", "till:1:x", "--session", "till:1", "--text", "a", db=db).returncode == 0
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("INSERT INTO history (session, role, text, created_at) VALUES ('tg:1', 'user', 'x', '2027')")
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX history_session ON history (role, entry_id)' "
                 "WHERE name = 'history_session'")
    conn.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok"
    assert sources(db) == ["till:1:x"]
    conn.close()
    return db


@pytest.mark.parametrize("make", [foreign_text, foreign_sqlite, damaged_page, inconsistent_index, empty_sqlite],
                         ids=["text file", "another program's database", "damaged pages", "fails integrity_check",
                              "empty database"])
def test_formerly_bug_restore_refuses_a_file_that_is_not_a_sound_shopbot_database(tmp_path, make):
    db = live(tmp_path)
    bad = make(tmp_path)
    def files() -> dict[str, bytes]:   # the instance lock and the reader's own -shm of the refused file aside
        return {p.name: p.read_bytes() for p in tmp_path.iterdir()
                if p.is_file() and not p.name.startswith(bad.name) and not p.name.endswith(".lock")}
    before = files()
    done = shopbot("restore", str(bad), db=db)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: cannot restore {bad}") or done.stderr.startswith("error: cannot restore: ")
    assert files() == before                         # nothing changed, nothing added (no .restoring, no aside copy)
    assert sources(db) == ["till:1:first"]


def test_restore_of_a_missing_file_is_refused(tmp_path):
    done = shopbot("restore", str(tmp_path / "nope.sqlite3"), db=live(tmp_path))
    assert done.returncode == 2 and "no such file" in done.stderr


def test_formerly_bug_restore_keeps_the_replaced_database_under_a_timestamped_name(tmp_path):
    db = live(tmp_path)
    backup = tmp_path / "backup.sqlite3"
    assert shopbot("backup", str(backup), db=db).returncode == 0
    assert shopbot("admit", "--source", "till:1:after", "--session", "till:1", "--text", "b", db=db).returncode == 0
    done = shopbot("restore", str(backup), db=db)
    assert done.returncode == 0, done.stderr
    kept = [p for p in tmp_path.iterdir() if re.fullmatch(r"live\.sqlite3\.replaced-\d{8}T\d{6}Z", p.name)]
    assert len(kept) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert f"the replaced database is kept as {kept[0]}" in done.stdout
    assert sources(db) == ["till:1:first"]                          # the backup is live
    assert sources(kept[0]) == ["till:1:first", "till:1:after"]     # and nothing of what it replaced is lost
    assert shopbot("check", db=db).returncode == 0
    again = shopbot("restore", str(backup), db=db)                   # a second restore in the same second
    assert again.returncode == 0, again.stderr
    assert len([p for p in tmp_path.iterdir() if ".replaced-" in p.name and not p.name.endswith(("-wal", "-shm"))]) == 2
