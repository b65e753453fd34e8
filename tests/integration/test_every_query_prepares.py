"""Every statement written in store/ is compiled by the database it is for, without running it: the shared SQL
(store/shared) on SQLite and on PostgreSQL, each dialect's own (store/sqlite, store/postgres) on its own database.

The statements are read from the source (tests/support/statements.py: every string passed to `execute`/`executemany`,
every module-level SQL constant, the dialects' named SQL and the invariant rules). A statement is compiled with
EXPLAIN (SQLite prepares it; PostgreSQL plans it), each `$n` bound to NULL by the store's own connections: the text
as written, nothing rewritten (`SqliteConnection` keys the parameters by number; `PgConnection` hands them to the
server). A statement built from call arguments is run by the contract suite on both stores.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import psycopg
import pytest

from store.postgres.connection import PgConnection, PgCursor
from store.sqlite.connection import SqliteConnection
from store.sqlite.dialect import SQLITE
from store.sqlite.migrations import migrate
from tests.support.statements import DIALECT_DIRS, parameters, statements

ALL = list(statements())


def _sqlite_explain(conn: sqlite3.Connection, sql: str) -> None:
    SqliteConnection(conn).execute("EXPLAIN " + sql, [None] * parameters(sql))


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path = tmp_path_factory.mktemp("prepare") / "schema.sqlite3"
    conn = sqlite3.connect(str(path), isolation_level=None)
    migrate(conn, str(path), "2027-03-01T09:00:00.000000Z")
    conn.execute("CREATE TABLE health_scratch (pad BLOB)")   # the write probe makes it, in a savepoint it rolls back
    yield conn
    conn.close()


def test_the_statements_are_found():
    """Negative control for the reading: the shapes the store uses are all found (a reading that found nothing would
    pass every test below)."""
    where = {w for _, w, _ in ALL}
    assert len(ALL) > 150
    assert any("store/shared/inbox.py" in w for w in where) and any("store/postgres/guards.py" in w for w in where)
    assert any(w.startswith("invariant") for w in where) and any(w.startswith("postgres report_sources") for w in where)


def test_every_sqlite_and_shared_statement_compiles_on_sqlite(sqlite_db):
    failures = []
    for folder, where, sql in ALL:
        if "sqlite" in DIALECT_DIRS[folder]:
            try:
                _sqlite_explain(sqlite_db, sql)
            except sqlite3.Error as exc:
                failures.append(f"{where}: {exc}")
    assert not failures, "\n".join(failures)


def _pg_refusal(conn: PgConnection, sql: str) -> str | None:
    """Why PostgreSQL refuses `sql`, or None: parsed as the store's statements are (its parameters' types left to
    the server to infer, as for the text values the store binds), then planned (EXPLAIN, parameters NULL). EXPLAIN
    alone would not do: it leaves a parameter whose type nothing determines unchecked."""
    parsed = conn.raw.pgconn.prepare(b"", sql.encode())
    if parsed.status == psycopg.pq.ExecStatus.FATAL_ERROR:
        return parsed.error_message.decode().splitlines()[0]
    try:
        conn.execute("EXPLAIN " + sql, [None] * parameters(sql))
    except psycopg.Error as exc:
        return str(exc).splitlines()[0]
    return None


def test_every_postgres_and_shared_statement_compiles_on_postgresql(pg_url):
    failures = []
    with psycopg.connect(pg_url, autocommit=True, cursor_factory=PgCursor) as raw:
        conn = PgConnection(raw)
        for folder, where, sql in ALL:
            if "postgres" in DIALECT_DIRS[folder] and (refusal := _pg_refusal(conn, sql)) is not None:
                failures.append(f"{where}: {refusal}")
    assert not failures, "\n".join(failures)


def test_a_parameter_postgresql_cannot_type_is_refused(pg_url):
    """Negative control for the parse: a value bound twice whose first use gives it no type is refused (EXPLAIN
    alone lets it through), and the same statement with that first use cast is taken."""
    with psycopg.connect(pg_url, autocommit=True, cursor_factory=PgCursor) as raw:
        conn = PgConnection(raw)
        untyped = "SELECT item FROM items WHERE ($1 IS NULL OR item = $1)"
        conn.execute("EXPLAIN " + untyped, [None])
        assert "could not determine data type of parameter $1" in (_pg_refusal(conn, untyped) or "")
        assert _pg_refusal(conn, "SELECT item FROM items WHERE (CAST($1 AS text) IS NULL OR item = $1)") is None


def test_a_statement_only_sqlite_speaks_is_refused_by_postgresql(pg_url, sqlite_db):
    """Negative control: SQLite's own words (its planner hint, group_concat) compile on SQLite and fail on
    PostgreSQL, so a shared statement written in one dialect's words would be caught."""
    sql = SQLITE.oldest_open["work"]
    _sqlite_explain(sqlite_db, sql)
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.SyntaxError):
        conn.execute("EXPLAIN " + sql)
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.UndefinedFunction):
        conn.execute(f"EXPLAIN SELECT {SQLITE.report_sources} FROM deliveries d")
