"""store.bulk: bulk-loaded history goes through the real triggers and passes every invariant."""
from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from store import IllegalTransition, Occurrence, ReportDraft
from store.sqlite.bulk import load_history, load_into
from store.sqlite.invariants import check

HISTORY = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("deliveries", ["confirmed", "pending", "none"])
async def test_bulk_history_passes_the_invariants(store, db_path, raw, deliveries):
    loaded = await load_into(store, 250, start=HISTORY, chats=(7, 8, 9), deliveries=deliveries, batch=100)
    assert (loaded.first_work_id, loaded.last_work_id, loaded.items) == (1, 250, 250)
    assert check(db_path) == []
    assert [tuple(r) for r in raw.execute("SELECT state, count(*) FROM work GROUP BY state")] == [("finished", 250)]
    assert raw.execute("SELECT count(*) FROM reports r JOIN report_items i USING (report_id) "
                       "WHERE i.work_id = r.anchor AND r.report_id = 'r' || r.anchor || '.1'").fetchone()[0] == 250
    assert raw.execute("SELECT count(*) FROM runs "
                       "WHERE outcome = 'finished' AND ended_at IS NOT NULL").fetchone()[0] == 250
    states = {r[0]: r[1] for r in raw.execute("SELECT state, count(*) FROM deliveries GROUP BY state")}
    assert states == ({} if deliveries == "none" else {deliveries: 250})
    assert loaded.deliveries == (0 if deliveries == "none" else 250)
    # the product keeps working on top of the history: ids continue, claim and finish as usual
    assert (await store.admit(Occurrence("tg:7:999999", "tg:7", "stock", destination="tg:7"))).work_id == 251
    claim = await store.claim("w1")
    assert claim is not None and [item.work_id for item in claim.items] == [251]
    await store.finish(claim, ReportDraft("ok", destination="tg:7"))
    assert check(db_path) == []


async def test_bulk_loader_moves_are_the_triggers_moves(store, db_path):
    """A trigger that refuses a move also refuses the loader: nothing of the batch is left behind."""
    await store.db.raw(lambda conn: conn.execute(
        "CREATE TRIGGER test_refuse_finish BEFORE UPDATE OF state ON work WHEN NEW.state = 'finished' "
        "BEGIN SELECT RAISE(ABORT, 'C4: refused by the test'); END"))
    with pytest.raises(IllegalTransition, match="refused by the test"):
        await load_into(store, 10, start=HISTORY)
    conn = sqlite3.connect(str(db_path))
    try:
        assert conn.execute("SELECT count(*) FROM work").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    finally:
        conn.close()


def test_bulk_loader_refuses_an_open_transaction(tmp_path):
    conn = sqlite3.connect(str(tmp_path / "x.db"), isolation_level=None)
    try:
        conn.execute("CREATE TABLE work (work_id INTEGER PRIMARY KEY)")
        conn.execute("BEGIN")
        with pytest.raises(ValueError, match="outside"):
            load_history(conn, 1, start=HISTORY)
    finally:
        conn.close()
