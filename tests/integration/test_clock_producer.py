"""The clock producer on a real store in simulated time (C1, C2), and the APScheduler wake-up around it."""
from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from producers import schedule as schedule_module
from producers.clock import ClockProducer
from producers.schedule import Schedule, next_wakeup
from producers.scheduler import JOB_OPTIONS, STOCK_JOB, ProducerScheduler, producer_scheduler
from producers.stock_watch import StockWatcher
from store import Occurrence, SqliteStore, Store, StoreBusy, faults

UTC = UTC
BERLIN = ZoneInfo("Europe/Berlin")
OWNER = "tg:42"


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)


def brief(**changes) -> Schedule:
    fields = dict(name="opening_brief", cron="30 8 * * *", timezone="Europe/Berlin", prompt="Prepare the opening brief",
                  grace=timedelta(hours=3), catch_up="latest")
    return Schedule(**{**fields, **changes})


def rounds(catch_up: str) -> Schedule:
    """Four rounds a day, 07:00 to 10:00: not daily, so keyed by instant."""
    return Schedule(name="rounds", cron="0 7-10 * * *", timezone="Europe/Berlin", prompt="Walk the shop",
                    grace=timedelta(hours=3), catch_up=catch_up)


def work(raw, session_prefix: str = "clock:") -> list[tuple]:
    return [tuple(r) for r in raw.execute(
        "SELECT source, session, kind, payload, destination FROM work WHERE source LIKE ? ORDER BY work_id",
        (session_prefix + "%",))]


def missed(raw) -> list[tuple]:
    return [tuple(r) for r in raw.execute(
        "SELECT schedule, key, reason FROM missed_occurrences ORDER BY schedule, key")]


