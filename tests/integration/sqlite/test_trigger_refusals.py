"""A trigger's refusal reads the same on both stores: every RAISE of SQLite's schema is an IllegalTransition (as
PostgreSQL's RAISE EXCEPTION is, store/postgres/connection.py `translate`), while SQLite's own constraint failures
stay a plain StoreError, so a caller that handles a refused move never swallows a broken constraint."""
from __future__ import annotations

import re
import sqlite3

import pytest

from store import IllegalTransition, StoreError
from store.sqlite.connection import translate
from tests.support import ROOT

SCHEMA = (ROOT / "store" / "sqlite" / "schema.sql").read_text()
REFUSALS = sorted(set(re.findall(r"RAISE\(ABORT, '([^']*)'\)", SCHEMA)))


def test_the_schema_has_refusals_with_and_without_a_contract_code():
    assert len(REFUSALS) > 20
    assert any(r.startswith("C11: ") for r in REFUSALS) and any(r.startswith("on order: ") for r in REFUSALS)


@pytest.mark.parametrize("message", REFUSALS)
def test_every_refusal_a_trigger_raises_is_an_illegal_transition(message: str):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, '{message}'); END")
    with pytest.raises(sqlite3.IntegrityError) as caught:
        conn.execute("INSERT INTO t VALUES (1)")
    error = translate(caught.value)
    assert isinstance(error, IllegalTransition) and str(error) == message


@pytest.mark.parametrize("statement", [
    "INSERT INTO t (id, x) VALUES (1, 1)",                # UNIQUE (the primary key)
    "INSERT INTO t (id, x) VALUES (2, NULL)",             # NOT NULL
    "INSERT INTO t (id, x) VALUES (3, -1)",               # CHECK
    "INSERT INTO u (t_id) VALUES (99)",                   # FOREIGN KEY
])
def test_a_constraint_failure_is_no_illegal_transition(statement: str):
    """Negative control: the database's own refusals are not taken for a trigger's."""
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER NOT NULL CHECK (x >= 0))")
    conn.execute("CREATE TABLE u (t_id INTEGER REFERENCES t (id))")
    conn.execute("INSERT INTO t (id, x) VALUES (1, 1)")
    with pytest.raises(sqlite3.IntegrityError) as caught:
        conn.execute(statement)
    error = translate(caught.value)
    assert isinstance(error, StoreError) and not isinstance(error, IllegalTransition), str(caught.value)
