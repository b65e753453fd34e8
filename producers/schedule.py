"""The clock producer's pure part: schedules from the shop file, their fire times, and catch-up plans.

APScheduler is only the wake-up call (docs/contracts.md, "Facts at the edges"): it never tells a job its fire time and
forgets fires missed while the process was down. So the identity of a clock occurrence is computed here, from the
trigger's fire times between a cursor (stored by the caller) and now: `clock:<schedule>:<key>`, where the key is the
scheduled instant as `YYYY-MM-DDTHH:MM:SSZ`, or, for a schedule that fires at most once a day, the local date
`YYYY-MM-DD` in the schedule's time zone.

Crontab text is parsed here with standard (Vixie) cron semantics and handed to APScheduler in a normalised form,
because `CronTrigger.from_crontab` differs from cron in two places:

- day of week: APScheduler 3.x counts 0 as Monday, cron counts 0 (and 7) as Sunday. Day-of-week fields are
  translated to APScheduler's weekday names, so `30 8 * * 1-5` means Monday to Friday as in any crontab.
- day of month and day of week both restricted: cron fires when *either* matches, APScheduler when *both* match.
  Such a cron is refused (name one of the two); when either field starts with `*`, both agree (they AND).

Every function here is pure: no clock is read, `now` is always passed in (aware datetimes only).
"""
from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

__all__ = [
    "CatchUp",
    "DEFAULT_GRACE",
    "MAX_FIRE_TIMES",
    "Occurrence",
    "Schedule",
    "ScheduleError",
    "fire_times",
    "next_wakeup",
    "occurrence_key",
    "parse_schedules",
    "plan_catch_up",
    "trigger_for",
]

UTC = UTC

MAX_FIRE_TIMES = 100_000
"""fire_times refuses to produce more than this many fire times in one call."""

DEFAULT_GRACE = timedelta(hours=3)
"""Grace of a schedule that names none (and of the default opening brief)."""

MIN_GRACE = timedelta(seconds=1)
MAX_GRACE = timedelta(days=7)
MAX_PROMPT_CHARS = 4000

OPENING_BRIEF = "opening_brief"
# The weekly review (worker/review.py writes it from the records, without a model): Monday 08:00 shop time unless
# the shop file has a schedule of this name; a start within half a day of it still runs it.
WEEKLY_REVIEW = "weekly_review"


def weekly_review_default(shop_timezone: str) -> Schedule:
    return Schedule(name=WEEKLY_REVIEW, cron="0 8 * * 1", timezone=shop_timezone, prompt="Weekly review",
                    grace=timedelta(hours=12), catch_up="latest")

_NAME_RE = re.compile(r"[a-z0-9_-]{1,40}")
_GRACE_RE = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})
_KNOWN_FIELDS = ("name", "cron", "timezone", "prompt", "grace", "catch_up")


class ScheduleError(ValueError):
    """A schedule of the shop file is wrong; the message names the schedule and the field."""


@dataclass(frozen=True)
class Schedule:
    name: str
    cron: str
    timezone: str
    prompt: str
    grace: timedelta
    catch_up: Literal["latest", "each"] = "latest"

    @property
    def daily(self) -> bool:
        """Fires at most once per local day: the cron's minute and hour fields each allow exactly one value.

        Such a cron matches one wall-clock time a day. On a DST fall-back day that wall time happens twice; the
        second is dropped (fire_times keeps the first), and on a spring-forward day a time in the gap fires once, at
        the first instant after the gap (as cron does). Its occurrences are keyed by local date.
        """
        return _compile_cron(self.cron).daily

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


@dataclass(frozen=True)
class Occurrence:
    schedule: str
    key: str
    fire_time: datetime  # aware UTC

    @property
    def source(self) -> str:
        return f"clock:{self.schedule}:{self.key}"


@dataclass(frozen=True)
class CatchUp:
    admit: list[Occurrence]
    missed: list[Occurrence]
    cursor: datetime  # aware UTC


# --------------------------------------------------------------------------------------------------------------
# Crontab parsing (standard cron semantics) and normalisation for APScheduler
# --------------------------------------------------------------------------------------------------------------

