"""One PostgreSQL database per test worker, emptied between tests back to what a freshly migrated one holds.

Emptying is one transaction: one TRUNCATE ... RESTART IDENTITY CASCADE of the tables the test touched (any row, or
an identity sequence drawn: one query finds them) and of the tables the migrations fill, then the rows the migrations
insert (reference rows such as open_agent_tally's slots, read from the fresh copy when the worker made it) put back,
and the sequences no table owns (RESTART IDENTITY does not reach them) set back. Only the touched tables, because a
TRUNCATE gives every table and index new files, and a new index is flushed to disk: all 31 tables took 0.4-0.6 s
here under load, the five or so a test touches a tenth of that. A test
that changed the schema itself (dropped an index, say) leaves a catalog that differs from the fresh one: the
database is then dropped and copied again from the template instead (`catalog_of` says what is compared).
tests/integration/postgres/test_worker_database.py compares an emptied database with a fresh one, table by table."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from tests.support import postgres as pg_support

KEPT = "schema_migrations"   # the migrations' own record: a fresh database has it, and no test writes it

# Everything of the schema a test could change with DDL, as one digest: relations, columns, constraints, indexes,
# triggers (and whether they are enabled), functions.
_CATALOG = """
WITH s AS (SELECT current_schema()::regnamespace::oid AS ns)
SELECT md5(string_agg(line, E'\\n' ORDER BY line)) FROM (
    SELECT format('rel %s %s', c.relkind, c.relname) AS line FROM pg_class c, s WHERE c.relnamespace = s.ns
    UNION ALL SELECT format('col %s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                            a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        JOIN s ON c.relnamespace = s.ns WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT format('con %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint, s
        WHERE connamespace = s.ns
    UNION ALL SELECT format('idx %s', pg_get_indexdef(i.indexrelid)) FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid JOIN s ON c.relnamespace = s.ns
    UNION ALL SELECT format('trg %s %s', t.tgenabled, pg_get_triggerdef(t.oid)) FROM pg_trigger t
        JOIN pg_class c ON c.oid = t.tgrelid JOIN s ON c.relnamespace = s.ns WHERE NOT t.tgisinternal
    UNION ALL SELECT format('fn %s %s', p.proname, md5(p.prosrc)) FROM pg_proc p, s WHERE p.pronamespace = s.ns
) AS catalog
"""
_TABLES = ("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> %s "
           "ORDER BY tablename")
# Sequences RESTART IDENTITY leaves alone: those no column owns (shopbot_changes, the change hint's).
_UNOWNED_SEQUENCES = """
SELECT c.relname FROM pg_class c WHERE c.relkind = 'S' AND c.relnamespace = current_schema()::regnamespace
    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i'))
ORDER BY c.relname
"""


# Tables whose identity sequence was drawn (pg_sequences shows no last_value for one never drawn or restarted).
_DRAWN = """
SELECT t.relname FROM pg_depend d JOIN pg_class q ON q.oid = d.objid JOIN pg_class t ON t.oid = d.refobjid
    JOIN pg_sequences s ON s.schemaname = current_schema() AND s.sequencename = q.relname
WHERE q.relkind = 'S' AND d.deptype IN ('a', 'i') AND s.last_value IS NOT NULL
"""


def connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(url, autocommit=True)


def catalog_of(conn: psycopg.Connection[Any]) -> str:
    return str(conn.execute(_CATALOG).fetchone()[0])  # type: ignore[index]


def rows_of(conn: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    return sorted(conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))).fetchall(), key=repr)


def sequence_state(conn: psycopg.Connection[Any], name: str) -> tuple[Any, ...]:
    row = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(sql.Identifier(name))).fetchone()
    assert row is not None
    return tuple(row)


@dataclass(frozen=True)
class Fresh:
    """What a freshly migrated database holds, read once from the worker's new copy."""
    tables: tuple[str, ...]
    seeds: dict[str, tuple[tuple[str, ...], list[tuple[Any, ...]]]]   # table -> (columns, rows) the migrations insert
    sequences: dict[str, tuple[Any, ...]]                            # unowned sequence -> (last_value, is_called)
    catalog: str

    @classmethod
    def read(cls, conn: psycopg.Connection[Any]) -> Fresh:
        tables = tuple(row[0] for row in conn.execute(_TABLES, (KEPT,)))
        seeds = {}
        for table in tables:
            cursor = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table)))
            rows = cursor.fetchall()
            if rows:
                seeds[table] = (tuple(column.name for column in cursor.description or ()), rows)
        sequences = {row[0]: sequence_state(conn, row[0]) for row in conn.execute(_UNOWNED_SEQUENCES)}
        return cls(tables, seeds, sequences, catalog_of(conn))


class WorkerDatabase:
    """This worker's database: made once from the template, emptied before each test that asks for it."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.name = f"shopbot_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{os.getpid()}"
        self.url = pg_support.url_of(self.name)
        self.used = False
        self.fresh = self._create()

    def _create(self) -> Fresh:
        pg_support.admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        pg_support.copy_template(self.template, self.name)
        with connect(self.url) as conn:
            return Fresh.read(conn)

    def emptied(self) -> str:
        """The database's URL, emptied if a test used it since it was made."""
        if self.used:
            self.empty()
        self.used = True
        return self.url

    def empty(self) -> None:
        """Back to the fresh state: emptied and seeded in one transaction, or copied again if the schema changed."""
        with connect(self.url) as conn:
            # What a test left connected (a store it did not close, a listener) would hold locks on the tables.
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            same_schema = catalog_of(conn) == self.fresh.catalog
            if same_schema:
                with conn.transaction():
                    self._truncate_and_seed(conn)
        if not same_schema:
            self.fresh = self._create()

    def touched(self, conn: psycopg.Connection[Any]) -> set[str]:
        """The tables holding a row or having drawn an identity since they were last emptied."""
        holding = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(sql.Literal(t), sql.Identifier(t))
            for t in self.fresh.tables)
        return {row[0] for row in conn.execute(sql.SQL("{} UNION ALL {}").format(holding, sql.SQL(_DRAWN)))}

    def _truncate_and_seed(self, conn: psycopg.Connection[Any]) -> None:
        tables = sorted(self.touched(conn) | self.fresh.seeds.keys())
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
            sql.SQL(", ").join(map(sql.Identifier, tables))))
        for table, (columns, rows) in self.fresh.seeds.items():
            conn.cursor().executemany(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join([sql.Placeholder()] * len(columns))), rows)
        for name, (last_value, is_called) in self.fresh.sequences.items():
            conn.execute("SELECT setval(%s, %s, %s)", (name, last_value, is_called))

    def drop(self) -> None:
        pg_support.admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
