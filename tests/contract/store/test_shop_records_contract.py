"""The shop's records across the seam (store/shop_records.py), on every store: each read of ShopRecords,
ProducerRecords, Insights and Leadership returns frozen records whose times are aware UTC datetimes and whose kinds
are Enum members, with the figures the store holds."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from store import (
    ActionState,
    DeliveryCounts,
    EndedRun,
    ItemSales,
    ItemSpec,
    LeaderView,
    ManualClock,
    Missed,
    MissedReason,
    Occurrence,
    OnOrder,
    OpenAction,
    OpsView,
    ProcessView,
    ReportDraft,
    RunOutcome,
    SeriesPoint,
    ShopItem,
    StateTallies,
    StockEvent,
    StockEventKind,
    StockLevel,
    Store,
    TillCount,
    Transaction,
    WorkCounts,
    WorkKind,
    WorkReport,
    WorkState,
    WorkWithReport,
)

from .conftest import START
from .test_outbox_contract import proposed
from .test_sales_contract import count as till_count

SHOP = [ItemSpec("vanilla", "tubs", 20, 8, 12, 300, max_order=40, pack=6, price_cents=450),
        ItemSpec("chocolate", "tubs", 12, 6, 12, 250)]


def aware(moment: object) -> bool:
    """An aware datetime at UTC (what every time crossing the seam is)."""
    return isinstance(moment, datetime) and moment.utcoffset() == timedelta(0)


def frozen(record: object) -> None:
    assert dataclasses.is_dataclass(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, dataclasses.fields(record)[0].name, None)


async def test_shop_items_are_typed_with_the_setting_in_force(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    items = await store.shop_items()
    assert [i.item for i in items] == ["chocolate", "vanilla"] and all(isinstance(i, ShopItem) for i in items)
    vanilla = await store.shop_item("vanilla")
    assert vanilla == items[1] and await store.shop_item("mint") is None
    frozen(vanilla)
    assert (vanilla.unit, vanilla.on_hand, vanilla.reorder_point, vanilla.target, vanilla.unit_cost_cents,
            vanilla.max_order, vanilla.pack, vanilla.min_order, vanilla.price_cents) == (
        "tubs", 20, 8, 12, 300, 40, 6, None, 450)
    assert (vanilla.on_order, vanilla.position, vanilla.open_proposal, vanilla.applied, vanilla.applied_at) == (
        0, 20, None, False, None)
    clock.advance(60)
    await store.apply_setting("vanilla", 10, 16, "owner 1")
    vanilla = await store.shop_item("vanilla")
    assert vanilla is not None and (vanilla.reorder_point, vanilla.target) == (10, 16)
    assert (vanilla.file_reorder_point, vanilla.file_target, vanilla.applied_by) == (8, 12, "owner 1")
    assert aware(vanilla.applied_at) and vanilla.applied_at == clock.now()


async def test_stock_levels_are_the_watchers_typed_rows_in_and_out_of_a_transaction(store: Store):
    await store.seed_shop(SHOP, "shop.toml")
    levels = await store.stock_watch()
    assert levels == await store.atomic(lambda tx: tx.producers.stock_levels())
    chocolate = levels[0]
    assert isinstance(chocolate, StockLevel)
    frozen(chocolate)
    assert (chocolate.item, chocolate.unit, chocolate.on_hand, chocolate.on_order, chocolate.position,
            chocolate.reorder_point, chocolate.armed, chocolate.episode) == ("chocolate", "tubs", 12, 0, 12, 6, True, 1)
    await store.atomic(lambda tx: tx.producers.set_watch("chocolate", False, 1))
    chocolate = (await store.stock_watch())[0]
    assert chocolate.armed is False and chocolate.episode == 1


async def test_till_counts_and_stock_events_carry_their_kind_and_time(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    seeded = clock.now()
    clock.advance(3600)
    await till_count(store, "r1", {"vanilla": 15})
    counted = clock.now()
    [event] = await store.atomic(lambda tx: tx.producers.count_events_after(0))
    assert isinstance(event, TillCount)
    frozen(event)
    assert (event.item, event.unit, event.old_on_hand, event.new_on_hand, event.source) == (
        "vanilla", "tubs", 20, 15, "till:1:r1")
    assert aware(event.created_at) and event.created_at == counted
    assert await store.atomic(lambda tx: tx.producers.count_events_after(event.event_id)) == []
    assert await store.recent_counts() == [event] and await store.recent_counts("chocolate") == []
    events = await store.stock_events("vanilla")
    assert all(isinstance(e, StockEvent) for e in events)
    assert [(e.kind, e.old_on_hand, e.new_on_hand, e.created_at) for e in events] == [
        (StockEventKind.SEED, None, 20, seeded), (StockEventKind.COUNT, 20, 15, counted)]
    assert all(aware(e.created_at) and type(e.kind) is StockEventKind for e in events)


async def test_sales_are_typed_per_item_with_the_first_record(store: Store, clock: ManualClock):
    await store.seed_shop(SHOP, "shop.toml")
    seeded = clock.now()
    clock.advance(86400)
    await till_count(store, "r1", {"vanilla": 15, "chocolate": 14})
    found = await store.sales(seeded - timedelta(days=1), clock.now())
    assert all(isinstance(row, ItemSales) for row in found)
    assert [(r.item, r.unit, r.on_hand, r.sold, r.restocked, r.records) for r in found] == [
        ("chocolate", "tubs", 14, 0, 2, 2), ("vanilla", "tubs", 15, 5, 0, 2)]
    assert all(aware(r.first_record_at) and r.first_record_at == seeded for r in found)
    [none] = await store.sales(seeded - timedelta(days=2), seeded - timedelta(days=1), "vanilla")
    assert (none.sold, none.records, none.first_record_at) == (0, 0, None)
    # a pair of records counts for the window (since, until] its later record falls in
    [before] = await store.sales(seeded, clock.now() - timedelta(seconds=1), "vanilla")
    [inside] = await store.sales(clock.now() - timedelta(seconds=1), clock.now(), "vanilla")
    assert (before.sold, before.records, inside.sold, inside.records) == (0, 0, 5, 1)


async def test_on_order_and_open_actions_are_typed(store: Store, clock: ManualClock):
    proposal_id, _ = await proposed(store)
    assert (await store.atomic(lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01",
                                                              day_max_cents=5000, destination="supplier:dairy",
                                                              lead_time_days=2))).ok
    [order] = await store.on_order()
    assert isinstance(order, OnOrder)
    frozen(order)
    assert (order.proposal_id, order.item, order.unit, order.quantity, order.total_cents, order.action_state) == (
        proposal_id, "vanilla", "tubs", 6, 1800, ActionState.PENDING)
    assert aware(order.decided_at) and aware(order.due_at) and order.due_at - order.decided_at == timedelta(days=2)
    view = await store.ops_view({})
    [action] = view.open_actions
    assert isinstance(action, OpenAction)
    assert (action.proposal_id, action.state, action.item, action.quantity, action.total_cents) == (
        proposal_id, ActionState.PENDING, "vanilla", 6, 1800)
    assert type(action.state) is ActionState


async def test_missed_occurrences_are_typed_newest_first(store: Store, clock: ManualClock):
    fire = START - timedelta(hours=1)

    assert await store.atomic(lambda tx: tx.producers.record_missed("daily", "k1", MissedReason.LATE, fire))
    clock.advance(5)
    assert await store.atomic(lambda tx: tx.producers.record_missed("daily", "k2", MissedReason.CAPACITY, None))
    first, second = await store.missed_occurrences()
    assert all(isinstance(m, Missed) for m in (first, second))
    assert (first.key, first.reason, first.fire_time) == ("k2", MissedReason.CAPACITY, None)
    assert (second.key, second.reason, second.fire_time, second.recorded_at) == (
        "k1", MissedReason.LATE, fire, START)
    assert type(first.reason) is MissedReason and aware(second.fire_time) and aware(first.recorded_at)
    assert await store.missed_occurrences(limit=1) == [first]


async def test_a_missed_reason_outside_the_enum_is_refused_and_nothing_is_written(store: Store):
    """Negative control of the typed reason: text the schema's CHECK list lacks never reaches the database."""
    def record(tx: Transaction) -> bool:
        return tx.producers.record_missed("daily", "k1", "asleep", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="asleep"):
        await store.atomic(record)
    assert await store.missed_occurrences() == []


