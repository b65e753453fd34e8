"""The worker on a real store with the offline and scripted models: C5, C6, C9, C11, C13."""
from __future__ import annotations

import dataclasses
import json

import pytest

from bot.shop_file import load_shop
from store import Occurrence, PartStopped, SqliteStore
from tests.support import ROOT
from worker.models.base import ModelConfigFault, ModelRefused, ModelTransient, ModelTurn, ToolCall
from worker.models.offline import OfflineModel
from worker.models.scripted import ScriptedModel
from worker.worker import Worker, WorkerSettings

SHOP = load_shop(ROOT / "shop.example.toml")


@pytest.fixture
async def shop_store(store):
    await store.seed_shop(SHOP.items, "test")
    return store


def message(n: int, text: str, chat: int = 1) -> Occurrence:
    return Occurrence(f"tg:{chat}:{n}", f"tg:{chat}", text, destination=f"tg:{chat}")


async def body(raw, report_id: str) -> str:
    return raw.execute("SELECT body FROM reports WHERE report_id = ?", (report_id,)).fetchone()[0]


async def test_report_is_built_from_tool_results(shop_store, raw):
    store = shop_store
    worker = Worker(store, OfflineModel())
    await store.admit(message(1, "How much vanilla?"))
    assert await worker.drain() == 1
    first = await body(raw, "r1.1")
    assert "vanilla on hand: 2 tubs" in first
    # a count changes the stock: the next answer changes with it (no hard-coded strings)
    await store.admit(Occurrence("till:1:a", "till:1", json.dumps({"counts": {"vanilla": 5}}), destination="till:1"))
    await worker.drain()
    await store.admit(message(3, "how much vanilla"))
    await worker.drain()
    second = await body(raw, "r3.1")
    assert "vanilla on hand: 5 tubs" in second and "vanilla on hand: 2" not in second
    assert await store.check() == []


async def test_opening_brief_reproduces_the_seed(shop_store, raw):
    await shop_store.admit(message(1, "Prepare the opening brief"))
    await Worker(shop_store, OfflineModel()).drain()
    text = await body(raw, "r1.1")
    for figure in ("6", "4", "$26.00"):
        assert figure in text, text
    assert "vanilla" in text and "strawberry" in text


async def test_wrong_narrated_number_is_replaced(shop_store, raw):
    model = ScriptedModel([
        ModelTurn("", (ToolCall("c1", "get_item", json.dumps({"item": "vanilla"})),)),
        ModelTurn("vanilla: 7 tubs on hand", ()),
    ])
    await shop_store.admit(message(1, "vanilla?"))
    await Worker(shop_store, model).drain()
    text = await body(raw, "r1.1")
    assert "7" not in text and "vanilla on hand: 2" in text
    ops = raw.execute("SELECT tool, effect, status FROM operations").fetchall()
    assert [tuple(o) for o in ops] == [("get_item", "read", "done")]
    assert raw.execute("SELECT report_id FROM operations").fetchone()[0] == "r1.1"


async def test_propose_order_records_a_proposal_and_contacts_no_one(shop_store, raw):
    await shop_store.admit(message(1, "reorder"))
    await Worker(shop_store, OfflineModel()).drain()
    proposals = raw.execute("SELECT item, quantity, total_cents, state, report_id FROM proposals "
                            "ORDER BY item").fetchall()
    assert [tuple(p) for p in proposals] == [("strawberry", 4, 800, "awaiting_approval", "r1.1"),
                                            ("vanilla", 6, 1800, "awaiting_approval", "r1.1")]
    effects = {r[0]: r[1] for r in raw.execute("SELECT tool, effect FROM operations")}
    assert effects["propose_order"] == "external" and effects["draft_order"] == "internal"
    # a second reorder finds the open proposals and proposes nothing new
    await shop_store.admit(message(2, "reorder"))
    await Worker(shop_store, OfflineModel()).drain()
    assert raw.execute("SELECT count(*) FROM proposals").fetchone()[0] == 2


