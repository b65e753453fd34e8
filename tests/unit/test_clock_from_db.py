"""Times cross the store seam as aware UTC datetimes whichever store they come from (store.clock.from_db)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from store import from_db, from_db_or_none, to_text
from store.clock import from_text


def test_text_and_timestamptz_give_the_same_aware_time() -> None:
    moment = datetime(2027, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
    assert from_db(to_text(moment)) == moment
    shifted = moment.astimezone(timezone(timedelta(hours=-5)))
    assert from_db(shifted) == moment and from_db(shifted).tzinfo is UTC


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        from_db(datetime(2027, 3, 1, 9, 30))


def test_a_null_time_stays_none_and_a_value_is_read_as_from_db() -> None:
    moment = datetime(2027, 3, 1, 9, 30, tzinfo=UTC)
    assert from_db_or_none(None) is None
    assert from_db_or_none(to_text(moment)) == moment


@pytest.mark.parametrize("text", ["2027-03-01T09:30:15.123456Z", "2027-12-31T23:59:59.999999Z",
                                  "2028-02-29T00:00:00.000000Z", "0999-01-01T00:00:00.000001Z"])
def test_the_stores_text_reads_as_strptime_reads_it(text: str) -> None:
    """from_text's fast path (fromisoformat) gives what the format's strptime gives."""
    assert from_text(text) == datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert from_text(text).tzinfo is UTC


@pytest.mark.parametrize("text", ["2027-02-30T09:30:15.123456Z", "2027-03-01T09:30:15,123456Z",
                                  "2027-03-01T09:30:15.12345xZ", "2027-03-01 09:30:15.123456Z",
                                  "2027-03-01T09:30:15.123456+00:00", "2027-03-01T09:30:15Z", ""])
def test_text_not_of_the_stores_form_is_refused(text: str) -> None:
    """The negative control: text strptime refuses is refused by the fast path too (nothing is read loosely)."""
    with pytest.raises(ValueError):
        from_text(text)


@pytest.mark.parametrize("moment", [
    datetime(2027, 3, 1, 9, 30, 15, 123456, tzinfo=UTC),
    datetime(2027, 3, 1, 9, 30, tzinfo=UTC),                                    # no microseconds: still six digits
    datetime(2027, 1, 1, 0, 30, 0, 7, tzinfo=timezone(timedelta(hours=2))),     # another zone: the UTC day before
    datetime(2028, 2, 29, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
])
def test_to_text_is_the_stores_fixed_width_utc_text(moment: datetime) -> None:
    """to_text's isoformat path gives the format's strftime text: 27 characters, UTC, six fraction digits."""
    text = to_text(moment)
    assert text == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert len(text) == 27 and from_text(text) == moment


def test_to_text_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="naive"):
        to_text(datetime(2027, 3, 1, 9, 30))
