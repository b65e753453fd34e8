"""Leader leases (C16) through the Leadership port, for every store: acquire, renew, resign and the fence, with the
stale generation, the lapsed lease never revived, and the sweep that declares only a lapsed sender's sends unknown.

SQLite judges leases by the store's clock (a ManualClock here, moved past the lease); PostgreSQL by the database
clock alone, so its expiries are waited for on that clock (short leases, polled with a deadline)."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from store import ActionMove, DeliveryState, Fence, LeaseLost, ManualClock, Occurrence, Store, Transaction, WorkKind

from .test_outbox_contract import finished_report, proposed

LEASE = 0.4          # seconds: long enough for a few statements, short enough to wait out on the database clock


def holder() -> str:
    return uuid.uuid4().hex


async def lapse(store: Store, clock: ManualClock, kind: str, name: str) -> None:
    """Wait until the lease `name` has expired on the store's clock (moved on SQLite, waited for on PostgreSQL)."""
    if kind == "sqlite":
        clock.advance(LEASE + 0.001)
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        lease = next(row for row in await store.leaders() if row.name == name)
        if lease.expires_in_s <= 0:
            return
        assert asyncio.get_running_loop().time() < deadline, lease
        await asyncio.sleep(0.02)


async def test_one_holder_at_a_time_and_a_lease_is_never_re_entered(store: Store):
    a, b = holder(), holder()
    assert await store.acquire_leader("poller", a, LEASE) == 1
    assert await store.acquire_leader("poller", b, LEASE) is None
    assert await store.acquire_leader("poller", a, LEASE) is None          # not even by its own holder: it renews
    assert await store.acquire_leader("relay", b, LEASE) == 1              # names are independent
    [poller, relay] = await store.leaders()
    assert (poller.name, poller.holder, poller.generation) == ("poller", a, 1)
    assert 0 < poller.expires_in_s <= LEASE and relay.holder == b


async def test_renewal_counts_only_for_the_holder_and_its_generation(store: Store, clock: ManualClock, kind: str):
    a, b = holder(), holder()
    assert await store.acquire_leader("relay", a, LEASE) == 1
    assert await store.renew_leader("relay", a, 1, LEASE)
    assert not await store.renew_leader("relay", b, 1, LEASE)              # another holder: no
    assert not await store.renew_leader("relay", a, 2, LEASE)              # a generation it never held: no
    await lapse(store, clock, kind, "relay")
    assert not await store.renew_leader("relay", a, 1, LEASE)              # lapsed: never revived
    assert await store.acquire_leader("relay", b, LEASE) == 2              # the takeover's generation is one more
    assert not await store.renew_leader("relay", a, 1, LEASE)              # the old holder stays demoted
    await store.fenced(Fence("relay", b, 2))
    with pytest.raises(LeaseLost):
        await store.fenced(Fence("relay", a, 1))


async def test_the_fence_refuses_a_lapsed_lease_before_any_takeover(store: Store, clock: ManualClock, kind: str):
    a = holder()
    assert await store.acquire_leader("producers", a, LEASE) == 1
    await store.fenced(Fence("producers", a, 1))                    # negative control: held, passes
    await lapse(store, clock, kind, "producers")
    with pytest.raises(LeaseLost):                                  # expired, nobody took over yet: refused too
        await store.fenced(Fence("producers", a, 1))


async def test_resign_hands_over_at_once_and_only_the_holder_can_resign(store: Store):
    a, b = holder(), holder()
    assert await store.acquire_leader("actions", a, 30) == 1
    assert not await store.resign_leader("actions", b, 1)                  # not b's to give up
    assert await store.acquire_leader("actions", b, 30) is None
    assert await store.resign_leader("actions", a, 1)
    assert await store.acquire_leader("actions", b, 30) == 2               # at once, no wait for the 30 s
    with pytest.raises(LeaseLost):
        await store.fenced(Fence("actions", a, 1))


