"""The one clock of a process (C5): admission times, debounce, not-before times, schedules and statistics.

Times are aware UTC datetimes in Python. SQLite stores them as fixed-width ISO-8601 text (so text order is time order);
PostgreSQL as `timestamptz` (migration 0021), which the server casts that same text to when it is a parameter. Either
store's value is read back with `from_db`.
"""
from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

UTC = UTC
_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def to_text(moment: datetime) -> str:
    """Render an aware datetime as the store's fixed-width UTC text (SQLite's column, either store's parameter)."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: every time in shopbot is aware UTC")
    # `_FORMAT`'s text through isoformat: less than half of strftime's time (its %f is handled in Python), and
    # every transaction stamps one or more
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:26] + "Z"


def from_text(text: str) -> datetime:
    # the store's own fixed-width text parsed by fromisoformat: 0.2 µs against strptime's 11, and every claimed item,
    # delivery and transaction reads one or more; anything else still goes through strptime (and fails there)
    if len(text) == 27 and text[10] == "T" and text[19] == "." and text[26] == "Z":
        return datetime.fromisoformat(text[:26]).replace(tzinfo=UTC)
    return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)


def from_db(value: str | datetime) -> datetime:
    """A time column as read from either store, as an aware UTC datetime: SQLite keeps the fixed-width text above,
    PostgreSQL's `timestamptz` arrives as an aware datetime already. Records cross the seam with this (C5)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("naive datetime from the store: every time in shopbot is aware UTC")
        return value.astimezone(UTC)
    return from_text(value)


def from_db_or_none(value: str | datetime | None) -> datetime | None:
    """`from_db` for a column that may be NULL (an order not yet received, a run not yet ended)."""
    return None if value is None else from_db(value)


class Clock(Protocol):
    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class SkewedClock(SystemClock):
    """The system clock off by `offset_s` seconds (test mode only, SHOPBOT_CLOCK=skewed:+600): a machine whose own
    clock is wrong, for K17. It is a system clock in every other way: the PostgreSQL store measures its offset to
    the server and stamps on the server's clock, and leases never read it (they are judged by the database)."""

    def __init__(self, offset_s: float) -> None:
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


class AcceleratedClock:
    """Simulated time running `factor` times faster than the wall clock from `start` (test mode only)."""

    def __init__(self, start: datetime, factor: float) -> None:
        if start.tzinfo is None:
            raise ValueError("accelerated clock start must carry a time zone")
        if factor <= 0:
            raise ValueError("accelerated clock factor must be positive")
        self.start = start.astimezone(UTC)
        self.factor = factor
        self._origin = time.monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.monotonic() - self._origin) * self.factor)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.factor)


class ManualClock:
    """A clock that moves only when told to: for tests and simulations in simulated time."""

    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = moment.astimezone(UTC)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


def parse_clock(spec: str, *, test_mode: bool) -> Clock:
    """`system`, `accelerated:<start ISO-8601>:<factor>` or `skewed:<+/-seconds>` (the last two only with
    SHOPBOT_TEST_MODE=1)."""
    if spec in ("", "system"):
        return SystemClock()
    if spec.startswith("skewed:"):
        if not test_mode:
            raise ValueError("SHOPBOT_CLOCK=skewed:... is refused unless SHOPBOT_TEST_MODE=1")
        try:
            offset = float(spec[len("skewed:"):])
        except ValueError as exc:
            raise ValueError(f"SHOPBOT_CLOCK: cannot read {spec!r}: expected skewed:<+/-seconds>") from exc
        if offset != offset or abs(offset) > 366 * 86400:
            raise ValueError(f"SHOPBOT_CLOCK: {spec!r}: the skew must be a number of seconds within a year")
        return SkewedClock(offset)
    if spec.startswith("accelerated:"):
        if not test_mode:
            raise ValueError("SHOPBOT_CLOCK=accelerated:... is refused unless SHOPBOT_TEST_MODE=1")
        start_text, _, factor_text = spec[len("accelerated:"):].rpartition(":")
        try:
            start = datetime.fromisoformat(start_text.replace("Z", "+00:00"))
            factor = float(factor_text)
        except ValueError as exc:
            raise ValueError(f"SHOPBOT_CLOCK: cannot read {spec!r}: "
                             "expected accelerated:<start ISO-8601>:<factor>") from exc
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        return AcceleratedClock(start, factor)
    raise ValueError(f"SHOPBOT_CLOCK: unknown clock {spec!r}: use 'system', 'accelerated:<start>:<factor>' or "
                     "'skewed:<+/-seconds>'")
