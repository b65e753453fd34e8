"""PostgreSQL's numbered migrations: the same version numbers as SQLite's (store/sqlite/migrations), each applied in
one transaction with its version record, under `pg_advisory_xact_lock`, so two processes starting at once on one
database cannot both apply a migration (the second waits, then finds it applied)."""
from __future__ import annotations

import time

from ...errors import SchemaTooNew, SchemaTooOld, StoreBusy
from ...shared import migration_files
from ..connection import PgConnection

MIGRATION_LOCK = 0x5_0B07_0001   # the advisory lock key of schema changes (any constant shared by all processes)
RUN_LOCK = 0x5_0B07_0006         # held (session-level) for a whole `migrate`; shared by a reader of the version
SETTLE_S = 300.0                 # the longest a process waits for another's migrations to finish


def available() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every PostgreSQL migration file, in order (numbered as SQLite's)."""
    return migration_files.available(__package__)


LATEST = available()[-1][0]   # numbers only increase and may leave a gap (as SQLite's)


def current_version(conn: PgConnection) -> int:
    # One statement, one snapshot: asked in two, a process starting beside one that is migrating could see no
    # schema record and then the tables that the other's first migration just committed with it (K18).
    record, tables = conn.execute(
        "SELECT to_regclass('schema_migrations') IS NOT NULL, (SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = current_schema())").fetchone()
    if not record:
        if tables:
            raise SchemaTooOld(0, LATEST, "this database (it holds tables but no shopbot schema record)")
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])


def check_not_newer(conn: PgConnection, where: str) -> int:
    version = current_version(conn)
    if version > LATEST:
        raise SchemaTooNew(version, LATEST, where)
    return version


def _session_lock(conn: PgConnection, shared: bool) -> None:
    """The run lock, waited for with a deadline (a whole migration may outlast the connection's lock_timeout)."""
    deadline = time.monotonic() + SETTLE_S
    take = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
    while not conn.execute(f"SELECT {take}($1)", (RUN_LOCK,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise StoreBusy(f"another process has been migrating this database for over {SETTLE_S:.0f} s")
        time.sleep(0.05)


def settled_version(conn: PgConnection, where: str) -> int:
    """The schema version once no other process is migrating (K18: a process that starts beside one migrating an
    empty database waits for it, instead of mistaking the half-built schema for an old one)."""
    _session_lock(conn, shared=True)
    try:
        return check_not_newer(conn, where)
    finally:
        conn.execute("SELECT pg_advisory_unlock_shared($1)", (RUN_LOCK,))


def migrate(conn: PgConnection, where: str, now_text: str, up_to: int | None = None) -> list[int]:
    """Apply every missing migration (up to `up_to`), each in its own transaction with its version row, under the
    migration advisory lock (transactional DDL: a failed migration leaves nothing), the whole run under the run
    lock that `settled_version` waits for. Returns the versions applied."""
    _session_lock(conn, shared=False)
    try:
        return _migrate(conn, where, now_text, up_to)
    finally:
        conn.execute("SELECT pg_advisory_unlock($1)", (RUN_LOCK,))


def _migrate(conn: PgConnection, where: str, now_text: str, up_to: int | None) -> list[int]:
    applied = []
    for number, name, sql in available():
        if up_to is not None and number > up_to:
            continue
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock($1)", (MIGRATION_LOCK,))
            # Re-checked under the lock: another process may have migrated meanwhile.
            if check_not_newer(conn, where) >= number:
                conn.execute("ROLLBACK")
                continue
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version bigint PRIMARY KEY, "
                         "name text COLLATE \"C\" NOT NULL, applied_at timestamptz NOT NULL)")
            conn.raw.execute(sql.encode())        # the whole file: PostgreSQL parses it (functions hold `;`)
            conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                         (number, name, now_text))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(number)
    return applied
