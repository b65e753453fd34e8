"""SHOPBOT_CLOCK=skewed:<+/-seconds> (K17): the system clock off by a fixed amount, refused outside test mode."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import config
from store import SystemClock, parse_clock


def test_a_skewed_clock_is_the_system_clock_off_by_its_offset():
    clock = parse_clock("skewed:+600", test_mode=True)
    assert isinstance(clock, SystemClock)     # the PostgreSQL store measures its offset to the server, as any
    lead = (clock.now() - datetime.now(UTC)).total_seconds()
    assert 599 < lead < 601
    behind = (parse_clock("skewed:-600", test_mode=True).now() - datetime.now(UTC)).total_seconds()
    assert -601 < behind < -599


@pytest.mark.parametrize("spec", ["skewed:", "skewed:ten", "skewed:nan", "skewed:+99999999"])
def test_an_unreadable_skew_is_refused(spec):
    with pytest.raises(ValueError, match="SHOPBOT_CLOCK"):
        parse_clock(spec, test_mode=True)


def test_a_skewed_clock_is_refused_outside_test_mode():
    with pytest.raises(ValueError, match="SHOPBOT_TEST_MODE"):
        parse_clock("skewed:+600", test_mode=False)
    with pytest.raises(config.ConfigError, match="SHOPBOT_CLOCK"):
        config.load({"SHOPBOT_CLOCK": "skewed:+600"})
    assert config.load({"SHOPBOT_CLOCK": "skewed:+600", "SHOPBOT_TEST_MODE": "1"}).clock == "skewed:+600"
