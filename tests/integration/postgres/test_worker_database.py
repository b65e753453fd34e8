"""The worker's shared PostgreSQL database (tests/support/worker_database.py), emptied between tests, holds exactly
what a freshly migrated copy holds: every table's rows, every sequence's position and the catalog, compared one by
one; a leftover row, a missing reference row, a moved sequence or a changed schema would each show."""
from __future__ import annotations

from typing import Any

from store import ManualClock, Occurrence, WorkKind, open_store
from tests.contract.store.test_outbox_contract import finished_report
from tests.support.worker_database import WorkerDatabase, catalog_of, connect, rows_of, sequence_state


def snapshot(url: str) -> dict[str, Any]:
    """Everything a test could see of a database's state, by table, sequence and catalog."""
    with connect(url) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        sequences = [row[0] for row in conn.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema()")]
        state: dict[str, Any] = {f"table {t}": rows_of(conn, t) for t in tables}
        state |= {f"sequence {s}": sequence_state(conn, s) for s in sequences}
        state["catalog"] = catalog_of(conn)
    return state


def differences(url: str, fresh_url: str) -> list[str]:
    here, fresh = snapshot(url), snapshot(fresh_url)
    return sorted(key for key in here.keys() | fresh.keys() if here.get(key) != fresh.get(key))


async def used(url: str, clock: ManualClock) -> None:
    """A turn answered and delivered, and another waiting: rows in most of the core tables, sequences moved."""
    store = await open_store(url, clock, debounce_ms=0)
    try:
        await finished_report(store)
        await store.admit(Occurrence("tg:2:1", "tg:2", "later", WorkKind.AGENT, "tg:2"))
        await store.mark_sending(1)
        await store.mark_confirmed(1, "m1")
    finally:
        await store.close()


async def test_an_emptied_database_holds_exactly_what_a_fresh_one_holds(pg_worker_database: WorkerDatabase,
                                                                        pg_fresh_url: str, clock: ManualClock):
    url = pg_worker_database.emptied()
    assert differences(url, pg_fresh_url) == []
    await used(url, clock)
    assert {"table work", "table runs", "table reports", "table deliveries",
            "table open_agent_tally", "sequence shopbot_changes", "sequence work_work_id_seq"} \
        <= set(differences(url, pg_fresh_url))
    pg_worker_database.empty()
    assert differences(url, pg_fresh_url) == []


def test_negative_control_a_planted_leftover_row_is_caught(pg_worker_database: WorkerDatabase, pg_fresh_url: str):
    url = pg_worker_database.emptied()
    with connect(url) as conn:
        conn.execute("INSERT INTO producer_marks (name, value) VALUES ('left over', 1)")
    assert differences(url, pg_fresh_url) == ["table producer_marks"]


def test_negative_control_a_missing_reference_row_and_a_moved_sequence_are_caught(pg_worker_database: WorkerDatabase,
                                                                                  pg_fresh_url: str):
    url = pg_worker_database.emptied()
    with connect(url) as conn:
        conn.execute("DELETE FROM open_agent_tally WHERE slot = 16")      # a reference row 0019 inserts
        conn.execute("SELECT nextval('shopbot_changes')")                 # a sequence no table owns
    assert differences(url, pg_fresh_url) == ["sequence shopbot_changes", "table open_agent_tally"]
    pg_worker_database.empty()
    assert differences(url, pg_fresh_url) == []


def test_a_schema_a_test_changed_is_copied_again_from_the_template(pg_worker_database: WorkerDatabase,
                                                                   pg_fresh_url: str):
    url = pg_worker_database.emptied()
    with connect(url) as conn:
        conn.execute("DROP INDEX runs_one_open_per_session")
    assert differences(url, pg_fresh_url) == ["catalog"]
    pg_worker_database.empty()
    assert differences(url, pg_fresh_url) == []


def test_a_connection_a_test_left_open_does_not_stop_the_emptying(pg_worker_database: WorkerDatabase):
    url = pg_worker_database.emptied()
    left = connect(url)
    left.execute("BEGIN")
    left.execute("LOCK TABLE work IN ACCESS SHARE MODE")     # held until its connection ends
    try:
        pg_worker_database.empty()
    finally:
        left.close()
    with connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM work").fetchone() == (0,)
