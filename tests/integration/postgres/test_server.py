"""The PostgreSQL server as the store sees it: an unreachable one is StoreUnavailable (never showing the password),
and its clock is the store's: with the system clock the store stamps times from the database server's clock, so
processes whose own clocks disagree still agree on admission, debounce and not-before (C5's one clock)."""
from __future__ import annotations

from datetime import datetime, timedelta

from store import Occurrence, SystemClock, WorkKind, open_store


class SkewedClock(SystemClock):
    """A machine whose clock runs ten minutes fast."""

    def now(self) -> datetime:
        return super().now() + timedelta(minutes=10)


async def test_a_process_with_a_fast_clock_stamps_the_database_time(pg_url):
    store = await open_store(pg_url, SkewedClock(), debounce_ms=0)
    try:
        await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
        server = await store.database_now()
        rows = await store.db.read(lambda conn: conn.execute("SELECT admitted_at FROM work").fetchall())
        assert abs(rows[0][0] - server) < timedelta(seconds=2)
        assert abs(SkewedClock().now() - server) > timedelta(minutes=9)       # the process's own clock is off
        assert await store.claim("w") is not None                          # and debounce is judged on one clock
    finally:
        await store.close()


async def test_an_unreachable_server_is_store_unavailable_without_the_password():
    import pytest

    from store import StoreUnavailable
    with pytest.raises(StoreUnavailable) as caught:
        await open_store("postgresql://shop:s3cret@127.0.0.1:1/shop", SystemClock())
    assert "127.0.0.1" in str(caught.value) and "s3cret" not in str(caught.value)


async def test_a_wake_up_time_is_given_on_the_process_clock(pg_url):
    store = await open_store(pg_url, SkewedClock(), debounce_ms=60_000)
    try:
        await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
        due = await store.next_claim_time()
        assert due is not None
        assert abs((due - SkewedClock().now()) - timedelta(seconds=60)) < timedelta(seconds=2)   # a minute to wait
    finally:
        await store.close()
