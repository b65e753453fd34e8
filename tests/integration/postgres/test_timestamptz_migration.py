"""Migration 0021 on a populated database: every time column, text until 0020, becomes `timestamptz` holding the same
instant, read back as an aware datetime; nothing else of the rows changes."""
from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import psycopg

from store.clock import from_text, to_text
from store.postgres import migrations
from store.postgres.connection import PgConnection, configure

NOW = "2027-03-01T09:00:00.000000Z"
BEFORE = 20          # the last version that kept times as text
CONVERTED = 21       # the migration under test (later ones are left out: 0022 drops a text column)

# One row in every table that has a time column at version 20, every time column set (distinct instants, with
# microseconds); the triggers' rules are kept (new rows start pending).
ROWS = """
INSERT INTO work (source, session, kind, payload, destination, admitted_at, not_before, ended_at, pruned_at)
    VALUES ('tg:1:1', 'tg:1', 'agent', 'hi', 'tg:1', {t}, {t}, {t}, {t});
INSERT INTO sessions (session, forgotten_at, forgotten_by) VALUES ('tg:1', {t}, 'owner');
INSERT INTO history (session, role, text, created_at) VALUES ('tg:1', 'user', 'hi', {t});
INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at, ended_at, outcome)
    VALUES ('run1', 'w', 'tg:1', 1, 1, 0, {t}, {t}, 'finished');
INSERT INTO reports (report_id, anchor, generation, body, created_at, pruned_at) VALUES ('r1.1', 1, 1, 'b', {t}, {t});
INSERT INTO operations (run_id, call_id, tool, arguments, effect, started_at, finished_at)
    VALUES ('run1', 'c1', 'get_item', '{{}}', 'read', {t}, {t});
INSERT INTO deliveries (report_id, part, parts, chat_id, text, not_before, created_at, updated_at, pruned_at)
    VALUES ('r1.1', 1, 1, 7, 'b', {t}, {t}, {t}, {t});
INSERT INTO resolutions (delivery_id, decision, decided_by, decided_at) VALUES (1, 'resend', 'owner', {t});
INSERT INTO prompts (nonce, kind, target, chat_id, created_at, expires_at, decided_at)
    VALUES ('n1', 'proposal', '1', 7, {t}, {t}, {t});
INSERT INTO items (item, unit, on_hand, reorder_point, target, unit_cost_cents, updated_at)
    VALUES ('vanilla', 'tubs', 2, 8, 8, 300, {t});
INSERT INTO stock_events (item, kind, new_on_hand, created_at) VALUES ('vanilla', 'seed', 2, {t});
INSERT INTO drafts (run_id, item, quantity, unit_cost_cents, cost_cents, created_at)
    VALUES ('run1', 'vanilla', 6, 300, 1800, {t});
INSERT INTO proposals (run_id, supplier, item, quantity, unit_cost_cents, total_cents, state, created_at, updated_at,
                       expires_at, decided_at)
    VALUES ('run1', 'dairy', 'vanilla', 6, 300, 1800, 'approved', {t}, {t}, {t}, {t});
INSERT INTO schedule_cursors (schedule, cursor, updated_at) VALUES ('daily', {t}, {t});
INSERT INTO missed_occurrences (schedule, key, reason, fire_time, recorded_at) VALUES ('daily', 'k', 'late', {t}, {t});
INSERT INTO stock_watch (item, armed, episode, updated_at) VALUES ('vanilla', 1, 1, {t});
INSERT INTO actions (proposal_id, idempotency_key, destination, payload, not_before, created_at, updated_at)
    VALUES (1, '0123456789abcdef0123456789abcdef', 'supplier:dairy', '{{}}', {t}, {t}, {t});
INSERT INTO action_decisions (action_id, decision, decided_by, decided_at) VALUES (1, 'resend', 'owner', {t});
INSERT INTO spending (proposal_id, day, cents, state, updated_at) VALUES (1, '2027-03-01', 1800, 'reserved', {t});
INSERT INTO orders (proposal_id, item, quantity, approved_at, due_at, settled_at, updated_at)
    VALUES (1, 'vanilla', 6, {t}, {t}, {t}, {t});
INSERT INTO health_probe (id, probed_at) VALUES (1, {t});
INSERT INTO receipts (chat_id, message_id, emoji, not_before, created_at, updated_at) VALUES (7, 1, 'x', {t}, {t}, {t});
INSERT INTO sales_days (item, day, quantity, source, imported_at) VALUES ('vanilla', '2027-03-01', 3, 'f.csv', {t});
INSERT INTO item_settings (item, reorder_point, target, decided_by, decided_at) VALUES ('vanilla', 4, 8, 'owner', {t});
"""


def _populate(conn: psycopg.Connection) -> None:
    start = datetime(2027, 2, 3, 4, 5, 6, 123456, tzinfo=UTC)
    moments = (start + timedelta(hours=n, microseconds=n) for n in itertools.count())
    conn.execute(ROWS.replace("{t}", "{}").format(*(f"'{to_text(next(moments))}'" for _ in range(ROWS.count("{t}"))))
                 .encode())


def _columns(conn: psycopg.Connection, data_type: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND data_type = %s ORDER BY 1, 2", (data_type,))]


def _values(conn: psycopg.Connection, columns: list[tuple[str, str]]) -> dict[tuple[str, str], list[object]]:
    """Each column's non-NULL values, in the order of the table's first column (its key)."""
    return {(t, c): [r[0] for r in conn.execute(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY 1")]  # type: ignore[arg-type]
            for t, c in columns}


def test_migration_21_turns_every_time_column_into_timestamptz_keeping_each_instant(pg_empty_url):
    with psycopg.connect(pg_empty_url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        configure(conn)
        migrations.migrate(PgConnection(conn), "test", NOW, up_to=BEFORE)
        _populate(conn)
        text_columns = _columns(conn, "text")
        before = _values(conn, text_columns)
        already = set(_columns(conn, "timestamp with time zone"))        # the lease times, since 0012 and 0013
        applied = migrations.migrate(PgConnection(conn), "test", NOW, up_to=CONVERTED)
        converted = [c for c in _columns(conn, "timestamp with time zone") if c not in already]
        after = _values(conn, text_columns)

    assert applied == [CONVERTED]
    assert len(converted) == 47 and set(converted) <= set(text_columns)
    assert ("counters", "minute") not in converted and ("spending", "day") not in converted   # not instants
    empty = [column for column in converted if not before[column]]
    assert not empty, f"no row holds a value in {empty}: the test would not see them converted"
    for column in text_columns:
        if column not in converted:
            # nothing else changes (but the record of the migration itself)
            assert after[column] == before[column] or column == ("schema_migrations", "name"), column
            continue
        assert all(isinstance(v, datetime) and v.utcoffset() == timedelta(0) for v in after[column]), column
        assert after[column] == [from_text(str(v)) for v in before[column]], column   # the same instants
