"""Times cross the store seam as aware UTC datetimes whichever store they come from (store.clock.from_db)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from store import from_db, from_db_or_none, to_text


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
