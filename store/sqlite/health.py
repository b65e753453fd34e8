"""Whether the database takes writes: the outcome of the last commit and a cheap write probe (/healthz).

The probe is one short write transaction: it takes the write lock with a short busy timeout (a foreign connection
holding the lock is reported, not waited out for the full busy timeout), allocates a few pages inside a savepoint
that it rolls back (a database with no room for new pages is reported full before an admission finds out), and
commits one row (a disk that cannot take the commit is reported). It changes nothing anyone reads.
"""
from __future__ import annotations

import sqlite3

from ..shared.health import reason
from .connection import numbered

__all__ = ["probe", "reason"]

PROBE_BUSY_TIMEOUT_MS = 250
SCRATCH_PAGES = 2


def probe(conn: sqlite3.Connection, now: str, busy_timeout_ms: int) -> None:
    """Run outside any transaction (`Database.raw`); raises the driver's error when a write cannot commit."""
    conn.execute(f"PRAGMA busy_timeout={PROBE_BUSY_TIMEOUT_MS}")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute("SAVEPOINT health_scratch")
            conn.execute("CREATE TABLE health_scratch (pad BLOB)")
            conn.execute("INSERT INTO health_scratch VALUES (zeroblob($1))", numbered((page_size * SCRATCH_PAGES,)))
            conn.execute("ROLLBACK TO health_scratch")
            conn.execute("RELEASE health_scratch")
            conn.execute("INSERT INTO health_probe (id, probed_at) VALUES (1, $1) "
                         "ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at", numbered((now,)))
        except BaseException:
            if conn.in_transaction:     # SQLite may already have rolled back on its own (SQLITE_FULL can)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
