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
