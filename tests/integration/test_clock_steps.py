"""Clock steps (C5): a backward step of the wall clock never holds admitted work for longer than the debounce
window, a forward step claims early by at most the step, and `status` never shows a zero or negative age for an
item that waited. The injected ManualClock steps the time; the database is a real file."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest

from bot.cli.render import print_status
from store import Occurrence, SqliteStore, WorkKind
from tests.conftest import START

HOUR = 3600.0


def occ(source: str, session: str = "tg:1") -> Occurrence:
    return Occurrence(source, session, "stock", WorkKind.AGENT, session)


@pytest.fixture
async def debounced(db_path, clock):
    s = await SqliteStore.open(db_path, clock, capacity=10, debounce_ms=300)
    try:
        yield s
    finally:
        await s.close()


async def test_formerly_bug_a_backward_step_does_not_hold_admitted_work(debounced, clock):
    await debounced.admit(occ("tg:1:1"))
    clock.advance(0.1)
    clock.set(clock.now() - timedelta(hours=1))        # the wall clock steps back an hour
    assert await debounced.next_claim_time() <= clock.now()
    claim = await debounced.claim("w1")
    assert claim is not None and [i.source for i in claim.items] == ["tg:1:1"]


async def test_the_debounce_still_holds_without_a_step(debounced, clock):
    """The negative control: the same admission with a steady clock waits its 300 ms."""
    await debounced.admit(occ("tg:1:1"))
    clock.advance(0.299)
    assert await debounced.claim("w1") is None
    assert await debounced.next_claim_time() == START + timedelta(milliseconds=300)
    clock.advance(0.001)
    assert await debounced.claim("w1") is not None


async def test_work_admitted_after_a_backward_step_gets_its_normal_debounce(debounced, clock):
    clock.set(START - timedelta(hours=1))
    await debounced.admit(occ("tg:2:1", "tg:2"))
    assert await debounced.claim("w1") is None
    clock.advance(0.3)
    assert await debounced.claim("w1") is not None


async def test_a_forward_step_claims_early_by_at_most_the_step(debounced, clock):
    await debounced.admit(occ("tg:1:1"))
    clock.advance(0.1)                                  # a forward step of 0.1 s, right after the admission
    assert await debounced.claim("w1") is None          # still 0.2 s of real waiting left
    clock.advance(0.199)
    assert await debounced.claim("w1") is None
    clock.advance(0.001)
    assert await debounced.claim("w1") is not None      # claimed 0.2 s after admission: 0.1 s early, the step


async def test_formerly_bug_a_backward_step_does_not_stretch_a_back_off(store, clock):
    await store.admit(occ("tg:1:1"))
    claim = await store.claim("w1")
    await store.release(claim, delay_seconds=60, reason="model unavailable")
    clock.advance(30)
    assert await store.claim("w1") is None              # the negative control: the back-off holds
    clock.set(clock.now() - timedelta(hours=1))
    assert await store.next_claim_time() <= clock.now()
    assert await store.claim("w1") is not None         # not 60 s + an hour later


async def test_formerly_bug_status_never_shows_a_zero_or_negative_age_after_a_backward_step(debounced, clock):
    await debounced.admit(occ("tg:1:1"))
    clock.advance(5)
    status = await debounced.status()
    assert status.oldest_pending_seconds == 5.0 and status.oldest_pending_ahead_seconds is None
    clock.set(clock.now() - timedelta(hours=1))
    status = await debounced.status()
    assert status.oldest_pending_seconds is None
    assert status.oldest_pending_ahead_seconds == HOUR - 5
    out = io.StringIO()
    print_status(status, out)
    assert "oldest pending: unknown (admitted 3595.0 s ahead of this clock: the wall clock stepped back" \
        in out.getvalue()