async def until(store: Store, condition, timeout: float = 10.0) -> None:
    """Wait for a condition, re-checked at every commit of a producer (Store.atomic wakes `signals.work`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        remaining = deadline - loop.time()
        assert remaining > 0, "condition not reached in time"
        await store.signals.work.wait(timeout=remaining)


def fill(n: int) -> list[Occurrence]:
    return [Occurrence(f"tg:7:{i}", "tg:7", f"message {i}", destination="tg:7") for i in range(n)]


# --------------------------------------------------------------------------------------------------------------
# catch-up after a restart
# --------------------------------------------------------------------------------------------------------------

async def test_down_from_8_to_10_admits_the_0830_brief_once(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 7, 55))
    producer = ClockProducer(store, [brief()], OWNER)
    [first] = await producer.catch_up()
    assert first.admitted == () and work(raw) == []
    # the process is down from 08:00 to 10:00; a new process starts at 10:00
    clock.set(berlin(2027, 3, 1, 10, 0))
    restarted = ClockProducer(store, [brief()], OWNER)
    [result] = await restarted.catch_up()
    assert result.admitted == (("clock:opening_brief:2027-03-01", berlin(2027, 3, 1, 8, 30)),)
    assert work(raw) == [("clock:opening_brief:2027-03-01", "clock:opening_brief", "agent",
                          "Prepare the opening brief", OWNER)]
    # a second wake-up at the same time, and another restart, admit nothing
    [again] = await restarted.catch_up()
    assert again.admitted == () and again.duplicates == ()
    await ClockProducer(store, [brief()], OWNER).catch_up()
    assert len(work(raw)) == 1 and missed(raw) == []
    assert await store.check() == []


async def test_days_down_admit_only_today_and_record_the_rest_as_missed(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 9, 0))
    producer = ClockProducer(store, [brief()], None)
    await producer.catch_up()
    clock.set(berlin(2027, 3, 4, 9, 0))
    [result] = await producer.catch_up()
    assert [source for source, _ in result.admitted] == ["clock:opening_brief:2027-03-04"]
    assert set(result.missed) == {("2027-03-02", "late"), ("2027-03-03", "late")}
    assert missed(raw) == [("opening_brief", "2027-03-02", "late"), ("opening_brief", "2027-03-03", "late")]
    assert [s for s, *_ in work(raw)] == ["clock:opening_brief:2027-03-01", "clock:opening_brief:2027-03-04"]
    assert work(raw)[0][4] is None   # no owner chat configured: the report is stored only
    # the rows shown by `shopbot status`, newest first
    rows = await store.missed_occurrences()
    assert {(r.schedule, r.key, r.reason) for r in rows} == set(missed(raw))
    assert all(r.recorded_at == store.clock.now() for r in rows)


@pytest.mark.parametrize("policy,admitted,superseded", [
    ("each", ["08:00", "09:00", "10:00"], []),
    ("latest", ["10:00"], ["08:00", "09:00"]),
])
async def test_catch_up_policies(store, clock, raw, policy, admitted, superseded):
    clock.set(berlin(2027, 3, 1, 6, 30))
    producer = ClockProducer(store, [rounds(policy)], OWNER)
    await producer.catch_up()                       # no round between 03:30 (now - grace) and 06:30
    assert work(raw) == []
    clock.set(berlin(2027, 3, 1, 10, 30))           # down from 06:30 to 10:30; grace 3 h reaches back to 07:30
    [result] = await producer.catch_up()

    def key(hhmm: str) -> str:
        return berlin(2027, 3, 1, int(hhmm[:2]), 0).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [s for s, *_ in work(raw)] == [f"clock:rounds:{key(t)}" for t in admitted]
    assert missed(raw) == sorted([("rounds", key("07:00"), "late")] + [("rounds", key(t), "superseded")
                                                                     for t in superseded])
    [again] = await producer.catch_up()
    assert again.admitted == () and again.missed == ()
    assert len(work(raw)) == len(admitted)


async def test_a_crash_between_admission_and_cursor_commit_readmits_nothing_twice(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 6, 30))
    producer = ClockProducer(store, [rounds("each")], OWNER)
    await producer.catch_up()
    clock.set(berlin(2027, 3, 1, 10, 30))

    faults.arm("clock-cursor:raise")       # a crash after the admissions, before the cursor
    try:
        with pytest.raises(faults.FaultInjected):
            await producer.catch_up()
    finally:
        faults.arm("")
    # nothing of that transaction was committed: no work, no missed rows, the old cursor
    assert work(raw) == [] and missed(raw) == []
    assert raw.execute("SELECT cursor FROM schedule_cursors").fetchone()[0] == "2027-03-01T02:30:00.000000Z"
    # the restarted process plans the same occurrences and admits each once
    [result] = await ClockProducer(store, [rounds("each")], OWNER).catch_up()
    assert len(result.admitted) == 3
    sources = [s for s, *_ in work(raw)]
    assert len(sources) == len(set(sources)) == 3
    assert missed(raw) == [("rounds", "2027-03-01T06:00:00Z", "late")]
    await producer.catch_up()
    assert len(work(raw)) == 3


async def test_a_new_schedule_starts_at_now_minus_grace(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 11, 0))            # 08:30 is 2.5 h ago, within the 3 h grace
    await ClockProducer(store, [brief()], OWNER).catch_up()
    assert [s for s, *_ in work(raw)] == ["clock:opening_brief:2027-03-01"]
    clock.set(berlin(2027, 3, 2, 11, 31))           # a schedule added now would not admit today's 08:30
    await ClockProducer(store, [brief(name="late_brief")], OWNER).catch_up("late_brief")
    assert [s for s, *_ in work(raw)] == ["clock:opening_brief:2027-03-01"]
    assert missed(raw) == []


# --------------------------------------------------------------------------------------------------------------
# capacity
# --------------------------------------------------------------------------------------------------------------

async def test_refused_for_capacity_is_retried_within_its_grace(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 8, 0))
    producer = ClockProducer(store, [brief()], OWNER)
    await producer.catch_up()
    await store.admit_many(fill(store.capacity))
    clock.set(berlin(2027, 3, 1, 8, 30))
    [refused] = await producer.catch_up()
    assert refused.refused == "clock:opening_brief:2027-03-01" and refused.admitted == ()
    assert work(raw) == [] and missed(raw) == []
    assert refused.cursor < berlin(2027, 3, 1, 8, 30)           # the cursor stays before the refused occurrence
    await store.forget("tg:7", "test")                          # the queue empties (pending work cancelled)
    clock.set(berlin(2027, 3, 1, 9, 15))
    [retried] = await producer.catch_up()
    assert [s for s, _ in retried.admitted] == ["clock:opening_brief:2027-03-01"]
    assert raw.execute("SELECT refused_key FROM schedule_cursors").fetchone()[0] is None
    assert missed(raw) == []


async def test_refused_until_its_grace_ends_is_recorded_missed(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 8, 0))
    producer = ClockProducer(store, [brief()], OWNER)
    await producer.catch_up()
    await store.admit_many(fill(store.capacity))
    for hour, minute in ((8, 30), (9, 30), (11, 0)):
        clock.set(berlin(2027, 3, 1, hour, minute))
        [result] = await producer.catch_up()
        assert result.refused == "clock:opening_brief:2027-03-01"
    clock.set(berlin(2027, 3, 1, 11, 31))                       # its grace has ended
    [result] = await producer.catch_up()
    assert result.refused is None and result.missed == (("2027-03-01", "capacity"),)
    assert missed(raw) == [("opening_brief", "2027-03-01", "capacity")]
    assert work(raw) == []
    # the next day's brief is admitted once the queue has room
    await store.forget("tg:7", "test")
    clock.set(berlin(2027, 3, 2, 8, 31))
    await producer.catch_up()
    assert [s for s, *_ in work(raw)] == ["clock:opening_brief:2027-03-02"]


# --------------------------------------------------------------------------------------------------------------
# a long outage
# --------------------------------------------------------------------------------------------------------------

async def test_an_outage_too_long_to_enumerate_skips_to_the_grace_window(store, clock, raw, monkeypatch):
    assert schedule_module.MAX_FIRE_TIMES == 100_000
    monkeypatch.setattr(schedule_module, "MAX_FIRE_TIMES", 1000)   # the same guard, reached in 1000 fire times
    every_minute = Schedule(name="minutely", cron="* * * * *", timezone="Europe/Berlin", prompt="tick",
                            grace=timedelta(minutes=10), catch_up="latest")
    clock.set(datetime(2027, 3, 1, 0, 0, tzinfo=UTC))
    producer = ClockProducer(store, [every_minute], OWNER)
    await producer.catch_up()
    clock.set(datetime(2027, 3, 3, 0, 0, tzinfo=UTC))           # 2 days down: 2880 fire times
    [result] = await producer.catch_up()
    assert result.missed[0] == ("2027-03-01T00:00:00Z/2027-03-02T23:50:00Z", "outage")
    assert [s for s, _ in result.admitted] == ["clock:minutely:2027-03-03T00:00:00Z"]
    assert [reason for _, reason in result.missed[1:]] == ["superseded"] * 9   # 23:51 .. 23:59 within the grace
    assert ("minutely", "2027-03-01T00:00:00Z/2027-03-02T23:50:00Z", "outage") in missed(raw)
    assert raw.execute("SELECT cursor FROM schedule_cursors").fetchone()[0] == "2027-03-03T00:00:00.000000Z"


# --------------------------------------------------------------------------------------------------------------
# DST over a whole year
# --------------------------------------------------------------------------------------------------------------

async def test_daily_schedules_over_2027_admit_one_occurrence_per_local_date(clock, tmp_path):
    schedules = [brief(), brief(name="night", cron="30 2 * * *", prompt="Night check")]
    store = await SqliteStore.open(tmp_path / "year.sqlite3", clock, capacity=10_000, debounce_ms=0)
    try:
        start, end = berlin(2027, 1, 1, 0, 0), berlin(2028, 1, 1, 0, 0)
        wakeups: list[tuple[datetime, str | None]] = [(start, None), (end, None)]
        for schedule in schedules:
            now = next_wakeup(schedule, start)
            while now is not None and now < end:
                wakeups.append((now, schedule.name))
                now = next_wakeup(schedule, now)
        # extra wake-ups at the repeated hour of the fall-back night: the second 02:30 must admit nothing
        wakeups += [(datetime(2027, 10, 31, 0, 30, tzinfo=UTC), None),
                    (datetime(2027, 10, 31, 1, 30, tzinfo=UTC), None)]
        producer = ClockProducer(store, schedules, OWNER)
        fired: dict[str, dict[str, datetime]] = {"opening_brief": {}, "night": {}}
        for moment, name in sorted(wakeups, key=lambda w: w[0]):
            clock.set(moment)
            for result in await producer.catch_up(name):
                for source, fire_time in result.admitted:
                    key = source.rsplit(":", 1)[1]
                    assert key not in fired[result.schedule], f"{source} admitted twice"
                    fired[result.schedule][key] = fire_time
        days = [(date(2027, 1, 1) + timedelta(days=i)).isoformat() for i in range(365)]
        for name, wall in (("opening_brief", (8, 30)), ("night", (2, 30))):
            assert sorted(fired[name]) == days, name
            local = {key: t.astimezone(BERLIN) for key, t in fired[name].items()}
            assert all(t.date().isoformat() == key for key, t in local.items())
            off = {key: (t.hour, t.minute) for key, t in local.items() if (t.hour, t.minute) != wall}
            if name == "night":   # on the spring-forward day 02:30 does not exist: it fires at 03:00, the gap's end
                assert off == {"2027-03-28": (3, 0)}
                assert fired[name]["2027-03-28"] == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
                assert fired[name]["2027-10-31"] == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)   # the first 02:30
            else:
                assert off == {}
        count = await store.db.read(lambda c: c.execute(
            "SELECT session, count(*) FROM work GROUP BY session ORDER BY session").fetchall())
        assert [tuple(r) for r in count] == [("clock:night", 365), ("clock:opening_brief", 365)]
        assert await store.missed_occurrences() == []
    finally:
        await store.close()


# --------------------------------------------------------------------------------------------------------------
# the APScheduler wake-up
# --------------------------------------------------------------------------------------------------------------

class BrokenWatcher(StockWatcher):
    fault: Exception | None = None

    async def check(self, fence=None):  # type: ignore[override]
        if self.fault is not None:
            self.faulted.set()
            raise self.fault
        return await super().check(fence)


async def test_scheduler_catches_up_at_start_and_each_job_only_wakes_its_producer(store, clock, raw):
    clock.set(berlin(2027, 3, 1, 9, 0))
    producer = ClockProducer(store, [brief(), rounds("latest")], OWNER)
    runner = producer_scheduler(producer, StockWatcher(store, OWNER), "*/15 * * * *", "Europe/Berlin")
    task = asyncio.create_task(runner.run())
    try:
        await asyncio.wait_for(runner.started.wait(), 10)
        # one catch-up at start: today's brief (08:30) and the 09:00 round are admitted
        assert sorted(s for s, *_ in work(raw)) == ["clock:opening_brief:2027-03-01",
                                                     "clock:rounds:2027-03-01T08:00:00Z"]
        scheduler = runner.scheduler
        assert scheduler is not None and scheduler.running
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {"clock:opening_brief", "clock:rounds", STOCK_JOB}
        for job in jobs.values():
            assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, None)
        assert type(scheduler._jobstores["default"]).__name__ == "MemoryJobStore"
        # a wake-up of the rounds job makes its producer plan from its cursor (simulated time: 10:00 is due)
        clock.set(berlin(2027, 3, 1, 10, 0, 5))
        jobs["clock:rounds"].modify(next_run_time=datetime.now(UTC))
        await until(store, lambda: len(work(raw)) == 3)
        assert "clock:rounds:2027-03-01T09:00:00Z" in [s for s, *_ in work(raw)]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not runner.scheduler.running                 # stopped cleanly on cancellation
    assert JOB_OPTIONS == {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


async def test_a_store_fault_waits_for_the_next_wake_up_but_a_bug_stops_the_scheduler(store, clock):
    clock.set(berlin(2027, 3, 1, 7, 0))
    watcher = BrokenWatcher(store, OWNER)
    watcher.faulted = asyncio.Event()
    runner = producer_scheduler(ClockProducer(store, [brief()], OWNER), watcher, "*/15 * * * *", "Europe/Berlin")
    task = asyncio.create_task(runner.run())
    await asyncio.wait_for(runner.started.wait(), 10)
    watcher.fault = StoreBusy("locked by another process")
    runner.scheduler.get_job(STOCK_JOB).modify(next_run_time=datetime.now(UTC))
    await asyncio.wait_for(watcher.faulted.wait(), 10)
    assert not task.done() and runner.scheduler.running   # logged; the next wake-up tries again
    watcher.fault = RuntimeError("a bug in a producer")
    runner.scheduler.get_job(STOCK_JOB).modify(next_run_time=datetime.now(UTC))
    with pytest.raises(RuntimeError, match="a bug in a producer"):
        await asyncio.wait_for(task, 10)
    assert not runner.scheduler.running


def test_a_wrong_stock_cron_names_the_stock_watcher(store):
    from producers.schedule import ScheduleError
    with pytest.raises(ScheduleError, match="stock_watch"):
        producer_scheduler(ClockProducer(store, [], None), StockWatcher(store, None), "*/15 * *", "Europe/Berlin")
    assert isinstance(producer_scheduler(ClockProducer(store, [], None), StockWatcher(store, None), "0 * * * 1-5",
                                         "Europe/Berlin"), ProducerScheduler)
