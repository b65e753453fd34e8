"""A claim taken in the admission's commit (the idle worker's offer, `Store.offer_claim`) is an ordinary claim on
PostgreSQL (C15): its run has a lease on the database clock, and the worker keeps it (`Worker._keep_lease`) while the
model runs, exactly as for a claim of its own. The model here answers only once the lease was renewed twice (a
deadline, no hope): a turn whose lease nobody kept would expire under it and its finish be refused."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from store import Claim, ClaimOffer, ManualClock, Occurrence, Renewal, WorkKind, open_store
from store.postgres import PostgresStore
from tests.integration.postgres.test_leases import query
from worker.models.base import ModelTurn
from worker.models.scripted import ScriptedModel
from worker.worker import Worker

LEASE_S = 3.0      # renewed every second
WAIT_S = 20.0


async def test_a_claim_taken_in_the_admission_keeps_its_lease_while_the_model_runs(pg_url: str, clock: ManualClock):
    store = await open_store(pg_url, clock, capacity=10, debounce_ms=0, attempt_cap=3, lease_s=LEASE_S)
    assert isinstance(store, PostgresStore)
    offers: list[ClaimOffer] = []
    made = asyncio.Event()
    renewed: list[tuple[str, Renewal]] = []
    offer_claim, renew = store.offer_claim, store.renew

    def offering(worker_id: str, *, history_limit: int | None = None) -> ClaimOffer:
        offers.append(offer_claim(worker_id, history_limit=history_limit))
        made.set()
        return offers[-1]

    async def renewing(claim: Claim) -> Renewal:
        answer = await renew(claim)
        renewed.append((claim.run_id, answer))
        return answer
    store.offer_claim = offering  # type: ignore[method-assign] - watched, the store's own offer answers
    store.renew = renewing  # type: ignore[method-assign] - watched, the store's own renewal answers

    async def after_two_renewals(messages: Sequence[Any]) -> ModelTurn:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while len(renewed) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return ModelTurn("vanilla: fine", ())
    worker = Worker(store, ScriptedModel([after_two_renewals]))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(made.wait(), WAIT_S)
        await store.admit(Occurrence("tg:1:1", "tg:1", "how much vanilla", WorkKind.AGENT, "tg:1"))
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while worker.turns_done < 1 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await task
        await store.close()
    taken = [o.taken.result() for o in offers if o.taken.done()]
    assert len(taken) == 1, offers
    run_id = taken[0].run_id
    assert len(renewed) >= 2 and {r for _, r in renewed[:2]} == {Renewal.HELD}
    assert {rid for rid, _ in renewed} == {run_id}
    assert query(pg_url, "SELECT state, attempts FROM work") == [("finished", 1)]
    assert query(pg_url, "SELECT run_id, outcome FROM runs") == [(run_id, "finished")]
