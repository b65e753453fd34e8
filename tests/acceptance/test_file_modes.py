"""Private files (C21): started with a permissive umask (022, as outside systemd), `shopbot` creates its database,
its log file and its backups 0600. The control: the same umask gives an ordinary file 0644 here."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start


def test_the_database_the_log_and_a_backup_are_0600_whatever_the_umask(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update(SHOPBOT_DB=str(tmp_path / "shop.sqlite3"), SHOPBOT_LOG_FILE=str(tmp_path / "shop.log"),
               SHOPBOT_SHOP_FILE=str(quiet_shop(tmp_path)), SHOPBOT_HTTP_PORT="-1")

    def shopbot(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=tmp_path, check=True,
                       capture_output=True, timeout=60, preexec_fn=lambda: os.umask(0o022))
    shopbot("run", "--drain")
    shopbot("backup", str(tmp_path / "backup.sqlite3"))
    control = subprocess.run([sys.executable, "-c", f"open({str(tmp_path / 'control')!r}, 'w')"], check=True,
                             preexec_fn=lambda: os.umask(0o022))
    assert control.returncode == 0 and stat.S_IMODE((tmp_path / "control").stat().st_mode) == 0o644
    made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()
            if p.name not in ("control", "example-shop")}
    assert {"shop.sqlite3", "shop.log", "backup.sqlite3"} <= set(made)
    assert all(mode == 0o600 for mode in made.values()), made