async def test_transient_failures_release_with_backoff_then_fail_at_the_cap(shop_store, raw, clock):
    model = ScriptedModel([ModelTransient("503", status=503)] * 3)
    worker = Worker(shop_store, model, WorkerSettings(backoff=(30, 120, 600)))
    await shop_store.admit(message(1, "stock"))
    await worker.drain()
    assert tuple(raw.execute("SELECT state, attempts FROM work").fetchone()) == ("pending", 1)
    assert await worker.drain() == 0          # not before 30 s
    clock.advance(30)
    await worker.drain()
    clock.advance(120)
    await worker.drain()
    assert tuple(raw.execute("SELECT state, attempts FROM work").fetchone()) == ("failed", 3)
    text = raw.execute("SELECT body FROM reports").fetchone()[0]
    assert "3 attempts" in text
    assert await shop_store.check() == []


async def test_refusal_fails_at_once_and_config_fault_stops_with_work_pending(shop_store, raw):
    await shop_store.admit(message(1, "stock"))
    await Worker(shop_store, ScriptedModel([ModelRefused("bad request", status=400)])).drain()
    assert raw.execute("SELECT state FROM work WHERE work_id = 1").fetchone()[0] == "failed"
    await shop_store.admit(message(2, "stock"))
    with pytest.raises(PartStopped, match="SHOPBOT_MODEL"):
        await Worker(shop_store, ScriptedModel([ModelConfigFault("bad key", status=401)])).drain()
    assert tuple(raw.execute("SELECT state, attempts FROM work WHERE work_id = 2").fetchone()) == ("pending", 0)


async def test_debounced_messages_are_one_turn_with_one_report(db_path, clock):
    store = await SqliteStore.open(db_path, clock, debounce_ms=1000)
    try:
        await store.seed_shop(SHOP.items, "test")
        for n, text in enumerate(["stock vanilla", "stock chocolate", "stock strawberry"], start=1):
            await store.admit(message(n, text))
            clock.advance(0.2)
        await store.admit(message(9, "stock vanilla", chat=2))
        worker = Worker(store, OfflineModel())
        clock.advance(1)
        assert await worker.drain() == 2
        rows = await store.reports()
        by_report = {r.report: r.work for r in rows}
        assert by_report == {"r1.1": (1, 2, 3), "r4.1": (4,)}
        text = next(r.body for r in rows if r.report == "r1.1")
        assert all(name in text for name in ("vanilla", "chocolate", "strawberry"))
    finally:
        await store.close()


async def test_till_counts_are_applied_in_the_finish_transaction(shop_store, raw):
    await shop_store.admit(Occurrence("till:1:r1", "till:1", json.dumps({"counts": {"vanilla": 9, "chocolate": 3}}),
                                      destination="till:1"))
    await Worker(shop_store, ScriptedModel([])).drain()     # no model call
    assert {r[0]: r[1] for r in raw.execute("SELECT item, on_hand FROM items")}["vanilla"] == 9
    events = raw.execute("SELECT item, old_on_hand, new_on_hand, source, work_id FROM stock_events "
                         "WHERE kind = 'count' ORDER BY item").fetchall()
    assert [tuple(e) for e in events] == [("chocolate", 12, 3, "till:1:r1", 1), ("vanilla", 2, 9, "till:1:r1", 1)]
    text = raw.execute("SELECT body FROM reports").fetchone()[0]
    assert "vanilla: 9 (was 2)" in text


async def test_three_transient_failures_in_a_row_pause_claiming_and_tell_the_owner(shop_store, raw):
    worker = Worker(shop_store, ScriptedModel([ModelTransient("503", status=503)] * 3),
                    WorkerSettings(backoff=(1, 1, 600), notice_destination="tg:1"))
    for chat in (1, 2, 3):
        await shop_store.admit(message(1, "stock", chat=chat))
    await worker.drain()
    assert worker._paused_until is not None
    notices = raw.execute("SELECT source FROM work WHERE kind = 'notice'").fetchall()
    assert len(notices) == 1 and notices[0][0].startswith("notice:model_paused:")
    assert [tuple(r) for r in raw.execute("SELECT state, attempts FROM work "
                                          "WHERE kind = 'agent'")] == [("pending", 1)] * 3


