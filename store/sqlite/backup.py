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


def backup_before_migration(path: Path | str, stamp: str) -> tuple[int, Path] | None:
    """`shopbot migrate`'s first step: when `path` holds a shopbot database of an older schema, SQLite's online
    backup of it goes beside it as `<name>.before-migration-<version>-<stamp>.bak` before anything changes. Returns
    (the old version, the backup's path), or None when there is nothing to migrate (missing, empty or current)."""
    path = Path(path)
    if not path.exists():
        return None
    conn = sqlite3.connect(str(path))
    try:
        version = migrations.check_not_newer(conn, str(path))
        if version == 0 or version >= migrations.LATEST:
            return None
        target = path.with_name(f"{path.name}.before-migration-{version}-{stamp}.bak")
        if target.exists():
            raise FileExistsError(f"{target} exists; move it away and migrate again")
        dest = sqlite3.connect(str(target))
        try:
            conn.backup(dest)
        finally:
            dest.close()
        return version, target
    finally:
        conn.close()
