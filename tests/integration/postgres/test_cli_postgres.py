"""The operator CLI against a PostgreSQL database (SHOPBOT_DB=postgresql://...), as separate processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start
from store.postgres.migrations import LATEST


def shopbot(*args: str, url: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_DB": url, "SHOPBOT_SHOP_FILE": str(quiet_shop(cwd))})
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=cwd)


def test_the_operator_commands_work_against_postgresql(pg_url: str, tmp_path: Path):
    migrated = shopbot("migrate", url=pg_url, cwd=tmp_path)
    assert migrated.returncode == 0 and f"schema version {LATEST}" in migrated.stdout
    assert shopbot("admit", "--source", "tg:5:1", "--session", "tg:5", "--text", "hi", url=pg_url,
                   cwd=tmp_path).stdout == "accepted\n"
    assert shopbot("admit", "--source", "tg:5:1", "--session", "tg:5", "--text", "hi", url=pg_url,
                   cwd=tmp_path).stdout == "duplicate\n"
    status = json.loads(shopbot("status", "--json", url=pg_url, cwd=tmp_path).stdout)
    assert status["work"]["pending"] == 1
    checked = shopbot("check", url=pg_url, cwd=tmp_path)
    assert checked.returncode == 0 and "invariants hold" in checked.stdout
    assert shopbot("actions", url=pg_url, cwd=tmp_path).returncode == 0
    refused = shopbot("resolve", "r9.1", "--resend", url=pg_url, cwd=tmp_path)
    assert refused.returncode != 0 and "no report r9.1" in refused.stderr
    forgot = shopbot("forget", "--session", "tg:5", url=pg_url, cwd=tmp_path)
    assert forgot.returncode == 0 and "1 pending item(s) cancelled" in forgot.stdout
    reports = json.loads(shopbot("reports", "--json", url=pg_url, cwd=tmp_path).stdout)
    assert reports[0]["is_error"] and "forgotten" in reports[0]["body"]
    backup = shopbot("backup", str(tmp_path / "b"), url=pg_url, cwd=tmp_path)
    assert backup.returncode != 0 and "pg_dump" in backup.stderr
    assert not (tmp_path / "b").exists()
    assert not any(p.suffix in (".sqlite3", ".lock") for p in tmp_path.iterdir())   # a URL is never a file path
