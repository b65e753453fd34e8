"""Numbered migrations, each applied in one transaction together with its version record."""
from __future__ import annotations

import sqlite3

from ... import faults
from ...errors import NotShopbotDatabase, SchemaTooNew
from ...shared import migration_files
from ...shared.connection import Connection
from ..connection import numbered, vacuum

FOREIGN_KEYS_OFF = "-- pragma: foreign_keys=OFF"   # a migration that rebuilds a table starts so
# A new database is made by applying every migration, one transaction each: a process killed between two leaves a
# database part way to the latest schema. Its creation is marked in the file's header (`PRAGMA user_version`, which
# commits and rolls back with the transaction that sets it) from the first step's commit to the last one's, so the
# next start finishes the creation instead of asking for `shopbot migrate` (nothing but the schema can be in it: the
# product writes only once the store is open). An existing database migrated by `shopbot migrate` is never marked.
CREATING = 0x73686F70          # "shop"


def available(package: str | None = None) -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration file of `package` (this one by default), in order."""
    return migration_files.available(package or __package__)


# Numbers are assigned per change and may leave a gap while a branch waits for another's migration; they only
# ever increase, and a database records every number it applied.
LATEST = available()[-1][0]


def current_version(conn: Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
    if not exists:
        has_tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if has_tables:
            raise NotShopbotDatabase("this database", "it holds tables but no shopbot schema record")
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]


def check_not_newer(conn: sqlite3.Connection, path: str) -> int:
    try:
        version = current_version(conn)
    except NotShopbotDatabase as exc:
        raise NotShopbotDatabase(path, "it holds tables but no shopbot schema record") from exc
    if version > LATEST:
        raise SchemaTooNew(version, LATEST, path)
    return version


def creation_unfinished(conn: sqlite3.Connection) -> bool:
    """The database is a new one whose creation was interrupted between two migrations (see `CREATING`)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0]) == CREATING


def migrate(conn: sqlite3.Connection, path: str, now_text: str, up_to: int | None = None) -> list[int]:
    """Apply every missing migration (up to `up_to`), each in its own transaction with its version row. Returns the
    versions applied. A new database (or one whose creation was interrupted) is marked `CREATING` until the
    transaction of its last step."""
    version = check_not_newer(conn, path)
    creating = version == 0 or creation_unfinished(conn)
    steps = [m for m in available() if m[0] > version and (up_to is None or m[0] <= up_to)]
    applied = []
    for number, name, sql in steps:
        rebuild = sql.startswith(FOREIGN_KEYS_OFF)
        enforced = conn.execute("PRAGMA foreign_keys").fetchone()[0]
        if rebuild:          # a table rebuild (SQLite's documented procedure): foreign keys off, checked before commit
            conn.execute("PRAGMA foreign_keys=OFF")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-check inside the write lock: another process may have migrated meanwhile.
                if current_version(conn) >= number:
                    conn.execute("ROLLBACK")
                    continue
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                             "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
                for statement in split_statements(sql):
                    conn.execute(statement)
                if creating:
                    conn.execute(f"PRAGMA user_version = {0 if number == steps[-1][0] else CREATING}")
                if rebuild and conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                    raise sqlite3.IntegrityError(f"migration {number:04d} would break a foreign key")
                conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                             numbered((number, name, now_text)))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if creating and number != steps[-1][0]:
                faults.reached("schema-step")
        finally:
            if rebuild:
                conn.execute(f"PRAGMA foreign_keys={int(enforced)}")
        if rebuild and conn.execute("PRAGMA freelist_count").fetchone()[0]:
            vacuum(conn)               # the old table's pages are free: handed back, not left as a free list
        applied.append(number)
    return applied


def split_statements(sql: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own; we keep one transaction)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not buffer.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement at the end of a migration: {buffer.strip()[:60]}")
    return statements
