"""Issue 29: one placeholder syntax, PostgreSQL's `$1` .. `$n`, in every statement of store/, bound natively by both
drivers; nothing rewrites a statement at run time.

Two guards, each with its negative control:
- no statement or fragment of SQL in store/ holds another paramstyle's mark (`?`, `:name`, `%s`, `%(name)s`), read
  from the source as tests/support/statements.py reads it (test_every_query_prepares.py compiles the statements);
- neither connection changes the text it is given: PostgreSQL's own `current_query()` answers with the text the
  server received, through the store's pool; SQLite's `SqliteConnection` is driven over a real sqlite3 connection
  that records the text it is asked to run (SQLite itself shows a statement only with its values expanded).
"""
from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from store.postgres.connection import Database as PgDatabase
from store.postgres.connection import PgConnection
from store.sqlite.connection import Database as SqliteDatabase
from store.sqlite.connection import SqliteConnection
from tests.support import ROOT
from tests.support.statements import DIALECT_DIRS, foreign_marks, source_files, sql_strings

# The text and the values each probe must come back with: a number used twice, a `%` that is only text (LIKE and
# the modulo operator), a `:` that is a cast, a `?` inside a string literal.
PROBES: tuple[tuple[str, tuple[Any, ...], tuple[Any, ...]], ...] = (
    ("SELECT $1 LIKE 'tg:%', $2 % 3, $1, '?'", ("tg:1", 7), (1, 1, "tg:1", "?")),
    ("SELECT CAST($1 AS integer) + $2, $2", (40, 2), (42, 2)),
)
PG_PROBES: tuple[tuple[str, tuple[Any, ...], tuple[Any, ...]], ...] = (
    ("SELECT current_query(), $1::text LIKE 'tg:%', $2::int % 3, $1::text, '?'", ("tg:1", 7),
     (True, 1, "tg:1", "?")),
    ("SELECT current_query(), $1::float8 * 2, ($2::text IS NULL OR $2 = 'x')", (1.5, None), (3.0, True)),
)


def _foreign(path: Path, source: str) -> list[str]:
    return [f"{path}:{line}: {marks} in {text.strip()[:70]!r}"
            for line, text in sql_strings(source, str(path)) if (marks := foreign_marks(text))]


def test_no_statement_in_store_holds_another_paramstyles_marks():
    found = [hit for folder in DIALECT_DIRS for path in source_files(folder)
             for hit in _foreign(path.relative_to(ROOT), path.read_text())]
    assert not found, "\n".join(found)


PLANTED = '''
def planted(conn, ids, item, name):
    conn.execute("SELECT 1 FROM work WHERE work_id = ?", (1,))
    conn.execute(f"UPDATE work SET state = 'failed' WHERE work_id IN ({','.join('?' * len(ids))})", ids)
    conn.execute("SELECT 1 FROM items WHERE (:item IS NULL OR item = :item)", {"item": item})
    conn.execute("SELECT 1 FROM items WHERE item = %s", (item,))
    sets = f", {name} = ?"
    conn.execute("SELECT 1 FROM items WHERE item = %(item)s", {"item": item})
    conn.execute(f"SELECT 1 FROM work WHERE session NOT IN ({','.join(f':skip{i}' for i in ids)})", ids)
    conn.execute("SELECT $1::float8, 'tg:%', '?' FROM items WHERE item = $2", (1.0, item))
    print("Shall I order?", ":memory:")
'''


def test_a_planted_statement_with_another_paramstyles_marks_is_caught():
    """Negative control: each of the old shapes is found (qmark, a list of `?` marks, named, format, pyformat, a
    fragment), and none of the new: `$n`, a `::` cast, `%` and `?` inside string literals, prose."""
    lines = {int(hit.split(":")[1]) for hit in _foreign(Path("planted.py"), PLANTED)}
    assert lines == {3, 4, 5, 6, 7, 8, 9}


class Recording(sqlite3.Connection):
    """A real sqlite3 connection that keeps the text of every statement it is asked to run."""

    seen: list[str]

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.seen.append(sql)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        self.seen.append(sql)
        return super().executemany(sql, parameters)


