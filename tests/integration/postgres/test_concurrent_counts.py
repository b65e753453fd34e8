"""The refusal counts held in memory (store/shared/tallies.py) ride along with whichever commit writes next. On
PostgreSQL several transactions run at once, each in its own thread, so one transaction's end must settle only the
counts it carried. Before each thread kept its own share, a failed write beside a commit that carried counts made
them count twice, and a commit beside a failed one that carried counts lost them.

Each test holds one transaction (thread "carrier") after it wrote the counts and before its COMMIT, and ends another
beside it through the store's own `run_write`."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from store import StoreError


class Held:
    """The store's commit hooks, unchanged except that the transaction of the thread named "carrier" waits until
    `go` is set: after writing the counts, before its COMMIT (`before_commit`), or after its COMMIT returned, before
    its share is settled (`committed`)."""

    def __init__(self, hooks: Any, at: str = "before_commit") -> None:
        self.hooks, self.at = hooks, at
        self.held, self.go = threading.Event(), threading.Event()

    def _wait(self, step: str) -> None:
        if step == self.at and threading.current_thread().name == "carrier":
            self.held.set()
            assert self.go.wait(10)

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def before_commit(self, conn: Any) -> None:
        self.hooks.before_commit(conn)
        self._wait("before_commit")

    def committed(self) -> None:
        self._wait("committed")
        self.hooks.committed()

    def rolled_back(self) -> None:
        self.hooks.rolled_back()


def carrier(pg, body=lambda conn: None) -> tuple[threading.Thread, list[Any]]:  # type: ignore[no-untyped-def]
    """A transaction that carries the counts held now, stopped before its COMMIT; its end goes in the list."""
    ended: list[Any] = []

    def run() -> None:
        try:
            pg.db.run_write(body)
            ended.append("committed")
        except BaseException as exc:        # what ended it is the result
            ended.append(exc)
    thread = threading.Thread(target=run, name="carrier", daemon=True)
    thread.start()
    assert pg.db.hooks.held.wait(10)
    return thread, ended


def refused_at_commit(conn) -> None:  # type: ignore[no-untyped-def]
    """A transaction whose COMMIT the server refuses with an answer (a deferred foreign key): certainly not
    committed, unlike a connection lost at COMMIT (K16: taken as committed)."""
    conn.execute("CREATE TEMP TABLE target (id int PRIMARY KEY) ON COMMIT DROP")
    conn.execute("CREATE TEMP TABLE refused (id int REFERENCES target (id) DEFERRABLE INITIALLY DEFERRED) "
                 "ON COMMIT DROP")
    conn.execute("INSERT INTO refused VALUES (1)")


async def stored(pg, kind: str) -> int:  # type: ignore[no-untyped-def]
    """The count stored, read (a write would carry whatever counts are held)."""
    return await pg.db.read(lambda conn: conn.execute(
        "SELECT coalesce(sum(count), 0) FROM counters WHERE kind = $1", (kind,)).fetchone()[0])


@pytest.fixture(params=["before_commit"])
def held(pg, request):  # type: ignore[no-untyped-def]
    pg.db.hooks = Held(pg.db.hooks, request.param)
    try:
        yield pg
    finally:
        pg.db.hooks.go.set()
        pg.db.hooks = pg.db.hooks.hooks


async def test_formerly_bug_a_failed_write_beside_a_commit_carrying_counts_does_not_count_them_twice(held):
    pg = held
    pg.tally("till_unauthorized", 5)
    thread, ended = carrier(pg)

    def refused(conn) -> None:  # type: ignore[no-untyped-def]
        raise ValueError("a write that fails")
    with pytest.raises(ValueError):
        pg.db.run_write(refused)
    pg.db.hooks.go.set()
    thread.join(10)
    assert ended == ["committed"]
    await pg.flush_counts()
    assert await stored(pg, "till_unauthorized") == 5
    assert pg.tallies.pending() == {}


async def test_formerly_bug_a_commit_beside_a_failed_one_carrying_counts_does_not_lose_them(held):
    pg = held

    pg.tally("till_unauthorized", 5)
    thread, ended = carrier(pg, refused_at_commit)
    pg.tally("telegram_stranger", 3)
    pg.db.run_write(lambda conn: None)                  # commits the 3, while the 5 are in the carrier's transaction
    assert await stored(pg, "telegram_stranger") == 3
    pg.db.hooks.go.set()
    thread.join(10)
    assert len(ended) == 1 and isinstance(ended[0], StoreError)
    assert pg.tallies.pending() == {"till_unauthorized": 5}    # held again, not lost
    await pg.flush_counts()
    assert await stored(pg, "till_unauthorized") == 5
    assert await stored(pg, "telegram_stranger") == 3


async def test_formerly_bug_counts_written_by_a_function_itself_are_settled_with_its_commit(pg):
    """`flush_counts` hands the hooks its own connection. When the counts it found were taken by another commit
    before its BEGIN, and new ones came before its function ran, its write was not hooked: what it wrote stayed in
    flight for ever (status counted it again, and a later rollback in that thread would have held it again)."""
    def counts_itself(conn) -> None:  # type: ignore[no-untyped-def]
        pg.tally("till_unauthorized", 2)              # held after BEGIN, as a refusal counted meanwhile
        pg.db.hooks.before_commit(conn)
    assert not pg.tallies                               # none held at BEGIN
    pg.db.run_write(counts_itself)
    assert await stored(pg, "till_unauthorized") == 2
    assert pg.tallies.pending() == {}
    assert (await pg.status()).counters["till_unauthorized"] == 2


@pytest.mark.parametrize("held", ["committed"], indirect=True)
async def test_a_status_read_beside_a_commit_that_carried_counts_is_taken_again(held):
    """A commit that carried counts has returned but not yet dropped them from memory: a read of the stored counts
    now sees them stored AND in memory. Such a read cannot tell, so `status` reads again once the commit settled."""
    pg = held
    pg.tally("till_unauthorized", 5)
    thread, ended = carrier(pg)
    assert await stored(pg, "till_unauthorized") == 5                       # committed
    assert pg.tallies.pending() == {"till_unauthorized": 5}           # and still in flight in memory
    assert pg.tallies.pending_since(pg.tallies.mark()) is None        # so a read now is taken again
    status = asyncio.create_task(pg.status())
    pg.db.hooks.go.set()
    assert (await asyncio.wait_for(status, 10)).counters["till_unauthorized"] == 5
    thread.join(10)
    assert ended == ["committed"]


async def test_a_commit_that_carried_counts_after_the_mark_makes_the_read_be_taken_again(pg):
    """Between the mark and the in-memory counts, a commit stored the counts and dropped them from memory: a read
    of the stored counts taken before that commit would have neither."""
    pg.tally("till_unauthorized", 4)
    mark = pg.tallies.mark()
    pg.db.run_write(lambda conn: None)                                # carries and stores the 4
    assert pg.tallies.pending() == {}
    assert pg.tallies.pending_since(mark) is None
    assert pg.tallies.pending_since(pg.tallies.mark()) == {}


async def test_counts_held_again_after_a_rollback_are_flushed_without_another_write(held):
    """A flush that runs while another transaction carries the counts finds none held and arms no other; when that
    transaction then rolls back, its counts are held again and must still be written within a second or so, not only
    when some later write happens to carry them."""
    pg = held

    pg.tally("till_unauthorized", 5)
    thread, ended = carrier(pg, refused_at_commit)
    assert await pg.flush_counts() == 0                 # as the timer's flush would: nothing held now
    if pg._flush is not None:                           # the timer armed by the tally: out of the way
        pg._flush.cancel()
        pg._flush = None
    pg.db.hooks.go.set()
    thread.join(10)
    assert len(ended) == 1 and isinstance(ended[0], StoreError)
    deadline = time.monotonic() + 10
    while await stored(pg, "till_unauthorized") != 5:   # no write of the test's carries them: the flush does
        assert time.monotonic() < deadline, "the counts held again were never flushed"
        await asyncio.sleep(0.05)
