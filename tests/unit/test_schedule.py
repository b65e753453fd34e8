"""Clock producer (pure part): schedule parsing, keys, fire times over DST, catch-up plans. Simulated time only."""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from producers import schedule as sched
from producers.schedule import (
    CatchUp,
    Occurrence,
    Schedule,
    ScheduleError,
    fire_times,
    next_wakeup,
    occurrence_key,
    parse_schedules,
    plan_catch_up,
    trigger_for,
)

UTC = UTC
BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def make(name="job", cron="30 8 * * *", tz="Europe/Berlin", grace=timedelta(hours=3), catch_up="latest") -> Schedule:
    return Schedule(name=name, cron=cron, timezone=tz, prompt="do it", grace=grace, catch_up=catch_up)


def one(entry: dict, shop_timezone: str = "Europe/Berlin") -> Schedule:
    entry = {"prompt": "p", **entry}
    return parse_schedules([entry], shop_timezone=shop_timezone)[0]


class Producer:
    """Simulates the lead's wiring: cursor and admitted sources as the store would hold them (one commit per plan)."""

    def __init__(self, schedule: Schedule, cursor: datetime | None = None) -> None:
        self.schedule = schedule
        self.cursor = cursor
        self.admitted: list[str] = []
        self.missed: list[str] = []

    def wake(self, now: datetime) -> CatchUp:
        plan = plan_catch_up(self.schedule, self.cursor, now)
        for occ in plan.admit:
            assert occ.source not in self.admitted, f"{occ.source} admitted twice"
            self.admitted.append(occ.source)
        self.missed.extend(o.source for o in plan.missed)
        self.cursor = plan.cursor
        return plan

    def run(self, start: datetime, until: datetime, extra: list[datetime] = ()) -> None:
        """A live process: wakes at start, then at every next_wakeup (and every extra time) up to until."""
        extra = sorted(extra)
        now: datetime | None = start
        while now is not None and now <= until:
            self.wake(now)
            candidates = [t for t in (next_wakeup(self.schedule, now), *extra) if t is not None and t > now]
            now = min(candidates, default=None)


# --------------------------------------------------------------------------------------------------------------
# parse_schedules
# --------------------------------------------------------------------------------------------------------------

def test_default_opening_brief_is_added():
    [brief] = parse_schedules([], shop_timezone="Europe/Berlin")
    assert brief == Schedule(name="opening_brief", cron="30 8 * * *", timezone="Europe/Berlin",
                             prompt="Prepare the opening brief", grace=timedelta(hours=3), catch_up="latest")
    assert brief.daily


def test_own_opening_brief_replaces_the_default_and_order_is_kept():
    result = parse_schedules(
        [{"name": "stock_check", "cron": "0 */2 * * *", "prompt": "check"},
         {"name": "opening_brief", "cron": "0 7 * * *", "prompt": "brief", "timezone": "Europe/Rome"}],
        shop_timezone="Europe/Berlin")
    assert [s.name for s in result] == ["stock_check", "opening_brief"]
    assert result[1].cron == "0 7 * * *" and result[1].timezone == "Europe/Rome"


def test_fields_and_defaults():
    s = one({"name": "a-b_1", "cron": "  0   9 * *   mon-fri ", "grace": "90m", "catch_up": "each"},
            shop_timezone="America/New_York")
    assert s.cron == "0 9 * * mon-fri"
    assert s.timezone == "America/New_York"
    assert s.grace == timedelta(minutes=90)
    assert s.catch_up == "each"
    assert one({"name": "x", "cron": "* * * * *"}).grace == timedelta(hours=3)
    assert one({"name": "x", "cron": "* * * * *"}).catch_up == "latest"


@pytest.mark.parametrize("grace, expected", [
    (3600, timedelta(hours=1)), ("3h", timedelta(hours=3)), ("90m", timedelta(minutes=90)),
    ("45s", timedelta(seconds=45)), ("1h30m", timedelta(minutes=90)), ("2d", timedelta(days=2)),
    (" 10m ", timedelta(minutes=10)),
])
def test_grace_formats(grace, expected):
    assert one({"name": "x", "cron": "0 * * * *", "grace": grace}).grace == expected


@pytest.mark.parametrize("grace", [0, -5, "0s", "", "3 hours", "3H", "1.5h", "h", 1.5, True, None, [], "30m1h",
                                   "8d", 8 * 86400])