async def test_a_fenced_transaction_of_a_stale_holder_writes_nothing(store: Store, clock: ManualClock, kind: str):
    a, b = holder(), holder()
    assert await store.acquire_leader("poller", a, LEASE) == 1

    def admit(source: str):   # type: ignore[no-untyped-def]
        return lambda tx: tx.admit(Occurrence(source, "tg:1", "hello", WorkKind.AGENT, "tg:1")).outcome.value
    assert await store.atomic(admit("tg:1:1"), fence=Fence("poller", a, 1)) == "accepted"   # negative control
    await lapse(store, clock, kind, "poller")
    assert await store.acquire_leader("poller", b, LEASE) == 2
    with pytest.raises(LeaseLost):
        await store.atomic(admit("tg:1:2"), fence=Fence("poller", a, 1))
    assert await store.work_with_report("tg:1:2") is None           # nothing of the refused transaction
    assert await store.atomic(admit("tg:1:2"), fence=Fence("poller", b, 2)) == "accepted"


async def test_sending_records_its_sender_and_a_stale_relay_cannot_mark_sending(store: Store, clock: ManualClock,
                                                                                kind: str):
    a, b = holder(), holder()
    await finished_report(store)
    [part] = await store.due_deliveries()
    assert await store.acquire_leader("relay", a, LEASE) == 1
    await lapse(store, clock, kind, "relay")
    with pytest.raises(LeaseLost):
        await store.mark_sending(part.delivery_id, fence=Fence("relay", a, 1))
    assert [d.delivery_id for d in await store.due_deliveries()] == [part.delivery_id]   # still pending
    assert await store.acquire_leader("relay", b, LEASE) == 2
    await store.mark_sending(part.delivery_id, fence=Fence("relay", b, 2))
    assert await store.due_deliveries() == []
    report = (await store.reports())[0]
    assert report.deliveries[0].state is DeliveryState.SENDING


async def test_the_sweep_leaves_a_live_senders_part_and_declares_a_lapsed_ones_unknown(
        store: Store, clock: ManualClock, kind: str):
    a = holder()
    await finished_report(store, source="tg:1:1")
    await finished_report(store, source="tg:1:2")
    first, second = await store.due_deliveries()
    assert await store.acquire_leader("relay", a, LEASE) == 1
    await store.mark_sending(first.delivery_id, fence=Fence("relay", a, 1))
    await store.mark_sending(second.delivery_id)                    # planted: a send no lease vouches for
    assert await store.sweep_sending() == ([second.delivery_id], [])   # the sender-less one is caught at once
    assert await store.sweep_sending() == ([], [])                  # the live sender's part is left alone
    await lapse(store, clock, kind, "relay")
    assert await store.sweep_sending() == ([first.delivery_id], [])
    assert [d.state for r in await store.reports() for d in r.deliveries] == [DeliveryState.UNKNOWN] * 2
    assert await store.check() == []


async def test_an_action_sending_under_a_lapsed_actions_lease_becomes_unknown(store: Store, clock: ManualClock,
                                                                               kind: str):
    a = holder()
    proposal_id, _ = await proposed(store)

    def approve(tx: Transaction) -> bool:
        return tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=5000,
                                   destination="supplier:dairy").ok
    assert await store.atomic(approve)
    [action] = await store.due_actions()
    assert await store.acquire_leader("actions", a, LEASE) == 1
    await store.action_move(ActionMove.MARK_SENDING, action.action_id, fence=Fence("actions", a, 1))
    assert await store.sweep_sending() == ([], [])
    await lapse(store, clock, kind, "actions")
    with pytest.raises(LeaseLost):
        await store.action_move(ActionMove.MARK_SENDING, action.action_id, fence=Fence("actions", a, 1))
    assert await store.sweep_sending() == ([], [action.action_id])
    assert [u.action_id for u in await store.unknown_actions()] == [action.action_id]


async def test_processes_heartbeat_and_depart(store: Store, clock: ManualClock):
    a, b = holder(), holder()
    await store.heartbeat(a, 101, "host-a", 3600)
    await store.heartbeat(b, 202, "host-b", 3600)
    await store.heartbeat(a, 101, "host-a", 3600)
    rows = {r.holder: r for r in await store.processes()}
    assert set(rows) == {a, b} and rows[a].pid == 101 and rows[b].host == "host-b"
    assert all(r.seen_s_ago >= 0 for r in rows.values())
    await store.depart(b)
    assert [r.holder for r in await store.processes()] == [a]
