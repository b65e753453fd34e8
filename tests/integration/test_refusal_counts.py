"""Unauthenticated requests cost nothing durable (C1): refusals of bad till tokens and Telegram strangers are counted
in memory and flushed at most once a second or with the next commit. Commits are counted on the store
(`Database.commits`) and, independently, with `PRAGMA data_version` on another connection."""
from __future__ import annotations

import asyncio
import time

from producers.telegram.polling import Ingress
from store import Occurrence, SqliteStore, WorkKind
from tests.edge.test_fuzz_inputs import BOT, OWNER, owner_message
from tests.integration.test_till_api import ITEMS, till  # noqa: F401 - the fixture

STRANGER = 666


def data_version(raw) -> int:
    return raw.execute("PRAGMA data_version").fetchone()[0]


def stored(raw, kind: str) -> int:
    return raw.execute("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = ?", (kind,)).fetchone()[0]


async def until(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.02)


async def test_formerly_bug_a_flood_of_bad_till_tokens_makes_no_commit_per_request(till, store, raw):  # noqa: F811
    commits, version = store.db.commits, data_version(raw)
    bad = {"Authorization": "Bearer not-a-till-token-at-all"}
    began = time.monotonic()
    answers = await asyncio.gather(*(till.post("/till/counts", json={"request_id": f"r{i}", "counts": {"vanilla": 1}},
                                               headers=bad) for i in range(100)))
    flood_s = time.monotonic() - began
    assert {a.status_code for a in answers} == {401}
    # 100 refusals, no commit per request: at most the once-a-second flush ran during the flood (on a loaded machine
    # the 100 posts may take more than a second, so the bound follows the flood's length, never the request count)
    assert store.db.commits - commits <= int(flood_s) + 1 < 100
    assert (await store.status()).counters["till_unauthorized"] == 100     # every refusal counted, flushed or not
    await until(lambda: stored(raw, "till_unauthorized") == 100)            # flushed within about a second
    assert store.db.commits - commits <= int(time.monotonic() - began) + 1  # a commit a second at most
    assert data_version(raw) != version


async def test_counts_ride_along_with_the_next_commit(store, raw):
    store.tally("till_unauthorized", 3)
    await store.admit(Occurrence("tg:1001:1", "tg:1001", "stock", WorkKind.AGENT, "tg:1001"))
    assert stored(raw, "till_unauthorized") == 3                            # at once, with the admission
    assert store.tallies.pending() == {}


async def test_formerly_bug_telegram_strangers_make_no_commit(store, raw):
    ingress = Ingress(store, BOT, None, lambda: frozenset({OWNER}))  # type: ignore[arg-type] - nothing is sent
    commits, version = store.db.commits, data_version(raw)
    for n in range(20):
        await ingress.admit_raw([owner_message(100 + n, n, "free ice cream", chat=STRANGER, sender=STRANGER)])
    assert store.db.commits == commits and data_version(raw) == version
    await store.flush_counts()
    assert stored(raw, "stranger") == 20
    # the negative control: an owner's message is a commit as before, and takes waiting counts with it
    store.tally("stranger")
    await ingress.admit_raw([owner_message(200, 1, "stock")])
    assert store.db.commits == commits + 2 and stored(raw, "stranger") == 21


async def test_closing_the_store_flushes_what_it_counted(db_path, clock, raw):
    other = await SqliteStore.open(db_path, clock)
    other.tally("malformed", 2)
    await other.close()
    assert stored(raw, "malformed") == 2



async def test_counts_are_written_in_one_order_whatever_order_they_came_in(store):
    """Two transactions carrying the same kinds at once (PostgreSQL) must lock the `counters` rows in the same order,
    or one fails as a deadlock: the rows are written sorted by minute and kind."""
    written: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("INSERT INTO counters"):
            written.append(statement)
    await store.db.raw(lambda raw: raw.set_trace_callback(trace))
    try:
        for kind in ("till_unauthorized", "stranger", "malformed_update"):
            store.tally(kind)
        await store.admit(Occurrence("tg:1001:1", "tg:1001", "stock", WorkKind.AGENT, "tg:1001"))
    finally:
        await store.db.raw(lambda raw: raw.set_trace_callback(None))
    kinds = [next(k for k in ("till_unauthorized", "stranger", "malformed_update") if f"'{k}'" in s) for s in written]
    assert kinds == ["malformed_update", "stranger", "till_unauthorized"]