def test_bad_grace(grace):
    with pytest.raises(ScheduleError, match=r"schedule 'x': grace"):
        one({"name": "x", "cron": "0 * * * *", "grace": grace})


def test_unknown_field_names_the_field_and_the_schedule():
    with pytest.raises(ScheduleError, match=r"schedule 'brief2': unknown field 'timezon'"):
        one({"name": "brief2", "cron": "0 8 * * *", "timezon": "Europe/Berlin"})
    # a typo in `name` itself still names the unknown field, and the schedule by position
    with pytest.raises(ScheduleError, match=r"schedule #1: unknown field 'nmae'"):
        one({"nmae": "brief2", "cron": "0 8 * * *"})


@pytest.mark.parametrize("cron, why", [
    ("30 8 * *", "needs 5 fields"),
    ("30 8 * * * *", "needs 5 fields"),
    ("@daily", "needs 5 fields"),
    ("60 8 * * *", "minute value '60' is out of range"),
    ("30 24 * * *", "hour value '24' is out of range"),
    ("30 8 0 * *", "day of month value '0' is out of range"),
    ("30 8 * 13 *", "month value '13' is out of range"),
    ("30 8 * * 8", "day of week value '8' is out of range"),
    ("30 8 * * funday", "not valid crontab syntax"),
    ("30 8 * * xyz", "not a number or a 3-letter name"),
    ("mon 8 * * *", "minute value 'mon' is not a number"),
    ("*/0 8 * * *", "step in '\\*/0' must be at least 1"),
    ("*/90 * * * *", "step 90 .* larger than the field's range"),
    ("30 8-6 * * *", "runs backwards"),
    ("30 8 * * 1-", "not valid crontab syntax"),
    ("30 8 ,1 * *", "not valid crontab syntax"),
    ("30 8 1 * mon", "restricts both day of month and day of week"),
    ("0 0 30 2 *", "never fires"),
    ("0 0 31 4,6,9,11 *", "never fires"),
    ("30 8 last * *", "not valid crontab syntax"),
])
def test_bad_cron_names_the_cron(cron, why):
    with pytest.raises(ScheduleError, match=r"schedule 'x': cron .*" + why):
        one({"name": "x", "cron": cron})


@pytest.mark.parametrize("cron", [None, 5, ["30", "8"]])
def test_cron_must_be_text(cron):
    with pytest.raises(ScheduleError, match=r"schedule 'x': cron must be"):
        one({"name": "x", "cron": cron})


@pytest.mark.parametrize("tz", ["Mars/Olympus", "europe/berlin", "", "../etc/passwd", "/etc/localtime", "localtime",
                                "Europe", 1])
def test_bad_timezone_names_it(tz):
    with pytest.raises(ScheduleError, match=r"schedule 'x': timezone"):
        one({"name": "x", "cron": "0 8 * * *", "timezone": tz})


def test_bad_shop_timezone():
    with pytest.raises(ScheduleError, match=r"shop: timezone 'Nowhere/Town'"):
        parse_schedules([], shop_timezone="Nowhere/Town")


def test_duplicate_names():
    with pytest.raises(ScheduleError, match=r"schedule 'dup': the name is used by two schedules"):
        parse_schedules([{"name": "dup", "cron": "0 8 * * *", "prompt": "a"},
                         {"name": "dup", "cron": "0 9 * * *", "prompt": "b"}], shop_timezone="UTC")


@pytest.mark.parametrize("name", ["", "A", "brief!", "x" * 41, "über", None, 7, "a b"])
def test_bad_names(name):
    with pytest.raises(ScheduleError, match=r"schedule #1: name must be 1-40 characters"):
        one({"name": name, "cron": "0 8 * * *"})


def test_name_of_40_chars_is_fine():
    assert one({"name": "a" * 40, "cron": "0 8 * * *"}).name == "a" * 40