async def test_work_with_report_is_typed_before_and_after_its_report(store: Store):
    assert await store.work_with_report("till:1:r1") is None
    await store.admit(Occurrence("till:1:r1", "till:1", "count", WorkKind.AGENT, "till:1"))
    waiting = await store.work_with_report("till:1:r1")
    assert isinstance(waiting, WorkWithReport) and (waiting.state, waiting.report) == (WorkState.PENDING, None)
    claim = await store.claim("w1")
    assert claim is not None
    report_id = (await store.finish(claim, ReportDraft("counted", destination="till:1"))).report_id
    done = await store.work_with_report("till:1:r1")
    assert done is not None and done.work_id == waiting.work_id and done.state is WorkState.FINISHED
    assert done.report == WorkReport(report_id, "counted", False)
    frozen(done)


async def test_runs_ended_since_are_typed_runs_from_a_mark(store: Store, clock: ManualClock):
    mark = clock.now()
    await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    clock.advance(2)
    await store.finish(claim, ReportDraft("hello", destination="tg:1"), usage=(1, 10, 4))
    [run] = await store.runs_ended_since(mark)
    assert isinstance(run, EndedRun)
    frozen(run)
    assert (run.run_id, run.outcome, run.model_calls, run.input_tokens, run.output_tokens) == (
        claim.run_id, RunOutcome.FINISHED, 1, 10, 4)
    assert type(run.outcome) is RunOutcome and aware(run.started_at) and aware(run.ended_at)
    assert (run.started_at, run.ended_at) == (mark, clock.now())
    assert await store.runs_ended_since(clock.now() + timedelta(seconds=1)) == []


