"""Restoring a backup (the backup itself is `Store.backup`, SQLite's online backup of the live database)."""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock, to_text
from ..errors import NotShopbotDatabase, RestoreRefused, SchemaTooNew
from ..shared import outbox
from . import migrations
from .connection import configure, opening_error

SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Restored:
    unknown: int                 # deliveries made unknown (C8: a restore never resends silently)
    replaced: Path | None        # where the database that was replaced now lives (None: there was none)


def verify_backup(backup: Path) -> int:
    """Refuse (RestoreRefused, one sentence) a file that is not a SQLite database, fails `PRAGMA integrity_check`,
    is not a shopbot database or was written by a newer shopbot. Reads only. Returns its schema version.

    integrity_check does every test of quick_check and more; it is used because quick_check of SQLite 3.40 reports
    a false "NULL value in report_items.report_id" on every sound shopbot database (a WITHOUT ROWID table whose
    primary key lists its columns in another order), while integrity_check of the same file says ok."""
    if not backup.is_file():
        raise RestoreRefused(f"cannot restore {backup}: there is no such file")
    with backup.open("rb") as f:
        if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise RestoreRefused(f"cannot restore {backup}: it is not a SQLite database (no SQLite header); "
                                 "nothing was changed")
    try:
        conn = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise RestoreRefused(f"cannot restore {backup}: it cannot be opened ({exc}); nothing was changed") from None
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise RestoreRefused(f"cannot restore {backup}: it fails PRAGMA integrity_check ({problems[0][:120]}"
                                 f"{'; …' if len(problems) > 1 else ''}); nothing was changed")
        version = migrations.check_not_newer(conn, str(backup))
        if version == 0:
            raise RestoreRefused(f"cannot restore {backup}: it is an empty database, not a shopbot backup; "
                                 "nothing was changed")
        return version
    except (NotShopbotDatabase, SchemaTooNew) as exc:
        raise RestoreRefused(f"cannot restore: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise RestoreRefused(f"cannot restore {backup}: it is damaged ({exc}); nothing was changed") from None
    finally:
        conn.close()


def aside_name(target: Path, clock: Clock) -> Path:
    """`<db>.replaced-<UTC timestamp>` next to the database, never an existing name."""
    stamp = clock.now().strftime("%Y%m%dT%H%M%SZ")
    candidate, n = target.with_name(f"{target.name}.replaced-{stamp}"), 1
    while any(Path(str(candidate) + suffix).exists() for suffix in ("", "-wal", "-shm")):
        n += 1
        candidate = target.with_name(f"{target.name}.replaced-{stamp}-{n}")
    return candidate


def restore(backup: Path | str, target: Path | str, clock: Clock) -> Restored:
    """Verify the backup (`verify_backup`), copy it in through SQLite's backup API (a consistent copy, its WAL
    included), move the replaced database aside with its -wal and -shm (so its last commits are kept with it),
    then turn every non-terminal delivery into `unknown`, so a restore never resends silently. The caller holds
    the instance lock (the bot is stopped)."""
    backup, target = Path(backup), Path(target)
    verify_backup(backup)
    tmp = Path(str(target) + ".restoring")
    for leftover in (tmp, Path(str(tmp) + "-journal")):
        leftover.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    dest = sqlite3.connect(str(tmp))
    try:
        source.backup(dest)
    finally:
        dest.close()
        source.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    replaced = None
    if target.exists():
        replaced = aside_name(target, clock)
        for suffix in ("-wal", "-shm", ""):        # the main file last: its WAL must never be left behind alone
            old = Path(str(target) + suffix)
            if old.exists():
                old.rename(Path(str(replaced) + suffix))
    tmp.replace(target)
    conn = sqlite3.connect(str(target), isolation_level=None)
    try:
        configure(conn)
        conn.execute("BEGIN IMMEDIATE")
        n = outbox.mark_all_unknown_after_restore(conn, to_text(clock.now()))
        conn.execute("COMMIT")
        return Restored(n, replaced)
    finally:
        conn.close()


def backup_before_migration(path: Path | str, stamp: str) -> tuple[int, Path] | None:
    """`shopbot migrate`'s first step: when `path` holds a shopbot database of an older schema, SQLite's online
    backup of it goes beside it as `<name>.before-migration-<version>-<stamp>.bak` before anything changes. Returns
    (the old version, the backup's path), or None when there is nothing to migrate (missing, empty or current)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(str(path))
    except sqlite3.Error as exc:     # a folder, an unreadable file: one sentence, as every command gives
        raise opening_error(exc, path) from None
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
    except sqlite3.Error as exc:     # a damaged or foreign file: one sentence, as every command gives
        raise opening_error(exc, path) from None
    finally:
        conn.close()