@pytest.mark.parametrize("entry, message", [
    ({"name": "x", "cron": "0 8 * * *", "prompt": "  "}, "prompt must be a non-empty string"),
    ({"name": "x", "cron": "0 8 * * *", "prompt": 3}, "prompt must be a non-empty string"),
    ({"name": "x", "cron": "0 8 * * *", "prompt": "p" * 4001}, "prompt is 4001 characters"),
    ({"name": "x", "cron": "0 8 * * *", "prompt": "p", "catch_up": "all"}, "catch_up must be 'latest' or 'each'"),
])
def test_other_field_errors(entry, message):
    with pytest.raises(ScheduleError, match=r"schedule 'x': " + message):
        parse_schedules([entry], shop_timezone="UTC")


def test_entry_must_be_a_table():
    with pytest.raises(ScheduleError, match=r"schedule #2: must be a table"):
        parse_schedules([{"name": "a", "cron": "0 8 * * *", "prompt": "p"}, "0 8 * * *"], shop_timezone="UTC")


def test_schedule_error_is_a_value_error():
    assert issubclass(ScheduleError, ValueError)


# --------------------------------------------------------------------------------------------------------------
# daily, keys, source identities
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cron, daily", [
    ("30 8 * * *", True), ("0 0 * * *", True), ("30 2 * * mon-fri", True), ("0 9 1 * *", True),
    ("0-0 9 * * *", True), ("0 9,21 * * *", False), ("*/15 * * * *", False), ("0 * * * *", False),
    ("30 8-9 * * *", False), ("0,30 8 * * *", False),
])
def test_daily_rule(cron, daily):
    assert make(cron=cron).daily is daily


def test_keys_local_date_for_daily_and_instant_for_others():
    daily = make(cron="30 0 * * *")
    # 00:30 in Berlin on 2027-06-02 is 22:30 UTC on 2027-06-01: the key is the local date
    assert occurrence_key(daily, berlin(2027, 6, 2, 0, 30)) == "2027-06-02"
    quarter = make(cron="*/15 * * * *")
    assert occurrence_key(quarter, berlin(2027, 6, 2, 0, 30)) == "2027-06-01T22:30:00Z"
    occ = Occurrence(schedule="opening_brief", key="2027-06-02", fire_time=berlin(2027, 6, 2, 8, 30))
    assert occ.source == "clock:opening_brief:2027-06-02"


def test_quarter_hour_fire_times_and_keys():
    quarter = make(cron="*/15 * * * *")
    times = fire_times(quarter, utc(2027, 6, 1, 9, 0), utc(2027, 6, 1, 10, 0))
    assert [occurrence_key(quarter, t) for t in times] == [
        "2027-06-01T09:15:00Z", "2027-06-01T09:30:00Z", "2027-06-01T09:45:00Z", "2027-06-01T10:00:00Z"]
    assert all(t.tzinfo is UTC for t in times)


