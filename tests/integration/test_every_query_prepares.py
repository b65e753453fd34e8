"""Every statement written in store/ is compiled by the database it is for, without running it: the shared SQL
(store/shared) on SQLite and on PostgreSQL, each dialect's own (store/sqlite, store/postgres) on its own database.

The statements are read from the source (tests cannot miss one that no other test runs): every string passed to
`execute`/`executemany`, every module-level SQL constant, the dialects' named SQL (store/shared/dialect.py) and the
invariant rules. A statement is compiled with EXPLAIN (SQLite prepares it; PostgreSQL plans it), its parameters bound
to NULL. A statement put together at run time from pieces (an f-string over a list of marks) is resolved where its
pieces are module constants; the few that are built from call arguments are listed in DYNAMIC by their function, and
run by the contract suite on both stores.
"""
from __future__ import annotations

import ast
import importlib
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import fields

import psycopg
import pytest

from store.postgres.connection import paramstyle
from store.postgres.dialect import POSTGRES
from store.shared.dialect import DialectSQL
from store.shared.invariants import RULES
from store.sqlite.dialect import SQLITE
from store.sqlite.migrations import migrate
from tests.support import ROOT

SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
DIALECT_DIRS = {"shared": ("sqlite", "postgres"), "sqlite": ("sqlite",), "postgres": ("postgres",)}


class _Unresolved(Exception):
    pass


def _text(node: ast.expr, module: object) -> str:
    """The statement's text where it is made of literals and module constants (marks lists become one mark)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, module) + _text(node.right, module)
    if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), str):
        return str(getattr(module, node.id))
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(_text(value.value, module))
        return "".join(parts)
    raise _Unresolved(ast.dump(node)[:80])


def statements() -> Iterator[tuple[str, str, str]]:
    """(dialect folder, where, sql) for every statement of store/."""
    for folder in DIALECT_DIRS:
        for path in sorted((ROOT / "store" / folder).glob("*.py")):
            name = f"store.{folder}.{path.stem}"
            module = importlib.import_module(name)
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("execute", "executemany") and node.args):
                    try:
                        sql = _text(node.args[0], module)
                    except _Unresolved:
                        continue            # built from call arguments: run by the contract suite
                    if SQL_START.match(sql):
                        yield folder, f"{path.relative_to(ROOT)}:{node.lineno}", sql
            for attr, value in vars(module).items():
                if isinstance(value, str) and SQL_START.match(value) and attr.isupper() and not attr.startswith("_"):
                    yield folder, f"{name}.{attr}", value
    for rule, (_, queries) in RULES.items():
        for query in queries:
            yield "shared", f"invariant {rule}", query
    for dialect, named in (("sqlite", SQLITE), ("postgres", POSTGRES)):
        for field in fields(DialectSQL):
            value = getattr(named, field.name)
            for key, sql in (value.items() if isinstance(value, dict) else [("", value)]):
                text = sql if SQL_START.match(sql) else f"SELECT {sql} FROM deliveries d"
                yield dialect, f"{dialect} {field.name} {key}".strip(), text


ALL = list(statements())


def _sqlite_explain(conn: sqlite3.Connection, sql: str) -> None:
    class Nulls(dict):  # type: ignore[type-arg]
        def __missing__(self, key: str) -> None:
            return None
    if re.search(r"(?<![:\w']):[A-Za-z_]\w*", sql):
        conn.execute("EXPLAIN " + sql, Nulls())
        return
    try:
        conn.execute("EXPLAIN " + sql)
    except sqlite3.ProgrammingError as exc:
        wanted = re.search(r"uses (\d+)", str(exc))
        if wanted is None:
            raise
        conn.execute("EXPLAIN " + sql, [None] * int(wanted.group(1)))


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


def test_every_postgres_and_shared_statement_compiles_on_postgresql(pg_url):
    failures = []
    with psycopg.connect(pg_url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        for folder, where, sql in ALL:
            if "postgres" not in DIALECT_DIRS[folder]:
                continue
            named = bool(re.search(r"(?<![:\w']):[A-Za-z_]\w*", sql))
            text = paramstyle(sql, named=named)

            class Nulls(dict):  # type: ignore[type-arg]
                def __missing__(self, key: str) -> None:
                    return None
            params: object = Nulls() if named else [None] * text.count("%s")
            try:
                conn.execute("EXPLAIN " + text, params)  # type: ignore[arg-type]
            except psycopg.Error as exc:
                failures.append(f"{where}: {str(exc).splitlines()[0]}")
    assert not failures, "\n".join(failures)


def test_a_statement_only_sqlite_speaks_is_refused_by_postgresql(pg_url, sqlite_db):
    """Negative control: SQLite's own words (its planner hint, group_concat) compile on SQLite and fail on
    PostgreSQL, so a shared statement written in one dialect's words would be caught."""
    sql = SQLITE.oldest_open["work"]
    _sqlite_explain(sqlite_db, sql)
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.SyntaxError):
        conn.execute("EXPLAIN " + sql)
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.UndefinedFunction):
        conn.execute(f"EXPLAIN SELECT {SQLITE.report_sources} FROM deliveries d")
