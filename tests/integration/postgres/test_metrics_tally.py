"""/metrics and the operator page keep counts of ended rows between reads (store/shared/metrics.py `tallied`) and
count only the rows above them. On PostgreSQL an id is drawn at INSERT and several transactions commit at once, so a
row can commit after one with a higher id was already seen. Before the tally stopped at the highest settled id
(DialectSQL.settled), such a row fell below the kept counts and was never counted."""
from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from store import Occurrence, WorkKind
from store.postgres.connection import configure


@pytest.fixture
def open_insert(pg_url: str) -> Iterator[psycopg.Connection]:  # type: ignore[type-arg]
    """A transaction that has inserted a work row (its id drawn) and not committed, as a finish or an admission in
    another thread or process would be."""
    raw = psycopg.connect(pg_url, autocommit=True, cursor_factory=psycopg.ClientCursor)
    configure(raw)
    raw.execute("BEGIN")
    raw.execute("INSERT INTO work (source, session, kind, payload, destination, admitted_at) "
                "VALUES ('notice:test:1', 'notice:test', 'notice', 'a notice', NULL, '2027-03-01T09:00:00Z')")
    try:
        yield raw
    finally:
        raw.close()


async def work_rows(pg, tallies, view: str) -> int:  # type: ignore[no-untyped-def]
    if view == "metrics":
        return sum((await pg.metrics(tallies=tallies)).work.values())
    work = (await pg.ops_view(tallies)).work
    return work.pending + work.running + work.finished + work.failed


@pytest.mark.parametrize("view", ["metrics", "ops_view"])
async def test_formerly_bug_a_row_committed_after_a_higher_id_was_seen_is_still_counted(pg, open_insert, view):
    tallies: dict = {}
    await pg.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))   # a higher id, committed first
    assert await work_rows(pg, tallies, view) == 1
    open_insert.execute("COMMIT")
    assert await work_rows(pg, tallies, view) == 2
    assert await work_rows(pg, {}, view) == 2                                          # as counted afresh


async def test_the_tally_advances_once_no_transaction_writes_the_table(pg):
    tallies: dict = {}
    await pg.notice("test", "1", "done", "tg:1")                 # ended at once: a notice and its report
    await pg.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))     # open
    await pg.metrics(tallies=tallies)
    settled = await pg._settled_ids()
    assert settled is not None and settled["work"] == 2
    assert tallies["work"].upto == 1       # just below the open item: the ended notice is kept, not read again