def test_fire_times_interval_is_open_below_and_closed_above():
    s = make(cron="0 * * * *", tz="UTC")
    assert fire_times(s, utc(2027, 1, 1, 9), utc(2027, 1, 1, 11)) == [utc(2027, 1, 1, 10), utc(2027, 1, 1, 11)]
    assert fire_times(s, utc(2027, 1, 1, 11), utc(2027, 1, 1, 11)) == []
    assert fire_times(s, utc(2027, 1, 1, 12), utc(2027, 1, 1, 11)) == []


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="aware"):
        fire_times(make(), datetime(2027, 1, 1), utc(2027, 1, 2))
    with pytest.raises(ValueError, match="aware"):
        plan_catch_up(make(), None, datetime(2027, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        occurrence_key(make(), datetime(2027, 1, 1))


def test_fire_times_is_bounded(monkeypatch):
    every_minute = make(cron="* * * * *", tz="UTC")
    monkeypatch.setattr(sched, "MAX_FIRE_TIMES", 120)
    assert len(fire_times(every_minute, utc(2027, 1, 1, 0), utc(2027, 1, 1, 2))) == 120
    with pytest.raises(ScheduleError, match=r"more than 120 fire times"):
        fire_times(every_minute, utc(2027, 1, 1, 0), utc(2027, 1, 1, 2, 1))


def test_default_bound_is_100_000():
    assert sched.MAX_FIRE_TIMES == 100_000


# --------------------------------------------------------------------------------------------------------------
# Crontab semantics that differ from APScheduler's own from_crontab
# --------------------------------------------------------------------------------------------------------------

def _weekdays(cron: str) -> set[str]:
    s = make(cron=cron)
    times = fire_times(s, berlin(2027, 6, 6, 12), berlin(2027, 6, 20, 12))  # two full weeks
    return {t.astimezone(BERLIN).strftime("%a") for t in times}


@pytest.mark.parametrize("cron, days", [
    ("30 8 * * 1-5", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
    ("30 8 * * mon-fri", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
    ("30 8 * * 0", {"Sun"}),
    ("30 8 * * 7", {"Sun"}),
    ("30 8 * * SUN", {"Sun"}),
    ("30 8 * * 6,0", {"Sat", "Sun"}),
    ("30 8 * * fri-sun", {"Fri", "Sat", "Sun"}),
    ("30 8 * * 5-7", {"Fri", "Sat", "Sun"}),
    ("30 8 * * */2", {"Sun", "Tue", "Thu", "Sat"}),
    ("30 8 * * 0-6", {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}),
])
def test_day_of_week_follows_crontab_not_apscheduler(cron, days):
    assert _weekdays(cron) == days


def test_trigger_for_is_an_apscheduler_cron_trigger_in_the_schedule_zone():
    from apscheduler.triggers.cron import CronTrigger
    trigger = trigger_for(make(cron="30 8 * * 1"))
    assert isinstance(trigger, CronTrigger)
    assert trigger.timezone == BERLIN
    first = trigger.get_next_fire_time(None, berlin(2027, 6, 1, 0, 0))  # a Tuesday
    assert first.astimezone(BERLIN) == datetime(2027, 6, 7, 8, 30, tzinfo=BERLIN)  # the next Monday


def test_day_of_month_star_step_with_weekday_ands_like_cron():
    s = make(cron="30 8 */2 * mon")  # odd days of month that are Mondays (cron: '*' first char means AND)
    times = fire_times(s, berlin(2027, 6, 1), berlin(2027, 8, 1))
    local = [t.astimezone(BERLIN) for t in times]
    assert local and all(t.weekday() == 0 and t.day % 2 == 1 for t in local)


def test_month_names_and_steps():
    s = make(cron="0 9 1 jan-dec/3 *", tz="UTC")
    times = fire_times(s, utc(2027, 1, 1), utc(2028, 1, 1))
    assert [t.month for t in times] == [1, 4, 7, 10]


def test_feb_29_fires_only_in_leap_years():
    s = make(cron="0 9 29 2 *", tz="UTC")
    assert [t.year for t in fire_times(s, utc(2025, 1, 1), utc(2033, 1, 1))] == [2028, 2032]
    assert next_wakeup(s, utc(2025, 1, 1)) == utc(2028, 2, 29, 9)


# --------------------------------------------------------------------------------------------------------------
# DST (Europe/Berlin, 2027: spring forward on 28 March, fall back on 31 October)
# --------------------------------------------------------------------------------------------------------------

YEAR_START = datetime(2027, 1, 1, tzinfo=BERLIN)
YEAR_END = datetime(2027, 12, 31, 23, 59, 59, tzinfo=BERLIN)
ALL_DATES_2027 = [(date(2027, 1, 1) + timedelta(days=i)).isoformat() for i in range(365)]


@pytest.mark.parametrize("cron", ["30 8 * * *", "30 2 * * *"])
def test_daily_schedule_over_2027_gives_one_occurrence_per_local_date(cron):
    s = make(cron=cron)
    times = fire_times(s, YEAR_START, YEAR_END)
    keys = [occurrence_key(s, t) for t in times]
    assert len(times) == 365
    assert keys == ALL_DATES_2027


def test_daily_0230_on_dst_days():
    s = make(cron="30 2 * * *")
    times = {occurrence_key(s, t): t for t in fire_times(s, YEAR_START, YEAR_END)}
    # spring forward: 02:30 does not exist, it fires at the first instant after the gap, 03:00 CEST = 01:00 UTC
    assert times["2027-03-28"] == utc(2027, 3, 28, 1, 0)
    assert times["2027-03-28"].astimezone(BERLIN).strftime("%H:%M %Z") == "03:00 CEST"
    # fall back: 02:30 happens twice, it fires once, at the first (02:30 CEST = 00:30 UTC)
    assert times["2027-10-31"] == utc(2027, 10, 31, 0, 30)
    day = fire_times(s, berlin(2027, 10, 30, 12), berlin(2027, 11, 1, 0))
    assert day == [utc(2027, 10, 31, 0, 30)]


def test_fall_back_repeat_is_dropped_across_calls_too():
    s = make(cron="30 2 * * *")
    # a wake-up between the two 02:30s must not produce the second one
    assert fire_times(s, utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 2, 0)) == []
    assert next_wakeup(s, utc(2027, 10, 31, 0, 30)) == utc(2027, 11, 1, 1, 30)
    plan = plan_catch_up(s, utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 1, 45))
    assert plan.admit == [] and plan.missed == [] and plan.cursor == utc(2027, 10, 31, 0, 30)


def test_quarter_hourly_over_dst_days_keeps_every_instant():
    s = make(cron="*/15 * * * *")
    fall = fire_times(s, berlin(2027, 10, 31, 0, 0), berlin(2027, 11, 1, 0, 0))
    spring = fire_times(s, berlin(2027, 3, 28, 0, 0), berlin(2027, 3, 29, 0, 0))
    assert len(fall) == len(set(fall)) == 25 * 4  # 02:00-02:45 happen twice: 8 distinct instants
    assert len(spring) == len(set(spring)) == 23 * 4
    keys = [occurrence_key(s, t) for t in fall]
    assert len(set(keys)) == len(keys) and "2027-10-31T00:30:00Z" in keys and "2027-10-31T01:30:00Z" in keys


LONDON = ZoneInfo("Europe/London")     # 2027: springs forward 01:00 -> 02:00 on 28 March, falls back 31 October
NEW_YORK = ZoneInfo("America/New_York")  # 2027: 02:00 -> 03:00 on 14 March, 02:00 -> 01:00 on 7 November


@pytest.mark.parametrize("zone, cron, day, fires", [
    (LONDON, "30 1 * * *", date(2027, 3, 28), "02:00 BST"),       # daily, in the skipped hour
    (LONDON, "30 1 * * 0", date(2027, 3, 28), "02:00 BST"),       # weekly (Sundays), in the skipped hour
    (NEW_YORK, "30 2 * * *", date(2027, 3, 14), "03:00 EDT"),
    (NEW_YORK, "30 2 * * 0", date(2027, 3, 14), "03:00 EDT"),
])
def test_formerly_bug_a_schedule_in_the_spring_gap_fires_once_at_the_first_instant_after_it(zone, cron, day, fires):
    s = make(cron=cron, tz=zone.key)
    start = datetime(day.year, day.month, day.day, tzinfo=zone) - timedelta(days=8)
    times = fire_times(s, start, start + timedelta(days=16))
    that_day = [t for t in times if t.astimezone(zone).date() == day]
    assert [t.astimezone(zone).strftime("%H:%M %Z") for t in that_day] == [fires]
    assert occurrence_key(s, that_day[0]) == day.isoformat()
    assert len({occurrence_key(s, t) for t in times}) == len(times) == (16 if cron.endswith("*") else 3)
    # whatever the window's start, the fire is not lost: a wake-up inside the gap hour still gets it
    just_before = that_day[0] - timedelta(seconds=1)
    assert fire_times(s, just_before, that_day[0] + timedelta(hours=2)) == that_day
    assert next_wakeup(s, just_before) == that_day[0]
    assert trigger_for(s).get_next_fire_time(None, just_before).astimezone(UTC) == that_day[0]
    # and the live producer, woken only by the trigger, admits it once
    producer = Producer(s, cursor=start.astimezone(UTC))
    producer.run(start.astimezone(UTC), (start + timedelta(days=16)).astimezone(UTC))
    assert producer.admitted.count(f"clock:job:{day.isoformat()}") == 1 and producer.missed == []


@pytest.mark.parametrize("zone, cron, day, fires", [
    (LONDON, "30 1 * * *", date(2027, 10, 31), "01:30 BST"),      # 01:30 happens twice: the first one only
    (LONDON, "30 1 * * 0", date(2027, 10, 31), "01:30 BST"),
    (NEW_YORK, "30 1 * * *", date(2027, 11, 7), "01:30 EDT"),
    (NEW_YORK, "30 1 * * 0", date(2027, 11, 7), "01:30 EDT"),
])
def test_a_schedule_in_the_autumn_repeat_fires_once(zone, cron, day, fires):
    s = make(cron=cron, tz=zone.key)
    start = datetime(day.year, day.month, day.day, tzinfo=zone) - timedelta(days=8)
    times = fire_times(s, start, start + timedelta(days=16))
    that_day = [t for t in times if t.astimezone(zone).date() == day]
    assert [t.astimezone(zone).strftime("%H:%M %Z") for t in that_day] == [fires]
    assert occurrence_key(s, that_day[0]) == day.isoformat()
    producer = Producer(s, cursor=start.astimezone(UTC))
    producer.run(start.astimezone(UTC), (start + timedelta(days=16)).astimezone(UTC))
    assert producer.admitted.count(f"clock:job:{day.isoformat()}") == 1 and producer.missed == []


@pytest.mark.parametrize("cron", ["30 8 * * *", "30 2 * * *"])
def test_live_process_over_2027_admits_each_local_date_once(cron):
    s = make(cron=cron)
    producer = Producer(s, cursor=YEAR_START.astimezone(UTC))
    # extra wake-ups every 10 minutes around both DST changes (e.g. a spurious APScheduler wake-up) add nothing
    extra = [utc(2027, month, day, 0, 0) + timedelta(minutes=10 * i)
             for month, day in ((3, 28), (10, 31)) for i in range(24)]
    producer.run(YEAR_START.astimezone(UTC), YEAR_END.astimezone(UTC), extra)
    assert producer.admitted == [f"clock:job:{d}" for d in ALL_DATES_2027]
    assert producer.missed == []


# --------------------------------------------------------------------------------------------------------------
# Catch-up after downtime
# --------------------------------------------------------------------------------------------------------------

def test_down_from_0800_to_1000_admits_the_0830_brief_once():
    [brief] = parse_schedules([], shop_timezone="Europe/Berlin")
    producer = Producer(brief)
    producer.run(berlin(2027, 6, 1, 7, 0), berlin(2027, 6, 2, 8, 0))  # up: admits 1 June, then goes down at 08:00
    assert producer.admitted == ["clock:opening_brief:2027-06-01"]
    assert producer.cursor == berlin(2027, 6, 1, 8, 30)

    plan = producer.wake(berlin(2027, 6, 2, 10, 0))  # restart at 10:00 local
    assert [o.source for o in plan.admit] == ["clock:opening_brief:2027-06-02"]
    assert plan.admit[0].fire_time == berlin(2027, 6, 2, 8, 30) == utc(2027, 6, 2, 6, 30)
    assert plan.missed == []
    assert plan.cursor == berlin(2027, 6, 2, 8, 30)

    again = producer.wake(berlin(2027, 6, 2, 10, 0))  # same now, returned cursor: nothing
    assert again == CatchUp(admit=[], missed=[], cursor=berlin(2027, 6, 2, 8, 30))
    producer.run(berlin(2027, 6, 2, 10, 0), berlin(2027, 6, 3, 12, 0))
    assert producer.admitted == [f"clock:opening_brief:2027-06-0{d}" for d in (1, 2, 3)]


def test_down_past_the_grace_records_the_brief_as_missed():
    [brief] = parse_schedules([], shop_timezone="Europe/Berlin")
    plan = plan_catch_up(brief, berlin(2027, 6, 1, 8, 30), berlin(2027, 6, 3, 12, 0))  # grace 3h: 09:00 horizon
    assert plan.admit == []
    assert [o.source for o in plan.missed] == ["clock:opening_brief:2027-06-02", "clock:opening_brief:2027-06-03"]
    assert plan.cursor == berlin(2027, 6, 3, 8, 30)


def test_hourly_each_admits_every_occurrence_within_grace_and_misses_older():
    hourly = make(name="hourly", cron="0 * * * *", tz="UTC", grace=timedelta(hours=2), catch_up="each")
    producer = Producer(hourly, cursor=utc(2027, 6, 1, 9, 0))  # last fire before the crash: 09:00
    plan = producer.wake(utc(2027, 6, 1, 15, 5))  # restart at 15:05: horizon 13:05
    assert [o.key for o in plan.admit] == ["2027-06-01T14:00:00Z", "2027-06-01T15:00:00Z"]
    assert [o.source for o in plan.missed] == [f"clock:hourly:2027-06-01T{h}:00:00Z" for h in (10, 11, 12, 13)]
    assert plan.cursor == utc(2027, 6, 1, 15, 0)
    assert producer.wake(utc(2027, 6, 1, 15, 5)) == CatchUp(admit=[], missed=[], cursor=utc(2027, 6, 1, 15, 0))
    assert producer.wake(utc(2027, 6, 1, 15, 30)).admit == []
    assert [o.key for o in producer.wake(utc(2027, 6, 1, 16, 0)).admit] == ["2027-06-01T16:00:00Z"]
    assert len(producer.admitted) == len(set(producer.admitted)) == 3


def test_grace_edge_is_inclusive():
    hourly = make(cron="0 * * * *", tz="UTC", grace=timedelta(hours=2), catch_up="each")
    plan = plan_catch_up(hourly, utc(2027, 6, 1, 9), utc(2027, 6, 1, 13))  # horizon exactly 11:00
    assert [o.fire_time.hour for o in plan.admit] == [11, 12, 13]
    assert [o.fire_time.hour for o in plan.missed] == [10]


def test_hourly_latest_admits_only_the_newest_and_lists_superseded_as_missed():
    hourly = make(name="h", cron="0 * * * *", tz="UTC", grace=timedelta(hours=3), catch_up="latest")
    now = utc(2027, 6, 1, 15, 5)
    plan = plan_catch_up(hourly, utc(2027, 6, 1, 9, 0), now)
    assert [o.key for o in plan.admit] == ["2027-06-01T15:00:00Z"]
    assert [o.fire_time.hour for o in plan.missed] == [10, 11, 12, 13, 14]
    superseded = [o for o in plan.missed if o.fire_time >= now - hourly.grace]
    assert [o.fire_time.hour for o in superseded] == [13, 14]


def test_new_schedule_starts_at_now_minus_grace():
    [brief] = parse_schedules([], shop_timezone="Europe/Berlin")
    plan = plan_catch_up(brief, None, berlin(2027, 6, 2, 10, 0))
    assert [o.key for o in plan.admit] == ["2027-06-02"] and plan.missed == []
    late = plan_catch_up(brief, None, berlin(2027, 6, 2, 12, 0))  # 08:30 is older than 12:00 - 3h
    assert late == CatchUp(admit=[], missed=[], cursor=berlin(2027, 6, 2, 9, 0))
    # the next plan from that cursor finds nothing until tomorrow's brief
    assert plan_catch_up(brief, late.cursor, berlin(2027, 6, 2, 23, 0)).admit == []
    assert [o.key for o in plan_catch_up(brief, late.cursor, berlin(2027, 6, 3, 8, 30)).admit] == ["2027-06-03"]


def test_clock_going_back_never_moves_the_cursor_back():
    s = make(cron="0 * * * *", tz="UTC")
    plan = plan_catch_up(s, utc(2027, 6, 1, 12), utc(2027, 6, 1, 11, 30))
    assert plan == CatchUp(admit=[], missed=[], cursor=utc(2027, 6, 1, 12))


def test_capacity_refusal_replanned_from_an_earlier_cursor_gives_the_same_identity():
    """The lead keeps the cursor before a refused occurrence; the next plan names the same occurrence again."""
    hourly = make(name="h", cron="0 * * * *", tz="UTC", grace=timedelta(hours=2), catch_up="each")
    first = plan_catch_up(hourly, utc(2027, 6, 1, 12), utc(2027, 6, 1, 14, 1))
    refused = first.admit[1]  # say 14:00 was refused for capacity
    kept_cursor = first.admit[0].fire_time
    retry = plan_catch_up(hourly, kept_cursor, utc(2027, 6, 1, 14, 20))
    assert retry.admit == [refused]


def test_next_wakeup():
    [brief] = parse_schedules([], shop_timezone="Europe/Berlin")
    assert next_wakeup(brief, berlin(2027, 6, 2, 8, 0)) == berlin(2027, 6, 2, 8, 30)
    assert next_wakeup(brief, berlin(2027, 6, 2, 8, 30)) == berlin(2027, 6, 3, 8, 30)  # strictly after now
    assert next_wakeup(brief, berlin(2027, 6, 2, 8, 30)).tzinfo is UTC
    assert next_wakeup(make(cron="30 2 * * *"), utc(2027, 3, 27, 12)) == utc(2027, 3, 28, 1, 0)   # the gap's end