_MONTH_NAMES = {name: i for i, name in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_DOW_NAMES = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# cron weekday number (0 = Sunday) -> APScheduler weekday name
_APS_WEEKDAY = {0: "sun", 1: "mon", 2: "tue", 3: "wed", 4: "thu", 5: "fri", 6: "sat"}

# (label, lowest, highest for "*", highest accepted, names)
_FIELDS = (
    ("minute", 0, 59, 59, None),
    ("hour", 0, 23, 23, None),
    ("day of month", 1, 31, 31, None),
    ("month", 1, 12, 12, _MONTH_NAMES),
    ("day of week", 0, 6, 7, _DOW_NAMES),  # 7 is Sunday too, as in cron
)

_ITEM_RE = re.compile(
    r"(?P<base>\*|(?P<first>[0-9]+|[a-z]{3})(?:-(?P<last>[0-9]+|[a-z]{3}))?)"  # *, 5, mon, 1-5, mon-fri
    r"(?:/(?P<step>[0-9]+))?"  # optional step
)


@dataclass(frozen=True)
class _Cron:
    aps_expr: str  # the five fields as APScheduler must read them
    daily: bool
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()   # cron numbering: 0 = Sunday

    def matches_date(self, day: date) -> bool:
        """The day-of-month, month and weekday fields all allow `day` (one of the two day fields is `*`)."""
        return day.day in self.days and day.month in self.months and day.isoweekday() % 7 in self.weekdays

    def matches_wall_time(self, local: datetime) -> bool:
        return local.minute in self.minutes and local.hour in self.hours


class _CronError(ScheduleError):
    """A crontab fault, without the schedule's name (parse_schedules adds it)."""


def _field_value(text: str, label: str, low: int, high: int, names: dict[str, int] | None) -> int:
    if text.isdigit():
        if len(text) > 4:
            raise _CronError(f"{label} value {text!r} is out of range {low}-{high}")
        value = int(text)
    elif names is not None and text in names:
        value = names[text]
    else:
        raise _CronError(f"{label} value {text!r} is not a number" + (" or a 3-letter name" if names else ""))
    if not low <= value <= high:
        raise _CronError(f"{label} value {text!r} is out of range {low}-{high}")
    return value


def _parse_field(text: str, label: str, low: int, star_high: int, high: int, names: dict[str, int] | None) -> set[int]:
    values: set[int] = set()
    if not text:
        raise _CronError(f"{label} field is empty")
    for item in text.lower().split(","):
        match = _ITEM_RE.fullmatch(item)
        if match is None:
            raise _CronError(f"{label} item {item!r} is not valid crontab syntax")
        step = int(match["step"]) if match["step"] is not None else None
        if match["base"] == "*":
            first, last = low, star_high
        else:
            first = _field_value(match["first"], label, low, high, names)
            if match["last"] is not None:
                last = _field_value(match["last"], label, low, high, names)
                if label == "day of week" and last == 0 and first > 0:
                    last = 7  # "fri-sun"
                if first > last:
                    raise _CronError(f"{label} range {item!r} runs backwards")
            elif step is not None:
                last = star_high  # "5/15" means 5 to the end, every 15
            else:
                last = first
        if step is not None:
            if step == 0:
                raise _CronError(f"{label} step in {item!r} must be at least 1")
            if step > star_high - low:
                raise _CronError(
                    f"{label} step {step} in {item!r} is larger than the field's range {low}-{star_high}"
                    " (cron steps do not carry over into the next hour or day)")
        values.update(range(first, last + 1, step or 1))
    return values


def _render(values: set[int], low: int, high: int) -> str:
    if values == set(range(low, high + 1)):
        return "*"
    return ",".join(str(v) for v in sorted(values))


@lru_cache(maxsize=256)
def _compile_cron(cron: str) -> _Cron:
    parts = cron.split()
    if len(parts) != 5:
        raise _CronError(f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}")
    sets = [_parse_field(part, label, low, star_high, high, names)
            for part, (label, low, star_high, high, names) in zip(parts, _FIELDS)]
    minutes, hours, days, months, weekdays = sets
    weekdays = {0 if d == 7 else d for d in weekdays}

    dom_text, dow_text = parts[2], parts[4]
    if not dom_text.startswith("*") and not dow_text.startswith("*"):
        raise _CronError(
            "restricts both day of month and day of week; crontab fires when either matches and the scheduler when "
            "both match, so use only one of them (set the other to *)")
    # A day of month that no month of the cron has (e.g. 30 2) never fires.
    if not any(day <= calendar.monthrange(2024, month)[1] for month in months for day in days):
        raise _CronError("never fires: no month of the cron has that day of month")

    dow_expr = "*" if weekdays == set(range(7)) else ",".join(_APS_WEEKDAY[d] for d in sorted(weekdays))
    aps_expr = " ".join([
        _render(minutes, 0, 59),
        _render(hours, 0, 23),
        _render(days, 1, 31),
        _render(months, 1, 12),
        dow_expr,
    ])
    return _Cron(aps_expr=aps_expr, daily=len(minutes) == 1 and len(hours) == 1, minutes=frozenset(minutes),
                 hours=frozenset(hours), days=frozenset(days), months=frozenset(months),
                 weekdays=frozenset(weekdays))


# --------------------------------------------------------------------------------------------------------------
# Parsing the shop file's [[schedule]] entries
# --------------------------------------------------------------------------------------------------------------

def _zone(text: Any, where: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"{where}: timezone must be an IANA time zone name such as 'Europe/Berlin', got {text!r}")
    key = text.strip()
    try:
        if key in _NOT_ZONES:  # files in the zoneinfo directory that are not IANA zones of a place
            raise ZoneInfoNotFoundError(key)
        ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"{where}: timezone {key!r} is not a known IANA time zone (for example 'Europe/Berlin')") from None
    return key