async def test_sessions_run_concurrently_but_one_session_never_twice(shop_store):
    import asyncio

    from worker.models.base import ModelTurn as Turn
    running: set[str] = set()
    overlap: list[int] = []
    release = asyncio.Event()

    class GateModel:
        name = "gate"

        async def complete(self, system, messages, tools):
            text = messages[-1].text
            running.add(text)
            overlap.append(len(running))
            if len(overlap) >= 2:
                release.set()
            await asyncio.wait_for(release.wait(), 5)
            running.discard(text)
            return Turn(f"ok {text}", ())

    worker = Worker(shop_store, GateModel(), WorkerSettings(concurrency=2))
    await shop_store.admit(message(1, "a", chat=1))
    await shop_store.admit(message(2, "b", chat=1))
    await shop_store.admit(message(1, "c", chat=2))
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            if worker.turns_done >= 2:
                break
            await asyncio.sleep(0.02)
    finally:
        worker.stop()
        await task
    assert max(overlap) == 2                       # two sessions at once
    rows = await shop_store.reports()
    assert sorted(r.work for r in rows) == [(1, 2), (3,)]   # chat 1's two messages: one turn, never two


async def test_work_admitted_by_another_process_is_picked_up(shop_store, db_path, raw):
    import asyncio
    import subprocess
    import sys
    worker = Worker(shop_store, OfflineModel())
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.sleep(0)
        subprocess.run([sys.executable, "-m", "bot.cli", "admit", "--db", str(db_path), "--source", "tg:9:1",
                        "--session", "tg:9", "--text", "stock"], check=True, capture_output=True, timeout=30)
        for _ in range(300):                       # within 2 s (the data_version check runs once a second)
            if raw.execute("SELECT state FROM work").fetchone()[0] == "finished":
                break
            await asyncio.sleep(0.01)
        assert raw.execute("SELECT state FROM work").fetchone()[0] == "finished"
    finally:
        worker.stop()
        await task


async def test_a_stock_check_turn_may_only_order_its_own_item(shop_store, raw):
    model = ScriptedModel([
        ModelTurn("", (ToolCall("c1", "propose_order", json.dumps({"item": "chocolate", "quantity": 2})),)),
        ModelTurn("done", ()),
    ])
    await shop_store.admit(Occurrence("stock:vanilla:1", "stock:vanilla", "Reorder check for vanilla",
                                      destination="tg:1"))
    await Worker(shop_store, model).drain()
    assert raw.execute("SELECT count(*) FROM proposals").fetchone()[0] == 0
    tool_result = [m for m in model.calls[1].messages if m.role == "tool"][0]
    assert tool_result.is_error and "stock check for vanilla only" in tool_result.text


async def _turns(worker: Worker, count: int, seconds: float) -> bool:
    """Poll (deadline `seconds`) until the running worker has finished `count` turns."""
    import asyncio
    deadline = asyncio.get_running_loop().time() + seconds
    while worker.turns_done < count and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    return worker.turns_done >= count


@pytest.mark.parametrize("drop_wake", [False, True])
async def test_the_worker_sleeps_until_the_next_due_time_its_claim_read_without_a_read_of_its_own(
        db_path, clock, drop_wake):
    """Issue 31: the running worker claims on an admission's wake-up with no read before the claim, and sleeps
    until the time its empty claim (or a finish that found no next turn) carried: a debounced message is claimed
    when its window ends though nothing else happens, and `next_claim_time` is never read. Negative control
    (`drop_wake`): an empty claim that carries no wake-up time leaves the debounced message unclaimed past the
    once-a-second look (an in-process admission moves no `data_version`)."""
    import asyncio
    store = await SqliteStore.open(db_path, clock, debounce_ms=300)
    await store.seed_shop(SHOP.items, "test")
    await store.poll_changes()                    # the first look's "changed" is spent: only a real change counts
    reads: list[str] = []
    read = store.db.read

    async def counted(fn, *args):  # type: ignore[no-untyped-def]
        reads.append(getattr(fn, "__name__", ""))
        return await read(fn, *args)
    store.db.read = counted  # type: ignore[method-assign]
    empty = asyncio.Event()                       # an empty claim came back: the worker sleeps on its answer
    claim_or_wake = store.claim_or_wake

    async def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        claimed = await claim_or_wake(*args, **kwargs)
        if claimed.claim is None:
            empty.set()
        return dataclasses.replace(claimed, next_wake=None) if drop_wake else claimed
    store.claim_or_wake = watched  # type: ignore[method-assign]

    async def debounced(n: int, chat: int) -> None:
        empty.clear()
        await store.admit(message(n, "stock vanilla", chat=chat))
        await asyncio.wait_for(empty.wait(), 5)   # claimed too early: nothing due yet
        clock.advance(0.3)
    worker = Worker(store, OfflineModel())
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(empty.wait(), 5)   # the worker's first look: nothing waits
        await debounced(1, 1)
        assert await _turns(worker, 1, 1.5 if drop_wake else 10) is not drop_wake
        if not drop_wake:
            await debounced(2, 2)                 # the next one, after a finish that looked and found none
            assert await _turns(worker, 2, 10)
    finally:
        worker.stop()
        await task
        await store.close()
    assert "_next_wake" not in reads


