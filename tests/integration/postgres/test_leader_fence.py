"""PostgreSQL: the leader fence takes the lease row FOR SHARE inside the singleton's own transaction, so a takeover
waits until that transaction has committed; a fenced write and a takeover never interleave (C16). The negative
control reads the lease without the lock: then the takeover commits while the stale write is still open."""
from __future__ import annotations

import threading
import time
import uuid

import psycopg

from store import Fence
from store.postgres import leadership
from store.postgres.connection import PgConnection, PgCursor, configure

LEASE = 0.3


def connect(url: str) -> PgConnection:
    raw = psycopg.connect(url, autocommit=True, cursor_factory=PgCursor)
    configure(raw)
    return PgConnection(raw)


def wait_expired(conn: PgConnection, name: str) -> None:
    deadline = time.monotonic() + 10
    while not conn.execute("SELECT expires_at <= clock_timestamp() FROM leader_leases WHERE name = $1",
                           (name,)).fetchone()[0]:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def takeover_while_a_fenced_transaction_is_open(url: str, lock: bool) -> tuple[list[str], int | None]:
    """The holder checks its lease (with or without the row lock), the lease expires, another process tries to take
    it over; the holder then commits. Returns the order of events and the taker's generation."""
    holder, taker = uuid.uuid4().hex, uuid.uuid4().hex
    first, second, watcher = connect(url), connect(url), connect(url)
    events: list[str] = []
    try:
        assert leadership.acquire(first, "producers", holder, LEASE) == 1
        first.execute("BEGIN")
        if lock:
            leadership.fence(first, Fence("producers", holder, 1))
        else:
            assert first.execute("SELECT 1 FROM leader_leases WHERE name = 'producers' AND holder = $1 "
                                 "AND expires_at > clock_timestamp()", (holder,)).fetchone()
        first.execute("INSERT INTO counters (minute, kind, count) VALUES ('2027-03-01T09:00', 'fenced', 1)")
        wait_expired(second, "producers")
        got: list[int | None] = []
        thread = threading.Thread(target=lambda: (got.append(leadership.acquire(second, "producers", taker, 30)),
                                                  events.append("takeover committed")))
        thread.start()
        pid = second.raw.info.backend_pid
        deadline = time.monotonic() + 10
        while not events:                       # until the takeover committed, or is seen waiting for the row lock
            waiting = watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1",
                                      (pid,)).fetchone()
            if waiting and waiting[0] == "Lock":
                break
            assert time.monotonic() < deadline
            time.sleep(0.01)
        events.append("fenced write committed")
        first.execute("COMMIT")
        thread.join(10)
        return events, got[0]
    finally:
        for conn in (first, second, watcher):
            conn.raw.close()


def test_a_takeover_waits_for_the_fenced_transaction_to_commit(pg_url):
    events, generation = takeover_while_a_fenced_transaction_is_open(pg_url, lock=True)
    assert events == ["fenced write committed", "takeover committed"] and generation == 2


def test_negative_control_without_the_row_lock_the_takeover_commits_inside_the_stale_write(pg_url):
    events, generation = takeover_while_a_fenced_transaction_is_open(pg_url, lock=False)
    assert events == ["takeover committed", "fenced write committed"] and generation == 2