def _grace(value: Any, where: str) -> timedelta:
    if isinstance(value, timedelta):
        grace = value
    elif isinstance(value, bool):
        raise ScheduleError(f"{where}: grace must be seconds or a duration like '3h', '90m', '45s', got {value!r}")
    elif isinstance(value, int):
        grace = timedelta(seconds=value)
    elif isinstance(value, str):
        match = _GRACE_RE.fullmatch(value.strip())
        if match is None or not value.strip():
            raise ScheduleError(
                f"{where}: grace {value!r} is not a duration; write seconds as a number or a string like "
                "'3h', '90m', '45s' or '1h30m'")
        d, h, m, s = (int(g) if g else 0 for g in match.groups())
        grace = timedelta(days=d, hours=h, minutes=m, seconds=s)
    else:
        raise ScheduleError(f"{where}: grace must be seconds or a duration like '3h', '90m', '45s', got {value!r}")
    if not MIN_GRACE <= grace <= MAX_GRACE:
        raise ScheduleError(
            f"{where}: grace {value!r} must be between 1 second and 7 days (it is how late a fire may still run; "
            "keep it well above a few seconds, or a late wake-up records the fire as missed)")
    return grace


def _schedule(entry: Any, index: int, shop_timezone: str) -> Schedule:
    where = f"schedule #{index + 1}"
    if not isinstance(entry, dict):
        raise ScheduleError(f"{where}: must be a table of fields, got {type(entry).__name__}")

    name = entry.get("name")
    name_ok = isinstance(name, str) and _NAME_RE.fullmatch(name) is not None
    if name_ok:
        where = f"schedule {name!r}"

    unknown = [key for key in entry if key not in _KNOWN_FIELDS]
    if unknown:
        raise ScheduleError(
            f"{where}: unknown field {str(unknown[0])!r} (known fields: {', '.join(_KNOWN_FIELDS)})")
    if not name_ok or not isinstance(name, str):
        raise ScheduleError(
            f"{where}: name must be 1-40 characters of a-z, 0-9, '_' and '-', got {name!r}")

    cron = entry.get("cron")
    if not isinstance(cron, str):
        raise ScheduleError(f"{where}: cron must be a 5-field crontab string such as '30 8 * * *', got {cron!r}")
    cron = " ".join(cron.split())
    try:
        _compile_cron(cron)
    except _CronError as exc:
        raise ScheduleError(f"{where}: cron {cron!r} {exc}") from None

    zone = _zone(entry["timezone"], where) if "timezone" in entry else shop_timezone

    prompt = entry.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ScheduleError(f"{where}: prompt must be a non-empty string (the work to do)")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ScheduleError(f"{where}: prompt is {len(prompt)} characters, at most {MAX_PROMPT_CHARS} are allowed")

    grace = _grace(entry["grace"], where) if "grace" in entry else DEFAULT_GRACE

    catch_up = entry.get("catch_up", "latest")
    if catch_up not in ("latest", "each"):
        raise ScheduleError(f"{where}: catch_up must be 'latest' or 'each', got {catch_up!r}")

    return Schedule(name=name, cron=cron, timezone=zone, prompt=prompt, grace=grace, catch_up=catch_up)