async def _offered(store) -> tuple[list, object]:  # type: ignore[no-untyped-def]
    """Watch the worker's offers (`Store.offer_claim`): the list of offers made, and an event set at each."""
    import asyncio
    offers: list = []
    made = asyncio.Event()
    offer_claim = store.offer_claim

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        offer = offer_claim(*args, **kwargs)
        offers.append(offer)
        made.set()
        return offer
    store.offer_claim = watched
    return offers, made


@pytest.mark.parametrize("slots", [1, 4])
async def test_an_idle_workers_claim_rides_in_the_admission_and_the_turn_starts_without_a_claim_of_its_own(
        shop_store, raw, slots):
    """Issue 31: the idle worker offers its free slot's claim; the admission's commit claims the turn with its
    set-up, and the worker starts it with no database call between that commit and the model: no claim of its own,
    no read. Negative control: a worker that offers nothing claims by itself (`claim_or_wake` takes the turn)."""
    import asyncio
    store = shop_store
    offers, made = await _offered(store)
    calls: list[str] = []
    claims: list[object] = []
    claim_or_wake, write, read = store.claim_or_wake, store.db.write, store.db.read

    async def claiming(*args, **kwargs):  # type: ignore[no-untyped-def]
        claimed = await claim_or_wake(*args, **kwargs)
        if claimed.claim is not None:
            claims.append(claimed.claim)
        return claimed

    def counting(call):  # type: ignore[no-untyped-def]
        async def counted(fn, *args):  # type: ignore[no-untyped-def]
            calls.append(getattr(fn, "__qualname__", ""))
            return await call(fn, *args)
        return counted
    store.claim_or_wake = claiming
    # with free slots left, the worker looks again only when the admission left more claimable (here: nothing)
    worker = Worker(store, OfflineModel(), WorkerSettings(concurrency=slots))
    turn = worker.run_turn
    at_turn: list[list[str]] = []
    at_end: list[list[str]] = []

    async def started(claim):  # type: ignore[no-untyped-def]
        at_turn.append(list(calls))
        try:
            return await turn(claim)
        finally:
            at_end.append(list(calls))
    worker.run_turn = started  # type: ignore[method-assign]
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(made.wait(), 5)
        store.db.write, store.db.read = counting(write), counting(read)
        await store.admit(message(1, "How much vanilla?"))
        assert await _turns(worker, 1, 10)
    finally:
        worker.stop()
        await task
    assert claims == [] and offers[0].taken.done()
    assert [c.replace("BaseStore.", "") for c in at_turn[0]] == ["_admission.<locals>.carrying"]
    assert not any("claim_or_wake" in c for c in at_end[0]), at_end[0]     # no look beside the turn
    assert [tuple(r) for r in raw.execute("SELECT state, attempts FROM work")] == [("finished", 1)]


async def test_a_claim_taken_by_an_admission_racing_the_workers_stop_is_given_back(shop_store, raw):
    """The worker stops while an admission's transaction carries its offer: that claim commits, and the worker
    gives it back (pending again, the attempt not counted) instead of losing it (running for nobody until a
    restart's recovery). Negative control: a worker that does not give back a claim taken as it stopped."""
    import asyncio
    store = shop_store
    offers, made = await _offered(store)
    worker = Worker(store, OfflineModel())
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(made.wait(), 5)
        admission = asyncio.create_task(store.admit(message(1, "How much vanilla?")))
        while offers[-1].state.value == "open":      # the admission's transaction carries the offer
            await asyncio.sleep(0)
        worker.stop()
        await asyncio.wait_for(task, 10)
        await admission
    finally:
        worker.stop()
        await task
    assert offers[-1].taken.done() and worker.turns_done == 0
    assert [tuple(r) for r in raw.execute("SELECT state, attempts FROM work")] == [("pending", 0)]
    assert [tuple(r) for r in raw.execute("SELECT outcome FROM runs")] == [("released",)]
