"""K16 with a real `shopbot run` on a real PostgreSQL, behind a fake network edge (tests/support/pg_proxy.py) that
loses the connection right after forwarding a COMMIT (the commit happened, its answer never arrived) or right
before (it did not): the PostgreSQL store reads the outcome back from the records on a fresh connection and never
guesses. Audited from outside: one report per turn, one run finished, no second model call, the reply sent once.
A relay's look of several parts (issue 31) is driven at the store's port through the same proxy: the look is read
back whole.

The finish: the process pauses itself before the finish commit (SHOPBOT_FAULT=K6:stop), the proxy is armed for
the next COMMIT of a transaction that ends a run `finished`, then SIGCONT. The `sending` mark: the proxy is armed
for the next COMMIT of a transaction that marks a delivery sending (no pause needed: nothing else runs that SQL).
"""
from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psycopg
import pytest

from bot.sandbox.bot_api import LocalBotApi
from store import CommitUnknown, Occurrence, ReportDraft, SystemClock, WorkKind
from store.postgres.store import PostgresStore
from tests.support.audit import audit
from tests.support.pg_proxy import PgProxy
from tests.support.proc import OWNER, Product

TOKEN = "777:k16-token"
FINISH_COMMIT = r"UPDATE work SET state = 'finished'"     # the finish's own statement (C6)
SENDING_COMMIT = r"UPDATE deliveries SET attempts = attempts \+ 1"


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


@pytest.fixture
async def proxy():
    async with PgProxy() as edge:
        yield edge


def owner_texts(api) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.text for m in api.sent if m.chat_id == OWNER]


def query(url: str, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    with psycopg.connect(url) as conn:             # straight to the server, not through the proxy
        return [tuple(r) for r in conn.execute(sql).fetchall()]


async def wait_stopped(pid: int, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "T":
        assert loop.time() < deadline, "the process never stopped at its fault point"
        await asyncio.sleep(0.01)


async def answered_once(product: Product, api, pg_fresh_url: str) -> str:  # type: ignore[no-untyped-def]
    await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=20)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while query(pg_fresh_url, "SELECT state FROM deliveries") != [("confirmed",)]:
        assert loop.time() < deadline, query(pg_fresh_url, "SELECT state FROM deliveries")
        await asyncio.sleep(0.05)
    assert await product.stop() == 0
    log = product.log.read_text()
    result = audit(pg_fresh_url, [m.text for m in api.sent], owner_messages=1)
    assert result.ok, result.violations
    assert len(owner_texts(api)) == 1 and "vanilla on hand: 9 tubs" in owner_texts(api)[0]
    assert query(pg_fresh_url, "SELECT state, attempts FROM work") == [("finished", 1)]      # one model run, no retry
    assert query(pg_fresh_url, "SELECT outcome FROM runs") == [("finished",)]
    assert query(pg_fresh_url, "SELECT count(*) FROM reports") == [(1,)]
    return log


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("when,verdict", [("after", "done"), ("before", "again")])
async def test_a_finish_whose_commit_answer_is_lost_is_read_back_not_guessed(tmp_path, api, proxy, pg_fresh_url, when,
                                                                            verdict):
    product = Product(tmp_path, api, proxy.url(pg_fresh_url), SHOPBOT_FAULT="K6:stop")
    api.post_message(OWNER, OWNER, "how much vanilla")
    proc = await product.start()
    try:
        await wait_stopped(proc.pid)
        proxy.arm(FINISH_COMMIT, when)
        os.kill(proc.pid, signal.SIGCONT)
        await asyncio.wait_for(proxy.dropped.wait(), 20)
        log = await answered_once(product, api, pg_fresh_url)
    finally:
        await product.kill()
    assert [w for w, _ in proxy.drops] == [when]
    assert "commit outcome unknown for the finish of run" in log
    assert f"read back: {verdict}" in log


@pytest.mark.parametrize("when,verdict", [("after", "done"), ("before", "again")])
async def test_a_sending_mark_whose_commit_answer_is_lost_is_read_back_and_sent_once(tmp_path, api, proxy, pg_fresh_url,
                                                                                    when, verdict):
    product = Product(tmp_path, api, proxy.url(pg_fresh_url))
    proxy.arm(SENDING_COMMIT, when)
    api.post_message(OWNER, OWNER, "how much vanilla")
    await product.start()
    try:
        await asyncio.wait_for(proxy.dropped.wait(), 20)
        log = await answered_once(product, api, pg_fresh_url)
    finally:
        await product.kill()
    assert "commit outcome unknown for the sending mark of delivery" in log
    assert f"read back: {verdict}" in log
    assert query(pg_fresh_url, "SELECT attempts FROM deliveries") == [(1,)]     # marked sending once, sent once


@pytest.mark.parametrize("when,verdict", [("after", "done"), ("before", "again")])
async def test_a_look_of_two_parts_whose_commit_answer_is_lost_is_read_back_whole(proxy, pg_fresh_url, when, verdict,
                                                                                  caplog):
    """One look marks two parts of two chats `sending` in one transaction; its COMMIT's answer is lost. Committed
    (`after`): both parts are read back as the look's, by its time and sender. Not committed (`before`): the look runs
    again. Either way the relay gets both parts, each marked `sending` once."""
    store = await PostgresStore.open(proxy.url(pg_fresh_url), SystemClock(), capacity=10, debounce_ms=0)
    try:
        for chat in (5101, 5102):
            await store.admit(Occurrence(f"tg:{chat}:1", f"tg:{chat}", "stock", WorkKind.AGENT, f"tg:{chat}"))
            claim = await store.claim("w1")
            assert claim is not None
            await store.finish(claim, ReportDraft(f"to {chat}", destination=f"tg:{chat}"))
        proxy.arm(SENDING_COMMIT, when)
        with caplog.at_level("INFO", logger="shopbot"):
            taken = await store.take_due(limit=2)
    finally:
        await store.close()
    assert [w for w, _ in proxy.drops] == [when]
    assert sorted(d.chat_id for d in taken.deliveries) == [5101, 5102]
    assert query(pg_fresh_url, "SELECT state, attempts FROM deliveries") == [("sending", 1), ("sending", 1)]
    assert f"read back: {verdict}" in caplog.text


async def test_counts_whose_commit_answer_is_lost_after_it_committed_are_not_written_twice(proxy, pg_fresh_url):
    """The refusal counts carried by a commit whose answer was lost (K16): nobody can read them back, so they are
    taken as stored, never held again to be written a second time (C1: a lost commit may lose the last second of
    counts, as a crash may, but a count never counts twice). Before, the lost commit held them again: 10 of 5."""
    store = await PostgresStore.open(proxy.url(pg_fresh_url), SystemClock(), capacity=10, debounce_ms=0)
    try:
        store.tally("till_unauthorized", 5)
        proxy.arm(r"INSERT INTO counters", "after")
        with pytest.raises(CommitUnknown):
            await store.flush_counts()
        assert store.tallies.pending() == {}
        await store.flush_counts()
    finally:
        await store.close()
    assert [w for w, _ in proxy.drops] == ["after"]
    assert query(pg_fresh_url, "SELECT sum(count) FROM counters WHERE kind = 'till_unauthorized'") == [(5,)]