def parse_schedules(entries: list[dict[str, object]] | None, *, shop_timezone: str) -> list[Schedule]:
    """Validate the shop file's `[[schedule]]` entries; add the default opening brief unless one is named so.

    Raises ScheduleError naming the schedule and the field at the first fault.
    """
    shop_zone = _zone(shop_timezone, "shop")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ScheduleError(f"schedule must be a list of [[schedule]] tables, got {type(entries).__name__}")
    schedules: list[Schedule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        schedule = _schedule(entry, index, shop_zone)
        if schedule.name in seen:
            raise ScheduleError(f"schedule {schedule.name!r}: the name is used by two schedules; names must be unique")
        seen.add(schedule.name)
        schedules.append(schedule)
    if OPENING_BRIEF not in seen:
        schedules.append(Schedule(name=OPENING_BRIEF, cron="30 8 * * *", timezone=shop_zone,
                                  prompt="Prepare the opening brief", grace=DEFAULT_GRACE, catch_up="latest"))
    return schedules


# --------------------------------------------------------------------------------------------------------------
# Fire times, keys, catch-up
# --------------------------------------------------------------------------------------------------------------

def _aware(moment: datetime, name: str) -> datetime:
    if not isinstance(moment, datetime) or moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def _cron_trigger(schedule: Schedule) -> CronTrigger:
    """APScheduler's own reading of the cron (fire_times corrects it on spring-forward days)."""
    return CronTrigger.from_crontab(_compile_cron(schedule.cron).aps_expr, timezone=ZoneInfo(schedule.timezone))


class ShopCronTrigger(CronTrigger):
    """A CronTrigger that wakes the process at the fire times `fire_times` gives (`next_wakeup`), so a time that
    does not exist on a spring-forward day wakes it at the first instant after the gap, as cron does."""

    schedule: Schedule

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        start = previous_fire_time if previous_fire_time is not None else now - timedelta(microseconds=1)
        found = next_wakeup(self.schedule, start)
        return found.astimezone(self.timezone) if found is not None else None


def trigger_for(schedule: Schedule) -> CronTrigger:
    """The APScheduler trigger of a schedule: a wake-up call only, never the source of an identity."""
    trigger = ShopCronTrigger.from_crontab(_compile_cron(schedule.cron).aps_expr,
                                           timezone=ZoneInfo(schedule.timezone))
    trigger.schedule = schedule
    return trigger


def _exists(local: datetime, zone: ZoneInfo) -> bool:
    """False for a wall-clock time skipped by a spring-forward change."""
    return local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None)


