"""Restoring a backup (the backup itself is `Store.backup`, SQLite's online backup of the live database)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from ..clock import Clock, to_text
from ..errors import UnknownTarget
from . import migrations, outbox
from .connection import configure


def restore(backup: Path | str, target: Path | str, clock: Clock) -> int:
    """Copy a backup over the (stopped) database and turn every non-terminal delivery into `unknown`, so a restore
    never resends silently. The caller holds the instance lock. Returns the deliveries made unknown."""
    backup, target = Path(backup), Path(target)
    if not backup.exists():
        raise UnknownTarget(f"no backup at {backup}")
    check = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    try:
        migrations.check_not_newer(check, str(backup))
        check.execute("PRAGMA quick_check").fetchone()
    finally:
        check.close()
    for suffix in ("-wal", "-shm"):
        Path(str(target) + suffix).unlink(missing_ok=True)
    tmp = Path(str(target) + ".restoring")
    shutil.copyfile(backup, tmp)
    tmp.replace(target)
    conn = sqlite3.connect(str(target), isolation_level=None)
    try:
        configure(conn)
        conn.execute("BEGIN IMMEDIATE")
        n = outbox.mark_all_unknown_after_restore(conn, to_text(clock.now()))
        conn.execute("COMMIT")
        return n
    finally:
        conn.close()
