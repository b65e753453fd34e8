"""An idle worker's claim in the next admission's commit (`Inbox.offer_claim`, store/offers.py), on every store.

The claim rides in the admission's own transaction (one commit), is resolved only after that COMMIT returned (C5),
never fails or rolls back the admission, is rolled back with an admission that rolls back, claims nothing that is not
due (a debounce window, the session's turn running), and a withdrawal racing an admission hands the claim over."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import (
    Admission,
    ClaimOffer,
    ItemSpec,
    ManualClock,
    Occurrence,
    OfferState,
    Renewal,
    ReportDraft,
    Store,
    WorkKind,
)

from .conftest import opened

ITEMS = [ItemSpec("vanilla", "tubs", 2, 8, 12, 300)]


def occ(source: str, text: str = "how much vanilla") -> Occurrence:
    session = ":".join(source.split(":")[:2])
    return Occurrence(source, session, text, WorkKind.AGENT, session)


def count_writes(store: Store) -> list[int]:
    """Every write transaction of `store` from now on, counted (the test's view of its commits)."""
    db: Any = store.db
    write = db.write
    counted = [0]

    async def counting(fn: Callable[..., Any], *args: Any) -> Any:
        counted[0] += 1
        return await write(fn, *args)
    db.write = counting
    return counted


async def held(offer: ClaimOffer) -> None:
    """Until an admission's transaction carries `offer` (the admission is in flight), with a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while offer.state is OfferState.OPEN and loop.time() < deadline:
        await asyncio.sleep(0)
    assert offer.state is OfferState.HELD


class FailingCommit:
    """Commit hooks that fail the transaction after its function (and so after the rider) ran: the admission rolls
    back. What the store's own hooks would do is done first."""

    def __init__(self, hooks: Any, seen: Callable[[], None]) -> None:
        self.hooks, self.seen = hooks, seen

    def __bool__(self) -> bool:
        return True

    def before_commit(self, conn: Any) -> None:
        self.seen()
        raise RuntimeError("planted: the commit fails after the rider claimed")

    def committed(self) -> None:
        self.hooks.committed()

    def rolled_back(self) -> None:
        self.hooks.rolled_back()


async def test_an_offered_claim_rides_in_the_admissions_commit(store: Store, kind: str):
    """One transaction admits and claims: the claim is the worker's, running, with its set-up (history, shop) read
    in that transaction, an ordinary claim (its lease is renewed; it finishes). Without an offer an admission only
    admits."""
    await store.seed_shop(ITEMS, "test")
    offer = store.offer_claim("w1", history_limit=20)
    writes = count_writes(store)
    commits = getattr(store.db, "commits", None)          # SQLite counts its durable commits
    accepted = await store.admit(occ("tg:1:1"))
    assert accepted.outcome is Admission.ACCEPTED
    assert writes[0] == 1 and offer.taken.done() and offer.state is OfferState.TAKEN
    if commits is not None:
        assert store.db.commits == commits + 1
    claim = offer.taken.result()
    assert claim.worker_id == "w1" and [i.work_id for i in claim.items] == [accepted.work_id]
    assert claim.setup is not None and [i.item for i in claim.setup.shop_items] == ["vanilla"]
    assert (await store.status()).work.running == 1
    assert await offer.withdraw() == claim                    # the claim stays the worker's once taken
    # no offer: the next admission only admits
    other = await store.admit(occ("tg:2:1"))
    assert writes[0] == 2 and (await store.status()).work.pending == 1
    assert await store.renew(claim) is Renewal.HELD            # an ordinary claim: a lease where claims are leases
    outcome = await store.finish(claim, ReportDraft("done", destination=claim.destination))
    assert outcome.report_id
    claimed = await store.claim_or_wake("w1")
    assert claimed.claim is not None and [i.work_id for i in claimed.claim.items] == [other.work_id]


async def test_a_producers_transaction_carries_the_claim_and_a_batch_takes_one_offer(store: Store):
    """`atomic` (a producer's admission with its cursor) carries it too, and claims what `claim_or_wake` would (the
    oldest due session first); a transaction admitting nothing for the agent leaves the offer open though work
    waits; one admission takes one offer, the other sessions wait for the wake-up."""
    await store.admit(occ("tg:1:1"))                           # waiting before any offer
    first, second = store.offer_claim("w1"), store.offer_claim("w2")
    await store.atomic(lambda tx: tx.count("nothing admitted"))
    assert first.state is OfferState.OPEN and second.state is OfferState.OPEN
    await store.atomic(lambda tx: tx.admit(occ("tg:2:1")))
    assert first.taken.done() and first.taken.result().session == "tg:1"
    assert second.state is OfferState.OPEN
    await store.admit_many([occ("tg:2:1"), occ("tg:3:1")])    # a repeat and a new one (the queue holds 3)
    assert second.taken.done() and second.taken.result().session == "tg:2"
    status = await store.status()
    assert status.work.running == 2 and status.work.pending == 1


async def test_a_failing_claim_leaves_the_admission_committed_and_the_offer_open(store: Store,
                                                                                caplog: pytest.LogCaptureFixture):
    """Planted: an offer under no worker id, whose claim's move to running the C5 trigger refuses. The claim rolls
    back to its savepoint; the admission commits; the offer stays open, and the ordinary claim takes the work."""
    offer = store.offer_claim(None)  # type: ignore[arg-type] - planted: C5's trigger refuses a claim without a worker
    accepted = await store.admit(occ("tg:1:1"))
    assert accepted.outcome is Admission.ACCEPTED
    assert not offer.taken.done() and offer.state is OfferState.OPEN
    assert (await store.status()).work.pending == 1
    assert "admission's claim" in caplog.text
    assert await offer.withdraw() is None
    claimed = await store.claim_or_wake("w1")
    assert claimed.claim is not None and claimed.claim.items[0].work_id == accepted.work_id


async def test_an_admission_that_rolls_back_rolls_its_claim_back_and_the_offer_stays_open(store: Store):
    """The commit fails after the rider claimed (planted in the commit hooks): nothing is admitted or claimed, the
    offer was not resolved before the COMMIT (nor after it failed), and the next admission takes it."""
    offer = store.offer_claim("w1")
    db: Any = store.db
    hooks = db.hooks
    before_commit: list[bool] = []
    db.hooks = FailingCommit(hooks, lambda: before_commit.append(offer.taken.done()))
    with pytest.raises(Exception, match="planted"):
        await store.admit(occ("tg:1:1"))
    db.hooks = hooks
    assert before_commit == [False]
    assert not offer.taken.done() and offer.state is OfferState.OPEN
    status = await store.status()
    assert status.work.pending == 0 and status.work.running == 0
    with pytest.raises(ValueError):                            # a producer's transaction that raises
        await store.atomic(lambda tx: (tx.admit(occ("tg:1:2")), int("not a number")))
    assert offer.state is OfferState.OPEN
    accepted = await store.admit(occ("tg:1:3"))
    assert offer.taken.done() and offer.taken.result().items[0].work_id == accepted.work_id


async def test_nothing_due_claims_nothing_a_running_session(store: Store):
    """The session's turn running: its new message is not claimable (its turn holds it), so the offer stays open
    and takes the next session's message."""
    await store.admit(occ("tg:1:1"))
    running = await store.claim("w1")
    assert running is not None
    offer = store.offer_claim("w2")
    await store.admit(occ("tg:1:2"))
    assert offer.state is OfferState.OPEN
    await store.admit(occ("tg:2:1"))
    assert offer.taken.done() and offer.taken.result().session == "tg:2"


async def test_nothing_due_claims_nothing_a_debounce_window(kind: str, tmp_path: Path, clock: ManualClock,
                                                            location: str | None):
    store = await opened(kind, tmp_path, clock, location, capacity=3, debounce_ms=300, attempt_cap=3)
    try:
        offer = store.offer_claim("w1")
        await store.admit(occ("tg:1:1"))
        assert offer.state is OfferState.OPEN and not offer.taken.done()
        assert (await store.status()).work.pending == 1
        clock.advance(0.3)
        assert (await store.claim_or_wake("w1")).claim is not None     # the ordinary claim once the window ended
    finally:
        await store.close()


async def test_a_withdrawal_racing_an_admission_hands_the_claim_over(store: Store):
    """Withdrawn while an admission's transaction carries it: the withdrawal waits for that commit and answers its
    claim (the worker's to give back), never loses it; a withdrawn offer is taken by no later admission."""
    offer = store.offer_claim("w1")
    admission = asyncio.create_task(store.admit(occ("tg:1:1")))
    await held(offer)
    claim = await offer.withdraw()
    assert claim is not None and (await admission).work_id == claim.items[0].work_id
    await store.release(claim, delay_seconds=0, reason="worker stopping", refund=True)
    status = await store.status()
    assert status.work.pending == 1 and status.work.running == 0
    again = await store.claim("w1")
    assert again is not None and again.attempt == 1               # the given-back attempt was not counted
    await store.admit(occ("tg:2:1"))
    assert offer.state is OfferState.TAKEN and offer.taken.result() == claim
    withdrawn = store.offer_claim("w2")
    assert await withdrawn.withdraw() is None
    await store.admit(occ("tg:3:1"))
    assert withdrawn.state is OfferState.WITHDRAWN and (await store.status()).work.pending == 2


async def test_an_admission_whose_offer_took_the_only_due_work_leaves_no_mark_for_another_look(store: Store):
    """The worker wakes for a claim handed over by an admission without a mark on the work pulse, and the admission
    marks the pulse only when more was claimable after its claim: a worker with free slots then looks once more,
    else it makes no database call beside the turn. Negative control (`more` ignored): the second admission,
    which leaves a session due, marks nothing and that session would wait for another wake-up."""
    pulse = store.signals.work
    offer = store.offer_claim("w1")
    await store.admit(occ("tg:1:1"))
    assert offer.taken.done() and not pulse._event.is_set()          # handed over: nothing more to look for
    await store.admit(occ("tg:2:1"))                                   # no offer open: an ordinary wake-up
    assert pulse._event.is_set()
    pulse._event.clear()
    offer = store.offer_claim("w2")
    await store.admit(occ("tg:3:1"))                                   # claims tg:2 (the oldest due); tg:3 waits
    assert offer.taken.result().session == "tg:2"
    assert pulse._event.is_set()                                       # more was claimable: look again