def _gap_end(local: datetime, zone: ZoneInfo) -> datetime:
    """The first instant after the gap that swallows the nonexistent wall time `local` (aware UTC, to the second):
    the change itself, e.g. 02:00 BST for 01:30 on the day London springs forward."""
    lo = local.replace(fold=1).astimezone(UTC)     # before the change (read with the later offset)
    hi = local.replace(fold=0).astimezone(UTC)     # after the change (read with the earlier offset)
    lo, hi = min(lo, hi), max(lo, hi)
    after = hi.astimezone(zone).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def _gap_fires(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """Fire times in (after, until] of wall times that a spring-forward change skipped: each such day fires once
    per gap, at the first instant after it (Vixie cron's rule). Only days whose UTC offset changes are examined."""
    cron = _compile_cron(schedule.cron)
    zone = ZoneInfo(schedule.timezone)
    day = after.astimezone(zone).date()
    last = until.astimezone(zone).date()
    found: set[datetime] = set()
    while day <= last:
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        following = day + timedelta(days=1)
        if cron.matches_date(day) and start.utcoffset() != datetime(
                following.year, following.month, following.day, tzinfo=zone).utcoffset():
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                    if not _exists(local, zone):
                        moment = _gap_end(local, zone)
                        if after < moment <= until:
                            found.add(moment)
        day = following
    return sorted(found)


def _is_repeat(fire_time: datetime, zone: ZoneInfo) -> bool:
    """True for the second of the two instants that share one wall-clock time on a DST fall-back day."""
    local = fire_time.astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def occurrence_key(schedule: Schedule, fire_time: datetime) -> str:
    """`YYYY-MM-DD` (local date in the schedule's zone) for a daily schedule, \
else the instant `YYYY-MM-DDTHH:MM:SSZ`."""
    moment = _aware(fire_time, "fire_time")
    if schedule.daily:
        return moment.astimezone(ZoneInfo(schedule.timezone)).strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def fire_times(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """Every fire time t with after < t <= until, as aware UTC datetimes, oldest first.

    A daily schedule gives at most one per local date: on a DST fall-back day the repeated wall time is dropped
    (the first instant is kept, whichever call enumerated it). Raises ScheduleError when more than MAX_FIRE_TIMES
    would be produced.
    """
    after, until = _aware(after, "after"), _aware(until, "until")
    if after >= until:
        return []
    trigger = _cron_trigger(schedule)
    cron = _compile_cron(schedule.cron)
    zone = ZoneInfo(schedule.timezone)
    daily = schedule.daily
    result: list[datetime] = []
    previous = after
    # get_next_fire_time(prev, now) starts from min(now, prev + 1 µs). `now` is kept a second beyond until so that
    # the search always starts just after prev: with now == prev, APScheduler compares a fold-ambiguous local time
    # with a UTC one (always unequal under PEP 495) and returns prev itself on a DST fall-back day.
    horizon = until + timedelta(seconds=1)
    while True:
        found = trigger.get_next_fire_time(previous, horizon)
        if found is None:
            break
        moment = found.astimezone(UTC)
        if moment > until:
            break
        if moment <= previous:  # defensive: the trigger must move forward
            raise ScheduleError(f"schedule {schedule.name!r}: trigger did not advance past {previous.isoformat()}")
        previous = moment
        if daily and _is_repeat(moment, zone):
            continue
        if not cron.matches_wall_time(moment.astimezone(zone)):
            continue     # APScheduler's shift of a skipped wall time: replaced by the gap's end below
        if len(result) >= MAX_FIRE_TIMES:
            raise ScheduleError(
                f"schedule {schedule.name!r}: more than {MAX_FIRE_TIMES} fire times between "
                f"{after.isoformat()} and {until.isoformat()}")
        result.append(moment)
    gaps = [t for t in _gap_fires(schedule, after, until) if t not in result]
    return sorted(result + gaps) if gaps else result


def next_wakeup(schedule: Schedule, now: datetime) -> datetime | None:
    """The first fire time strictly after now (aware UTC), or None if the cron never fires again."""
    now = _aware(now, "now")
    trigger = _cron_trigger(schedule)
    cron = _compile_cron(schedule.cron)
    zone = ZoneInfo(schedule.timezone)
    previous = now
    candidate = None
    for _ in range(4):  # at most one DST repeat and one spring-forward shift to step over
        found = trigger.get_next_fire_time(previous, previous + timedelta(days=366 * 9))
        if found is None:
            break
        moment = found.astimezone(UTC)
        if not (schedule.daily and _is_repeat(moment, zone)) and cron.matches_wall_time(moment.astimezone(zone)):
            candidate = moment
            break
        previous = moment
    gaps = _gap_fires(schedule, now, candidate or now + timedelta(days=366))
    return gaps[0] if gaps else candidate


def plan_catch_up(schedule: Schedule, cursor: datetime | None, now: datetime) -> CatchUp:
    """Decide what a wake-up at `now` admits, given the stored cursor (None for a new schedule).

    Fire times in (cursor, now] are enumerated (a new schedule starts at now - grace). Those older than
    now - grace are missed. Within the grace window (now - grace <= t <= now) policy `each` admits all and
    `latest` admits the newest, listing the older in-grace ones as missed too (so a missed occurrence with
    fire_time >= now - grace was superseded, not late). The cursor returned is the last enumerated fire time, or
    the old cursor (now - grace for a new schedule) when none was enumerated; it never moves backwards.
    """
    now = _aware(now, "now")
    horizon = now - schedule.grace
    start = horizon if cursor is None else _aware(cursor, "cursor")
    times = fire_times(schedule, start, now)
    late = [t for t in times if t < horizon]
    in_grace = [t for t in times if t >= horizon]
    if schedule.catch_up == "latest":
        superseded, admitted = in_grace[:-1], in_grace[-1:]
    else:
        superseded, admitted = [], in_grace

    def occurrence(t: datetime) -> Occurrence:
        return Occurrence(schedule=schedule.name, key=occurrence_key(schedule, t), fire_time=t)

    return CatchUp(
        admit=[occurrence(t) for t in admitted],
        missed=[occurrence(t) for t in late + superseded],
        cursor=times[-1] if times else start,
    )
