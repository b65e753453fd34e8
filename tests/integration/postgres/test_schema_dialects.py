"""Both dialects reach the same logical schema (tables, columns, CHECK lists, one trigger per contract rule), and
PostgreSQL's triggers refuse a planted illegal move with SQLite's `Cn:` message."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import psycopg
import pytest

from store import IllegalTransition, ManualClock, open_store
from store.postgres.connection import translate

NOW = "2027-03-01T09:00:00.000000Z"


def sqlite_schema(path: Path) -> tuple[dict[str, list[str]], dict[str, set[str]], set[str]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables}
    checks = {t: set(re.findall(r"'([a-z_]+)'", sql.split("CHECK", 1)[1])) if "CHECK" in sql else set()
              for t, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")}
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    conn.close()
    return columns, checks, triggers


def postgres_schema(url: str) -> tuple[dict[str, list[str]], dict[str, set[str]], set[str]]:
    with psycopg.connect(url) as conn:
        columns: dict[str, list[str]] = {}
        for table, column in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                                          "WHERE table_schema = 'public'"):
            columns.setdefault(table, []).append(column)
        checks: dict[str, set[str]] = {t: set() for t in columns}
        for table, definition in conn.execute(
                "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' "
                "AND conrelid <> 0"):
            checks[table] |= set(re.findall(r"'([a-z_]+)'", definition))
        triggers = {r[0] for r in conn.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")}
    return {t: sorted(c) for t, c in columns.items()}, checks, triggers


async def test_both_dialects_reach_the_same_tables_columns_check_lists_and_triggers(tmp_path, pg_url):
    clock = ManualClock(__import__("datetime").datetime(2027, 3, 1, tzinfo=__import__("datetime").UTC))
    await (await open_store(tmp_path / "s.sqlite3", clock)).close()
    s_columns, s_checks, s_triggers = sqlite_schema(tmp_path / "s.sqlite3")
    p_columns, p_checks, p_triggers = postgres_schema(pg_url)
    assert p_columns == s_columns
    assert {t: c for t, c in p_checks.items() if c} == {t: c for t, c in s_checks.items() if c}
    # PostgreSQL's own: the LISTEN/NOTIFY wake-up hints (0014); every contract trigger is in both
    assert {t for t in p_triggers if t.startswith("notify_")} == {"notify_work", "notify_deliveries",
                                                               "notify_actions", "notify_receipts"}
    assert {t for t in p_triggers if t.startswith("changed_")} == {"changed_work", "changed_deliveries",
                                                                "changed_actions", "changed_receipts"}  # 0015
    assert {t for t in p_triggers if not t.startswith(("notify_", "changed_"))} == s_triggers and len(s_triggers) >= 20


PLANTED = [
    ("UPDATE work SET state = 'running', run_id = NULL WHERE work_id = 1", "C5:"),
    ("UPDATE work SET state = 'finished' WHERE work_id = 1", "C4: illegal work transition"),
    ("UPDATE work SET payload = 'other' WHERE work_id = 1", "C1:"),
    ("UPDATE reports SET body = 'changed'", "C6:"),
    ("DELETE FROM reports", "C6: a report is never deleted"),
    ("UPDATE deliveries SET state = 'confirmed'", "C7: illegal delivery transition"),
    ("UPDATE deliveries SET text = 'other'", "C7: a delivery never changes what it sends"),
]


@pytest.mark.parametrize(("statement", "message"), PLANTED)
async def test_a_planted_illegal_move_is_refused_on_postgresql_with_the_contract_message(pg_url, statement, message):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO work (source, session, kind, payload, destination, admitted_at) "
                     "VALUES ('tg:1:1', 'tg:1', 'agent', 'hi', 'tg:1', %s)", (NOW,))
        conn.execute("INSERT INTO reports (report_id, anchor, generation, body, created_at) "
                     "VALUES ('r1.1', 1, 1, 'hi', %s)", (NOW,))
        conn.execute("INSERT INTO deliveries (report_id, part, parts, chat_id, text, created_at, updated_at) "
                     "VALUES ('r1.1', 1, 1, 1, 'hi', %s, %s)", (NOW, NOW))
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(statement)  # type: ignore[arg-type]
    error = translate(caught.value)
    assert isinstance(error, IllegalTransition) and str(error).startswith(message)


async def test_a_planted_delivery_resend_without_a_decision_is_refused_c8(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO work (source, session, kind, payload, admitted_at) "
                     "VALUES ('tg:1:1', 'tg:1', 'agent', 'hi', %s)", (NOW,))
        conn.execute("INSERT INTO reports (report_id, anchor, generation, body, created_at) "
                     "VALUES ('r1.1', 1, 1, 'hi', %s)", (NOW,))
        conn.execute("INSERT INTO deliveries (report_id, part, parts, chat_id, text, created_at, updated_at) "
                     "VALUES ('r1.1', 1, 1, 1, 'hi', %s, %s)", (NOW, NOW))
        conn.execute("UPDATE deliveries SET state = 'sending'")
        conn.execute("UPDATE deliveries SET state = 'unknown'")
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("UPDATE deliveries SET state = 'pending', resends = resends + 1")
    assert str(translate(caught.value)).startswith("C8: an unknown delivery is resent only")


async def test_postgresql_schema_sql_builds_the_same_catalog_as_the_migrations(pg_url, pg_empty_url):
    text = (Path(__file__).resolve().parents[3] / "store/postgres/schema.sql").read_text()
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute(text.encode())
    built = postgres_schema(pg_empty_url)
    migrated = postgres_schema(pg_url)
    assert built[0] == {t: c for t, c in migrated[0].items() if t != "schema_migrations"}
    assert built[2] == migrated[2]
    assert column_types(pg_empty_url) == {c: t for c, t in column_types(pg_url).items() if c[0] != "schema_migrations"}


def column_types(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as conn:
        return {(t, c): d for t, c, d in conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public'")}


def test_every_time_column_on_postgresql_is_a_timestamptz(pg_url):
    """Times are instants on PostgreSQL (0021); text is left for labels (a minute bucket, the shop's local dates)."""
    types = column_types(pg_url)
    times = {c for c in types if c[1].endswith(("_at", "not_before")) or c[1] in ("cursor", "fire_time")}
    assert len(times) > 50 and {c: types[c] for c in times} == dict.fromkeys(times, "timestamp with time zone")
    assert types[("counters", "minute")] == types[("spending", "day")] == types[("sales_days", "day")] == "text"


def test_two_processes_migrating_one_empty_database_at_once_apply_each_migration_once(pg_empty_url):
    import threading

    from store.postgres import migrations
    from store.postgres.connection import PgConnection, configure
    applied: list[list[int]] = []
    start = threading.Barrier(2)

    def migrate() -> None:
        with psycopg.connect(pg_empty_url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            configure(conn)
            start.wait(5)
            applied.append(migrations.migrate(PgConnection(conn), "test", NOW))
    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(v for versions in applied for v in versions) == [n for n, _, _ in migrations.available()]
    with psycopg.connect(pg_empty_url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(migrations.available())
