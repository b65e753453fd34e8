"""The claim walks its index in its own order and stops at the first due anchor (migration 0023), on SQLite's real
planner: no sort of every pending item (at 1,000 pending the claim's sort and scan cost 556 µs of CPU,
bench.throughput); the worker's wake-up reads and the oldest pending item read pending work through partial indexes,
never the history. The plans are read with EXPLAIN QUERY PLAN on the statements the store runs."""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from store import ManualClock, Occurrence, SqliteStore, WorkKind
from store.shared import inbox
from store.shared.status import OLDEST_PENDING
from store.sqlite.connection import SqliteConnection, numbered
from tests.conftest import START

# the one access each statement may make to `work` as its outer loop: (first words of the statement, plan line)
EXPECTED = {
    "SELECT w.session, w.work_id": "SCAN w USING INDEX work_claimable",
    "UPDATE work SET state = 'running'": "SEARCH work USING INDEX work_open (session=?)",
    "SELECT w.admitted_at, w.not_before": "SCAN w USING INDEX work_claimable",
    "SELECT min(w.admitted_at)": "SCAN w USING INDEX work_claimable",
    "SELECT min(admitted_at) FROM work": "SEARCH work USING INDEX work_open",
}


class Recording(SqliteConnection):
    """The store's own connection, noting each statement it runs."""

    __slots__ = ("seen",)

    def __init__(self, raw: sqlite3.Connection) -> None:
        super().__init__(raw)
        self.seen: list[tuple[str, Sequence[Any]]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        self.seen.append((sql, params))
        return super().execute(sql, params)


def faults(raw: sqlite3.Connection, statements: list[tuple[str, Sequence[Any]]]) -> list[str]:
    """Each claim or wake-up statement whose plan sorts, or reads `work` otherwise than EXPECTED says."""
    found = []
    for sql, params in statements:
        text = " ".join(sql.split())
        want = next((line for start, line in EXPECTED.items() if text.startswith(start)), None)
        if want is None:
            continue
        plan = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + sql, numbered(params))]
        if not plan or not plan[0].startswith(want) or any("TEMP B-TREE" in line for line in plan):
            found.append(f"{text[:60]}...: {plan}")
    return found


async def claim_and_wake_plans(path: Path, drop_indexes: bool = False) -> tuple[list[str], int]:
    """Open a store with waiting work of every kind the claim passes over, run a claim and the next-claim-time read
    through a recording connection (rolled back), and return the plan faults and the statements checked."""
    store = await SqliteStore.open(path, ManualClock(START), capacity=100, debounce_ms=0)
    try:
        await store.admit_many([Occurrence(f"tg:{n}:1", f"tg:{n}", "q", WorkKind.AGENT, f"tg:{n}") for n in range(20)]
                               + [Occurrence(f"stock:{n}:1", f"stock:{n}", "c", WorkKind.AGENT, "tg:1")
                                  for n in range(20)])
        claim = await store.claim("w1")
        assert claim is not None
        await store.release(claim, delay_seconds=60, reason="model unavailable")
        if drop_indexes:          # the negative control: the schema before migration 0023
            await store.db.raw(lambda raw: raw.executescript(
                "DROP INDEX work_claimable; CREATE INDEX work_pending ON work (work_id) WHERE state = 'pending';"))
        now = store.now()

        def look(raw: sqlite3.Connection) -> list[tuple[str, Sequence[Any]]]:
            conn = Recording(raw)
            raw.execute("BEGIN IMMEDIATE")
            try:
                assert inbox.claim(conn, "w1", "run-x", now, now, ["tg:5"]) is not None
                inbox.waiting_sessions(conn)
                conn.execute(OLDEST_PENDING)
            finally:
                raw.execute("ROLLBACK")
            return conn.seen
        statements = await store.db.raw(look)
        checked = sum(any(" ".join(s.split()).startswith(k) for k in EXPECTED) for s, _ in statements)
        return await store.db.raw(lambda raw: faults(raw, statements)), checked
    finally:
        await store.close()


async def test_the_claim_and_the_wake_up_walk_their_indexes_without_sorting(tmp_path: Path):
    found, checked = await claim_and_wake_plans(tmp_path / "plans.sqlite3")
    assert checked == 5                  # the claim's read and move, the two wake-up reads, the oldest pending item
    assert found == []


async def test_without_migration_0023s_indexes_the_check_finds_the_sorting_scan(tmp_path: Path):
    """The negative control: the same statements on the schema before 0023 (work_pending, no work_claimable) sort
    every pending item."""
    found, _ = await claim_and_wake_plans(tmp_path / "plans.sqlite3", drop_indexes=True)
    assert any("TEMP B-TREE" in fault for fault in found)
    assert len(found) == 4               # all but the move (work_open either way) read work_pending