def _sqlite_sees_the_text(conn: SqliteConnection, raw: Recording) -> None:
    for sql, params, expected in PROBES:
        raw.seen = []
        assert tuple(conn.execute(sql, params).fetchone()) == expected
        assert raw.seen == [sql]
    raw.seen = []
    conn.execute("CREATE TEMP TABLE seen (n integer, tag text)")
    conn.executemany("INSERT INTO seen (n, tag) VALUES ($1, $2 || '%')", [(1, "a"), (2, "b")])
    assert raw.seen[-1] == "INSERT INTO seen (n, tag) VALUES ($1, $2 || '%')"
    assert [tuple(r) for r in conn.execute("SELECT n, tag FROM seen ORDER BY n")] == [(1, "a%"), (2, "b%")]


def _recording(path: Path) -> Recording:
    raw = sqlite3.connect(str(path), isolation_level=None, factory=Recording)
    assert isinstance(raw, Recording)
    raw.seen = []
    return raw


async def test_sqlite_binds_the_numbered_marks_and_runs_the_text_it_is_given(tmp_path):
    db = await SqliteDatabase.open(tmp_path / "probe.sqlite3")
    try:    # the store's transactions are handed the SqliteConnection driven below
        assert await db.read(lambda conn: type(conn)) is SqliteConnection
        assert await db.write(lambda conn: type(conn)) is SqliteConnection
    finally:
        await db.close()
    raw = _recording(tmp_path / "probe.sqlite3")
    try:
        _sqlite_sees_the_text(SqliteConnection(raw), raw)
    finally:
        raw.close()


class QmarkRewriting(SqliteConnection):
    """What issue 29 removed, on SQLite's side: `$n` made into `?` with the parameters reordered to match."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        order = [int(n) - 1 for n in re.findall(r"\$(\d+)", sql)]
        return self.raw.execute(re.sub(r"\$\d+", "?", sql), [params[i] for i in order])


def test_a_rewriting_sqlite_connection_is_caught(tmp_path):
    """Negative control: a connection that rewrites the marks still answers right, and the guard fails."""
    raw = _recording(tmp_path / "probe.sqlite3")
    try:
        with pytest.raises(AssertionError):
            _sqlite_sees_the_text(QmarkRewriting(raw), raw)
    finally:
        raw.close()


def _server_sees_the_text(conn: PgConnection) -> None:
    for sql, params, expected in PG_PROBES:
        row = conn.execute(sql, params).fetchone()
        assert (row[0], tuple(row[1:])) == (sql, expected)


def _server_sees_the_text_of_many(conn: PgConnection) -> None:
    conn.execute("CREATE TEMP TABLE seen (query text, tag text) ON COMMIT DROP")
    sql = "INSERT INTO seen (query, tag) VALUES (current_query(), $1 || '%')"
    conn.executemany(sql, [("a",), ("b",)])
    assert [tuple(r) for r in conn.execute("SELECT query, tag FROM seen ORDER BY tag")] == [(sql, "a%"), (sql, "b%")]


async def test_postgresql_receives_the_text_the_store_wrote(pg_url):
    db = await PgDatabase.open(pg_url, max_size=1)
    try:
        for _ in range(6):      # psycopg would prepare a statement run five times by name: the pool's do not
            await db.read(_server_sees_the_text)
        assert await db.read(lambda conn: conn.raw.prepare_threshold) is None
        await db.write(_server_sees_the_text_of_many)
    finally:
        await db.close()


class OldParamstyle(PgConnection):
    """What issue 29 removed: the marks rewritten for psycopg's client-side paramstyle (`%` doubled, `$n` as
    `%(n)s`), the values then inlined by a ClientCursor."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = psycopg.ClientCursor(self.raw)
        cursor.execute(re.sub(r"\$(\d+)", r"%(\1)s", sql.replace("%", "%%")),
                       {str(n): value for n, value in enumerate(params, start=1)})
        return cursor


async def test_a_rewriting_postgresql_connection_is_caught(pg_url):
    """Negative control: the old rewriting answers the same values, and the server shows the guard its own text."""
    db = await PgDatabase.open(pg_url, max_size=1)
    try:
        with pytest.raises(AssertionError):
            await db.read(lambda conn: _server_sees_the_text(OldParamstyle(conn.raw)))
    finally:
        await db.close()
