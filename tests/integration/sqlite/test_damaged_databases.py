"""Databases that fail loudly: a damaged, foreign or unreadable file, or a path in a missing or read-only folder,
makes every command exit with one line and a non-zero code, never hang (real processes, with a timeout)."""
from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")   # a log line (UTC, with its offset)

COMMANDS = [("status",), ("reports",), ("migrate",), ("check",), ("resolve", "r1.1", "--delivered"),
            ("forget", "--session", "tg:1"), ("actions",), ("backup", "copy.sqlite3"), ("shop", "sync"),
            ("admit", "--source", "till:1:a", "--session", "till:1", "--text", "t"), ("run",), ("run", "--drain")]


def run_cli(args: tuple[str, ...], db: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(quiet_shop(cwd)),
                "SHOPBOT_HTTP_PORT": "-1"})
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, env=env,
                          timeout=30, cwd=cwd)     # a hang fails the test with TimeoutExpired


def healthy(path: Path) -> Path:
    assert run_cli(("migrate",), path, path.parent).returncode == 0
    return path


def damaged_header(tmp: Path) -> Path:
    db = healthy(tmp / "damaged.sqlite3")
    with db.open("r+b") as f:
        f.write(b"this is no header")
    return db


def damaged_page(tmp: Path) -> Path:
    db = healthy(tmp / "damaged-page.sqlite3")
    page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    with db.open("r+b") as f:                    # every page after the first: the tables' b-trees
        f.seek(page)
        f.write(b"\xff" * (db.stat().st_size - page))
    return db


def foreign_text(tmp: Path) -> Path:
    db = tmp / "notes.sqlite3"
    db.write_text("shopping list: milk, cones, sprinkles\n" * 50)
    return db


def foreign_sqlite(tmp: Path) -> Path:
    db = tmp / "other-app.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.commit()
    conn.close()
    return db


def a_folder(tmp: Path) -> Path:
    db = tmp / "folder.sqlite3"
    db.mkdir()
    return db


CASES = {"damaged header": damaged_header, "damaged pages": damaged_page, "text file": foreign_text,
         "another program's SQLite file": foreign_sqlite, "a folder": a_folder}


def assert_one_line_failure(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("case", CASES)
def test_formerly_bug_a_bad_database_file_makes_every_command_fail_with_one_line(tmp_path, case):
    db = CASES[case](tmp_path)
    before = db.read_bytes() if db.is_file() else None
    for command in COMMANDS if case == "damaged header" else [("status",), ("migrate",), ("run",)]:
        line = assert_one_line_failure(run_cli(command, db, tmp_path))
        assert str(db) in line or command[0] in ("backup",), (command, line)
    assert (db.read_bytes() if db.is_file() else None) == before          # nothing was changed


@pytest.mark.parametrize("folder", ["/proc"])
def test_formerly_bug_a_database_in_a_read_only_folder_is_one_line(tmp_path, folder):
    if not Path(folder).is_dir():
        pytest.skip(f"no {folder} here")
    for command in [("migrate",), ("run",), ("run", "--drain"),
                    ("admit", "--source", "till:1:a", "--session", "till:1", "--text", "t")]:
        line = assert_one_line_failure(run_cli(command, Path(folder) / "shop.sqlite3", tmp_path))
        assert f"{folder}/shop.sqlite3" in line, line


def test_formerly_bug_a_database_in_a_missing_folder_is_a_configuration_error(tmp_path):
    path = f"{tmp_path}/gone/shop.sqlite3"
    shown = path if len(path) <= 80 else path[:77] + "..."    # a bad value is cut at 80 characters (a long tmp_path)
    for command in [("migrate",), ("run",), ("status",)]:
        done = run_cli(command, Path(path), tmp_path)
        assert done.returncode == 2
        assert assert_one_line_failure(done) == (
            f"configuration error: SHOPBOT_DB='{shown}': expected a path in an existing folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file whatever its mode")
def test_an_unreadable_database_is_one_line(tmp_path):
    db = healthy(tmp_path / "locked.sqlite3")
    db.chmod(0)
    try:
        for command in [("status",), ("run", "--drain")]:
            assert_one_line_failure(run_cli(command, db, tmp_path))
    finally:
        db.chmod(0o600)


def test_a_healthy_database_still_runs_every_command(tmp_path):
    """The negative control: the same commands on a good database do not fail for the database's sake."""
    db = healthy(tmp_path / "good.sqlite3")
    for command in [("status",), ("reports",), ("check",), ("actions",), ("run", "--drain")]:
        done = run_cli(command, db, tmp_path)
        assert done.returncode == 0, (command, done.stderr)