async def test_day_series_is_one_typed_point_per_hour(store: Store, clock: ManualClock):
    await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
    clock.advance(3600)
    series = await store.day_series(24)
    assert len(series) == 24 and all(isinstance(p, SeriesPoint) for p in series)
    assert all(aware(p.start) for p in series)
    assert series[0].start == clock.now() - timedelta(hours=24) and series[-1].start == clock.now() - timedelta(hours=1)
    assert series[-1].lam > 0 and all(isinstance(p.w, float) and isinstance(p.l, float) for p in series)


async def test_ops_view_is_typed_and_its_tallies_carry_over(store: Store, clock: ManualClock):
    tallies: StateTallies = {}
    empty = await store.ops_view(tallies)
    assert isinstance(empty, OpsView)
    assert empty.work == WorkCounts() and empty.deliveries == DeliveryCounts() and empty.oldest_pending_seconds is None
    assert (empty.unknown, empty.failed_work, empty.failed_deliveries, empty.open_actions) == ((), (), (), ())
    await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.finish(claim, ReportDraft("hello", destination="tg:1"))
    await store.admit(Occurrence("tg:1:2", "tg:1", "again", WorkKind.AGENT, "tg:1"))
    clock.advance(30)
    store.tally("stranger")
    await store.count("stranger")
    view = await store.ops_view(tallies)
    assert (view.work.finished, view.work.pending, view.agent_work.pending, view.open_agent_work) == (1, 1, 1, 1)
    assert view.deliveries.pending == 1 and view.oldest_pending_seconds == 30.0
    assert view.counters_last_hour.get("stranger", 0) >= 1
    assert await store.ops_view(tallies) == view            # the kept tallies give the same counts again
    assert await store.ops_view({}) == view                 # as a fresh count does


async def test_leaders_and_processes_are_typed(store: Store):
    assert await store.acquire_leader("poller", "a" * 32, 30.0) == 1
    await store.heartbeat("a" * 32, 101, "host-a", 60.0)
    [lease] = await store.leaders()
    assert isinstance(lease, LeaderView)
    frozen(lease)
    assert (lease.name, lease.holder, lease.generation) == ("poller", "a" * 32, 1)
    assert aware(lease.acquired_at) and 0 < lease.expires_in_s <= 30.0
    [process] = await store.processes()
    assert isinstance(process, ProcessView)
    assert (process.holder, process.pid, process.host) == ("a" * 32, 101, "host-a")
    assert aware(process.started_at) and process.seen_s_ago >= 0
