"""Floods of log-worthy events write about one line a second (C21): asyncio's "out of system resource" (61,382
lines in 7 s before) and the refusals of wrong till tokens, webhook secrets and /ops logins."""
from __future__ import annotations

import logging

from bot.logs import ACCEPT_FLOOD, OncePerSecond
from producers.refusals import Refusals


def record(msg: str, created: float) -> logging.LogRecord:
    r = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)
    r.created = created
    return r


def test_the_accept_flood_line_passes_once_a_second_with_the_count_held_back():
    gate = OncePerSecond(ACCEPT_FLOOD)
    passed = [r for i in range(3000) if gate.filter(r := record(ACCEPT_FLOOD, 100 + i / 1000))]
    assert len(passed) == 3                                   # 3,000 in 3 s (the fault), 3 lines
    assert "999 more like it" in passed[1].getMessage()
    other = [record("something else", 100.0) for _ in range(50)]
    assert all(gate.filter(r) for r in other)                 # the control: other asyncio lines all pass


def test_refusals_are_summarised_at_most_once_a_second():
    now = [0.0]
    refusals = Refusals(clock=lambda: now[0])
    lines = []
    for i in range(3000):
        now[0] = i / 1000
        if (more := refusals.refused()) is not None:
            lines.append(more)
    assert refusals.total == 3000 and len(lines) == 3
    assert lines[0] == "" and lines[1] == " (999 more in the last 1 s)"
