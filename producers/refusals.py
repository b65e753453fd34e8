"""Refused requests (a wrong till token, a wrong webhook secret, a wrong /ops token) counted in memory and logged
at most once a second with how many more there were: a flood of thousands of refusals a second costs no commit and
about one log line a second, never one line per request. The caller writes the line itself (its template stays in
the event catalogue, bot/log_events.py):

    if (more := refusals.refused()) is not None:
        log.warning("till request without a valid token from %s%s", address, more)
"""
from __future__ import annotations

import time
from collections.abc import Callable


class Refusals:
    def __init__(self, *, every_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self.clock = every_s, clock
        self._logged_at = float("-inf")
        self._unlogged = 0
        self.total = 0

    def refused(self) -> str | None:
        """Count one refusal; when a line is due, the suffix it ends with ("" or " (N more in the last S s)")."""
        now = self.clock()
        self.total += 1
        self._unlogged += 1
        if now - self._logged_at < self.every_s:
            return None
        more = self._unlogged - 1
        suffix = f" ({more} more in the last {now - self._logged_at:.0f} s)" if more else ""
        self._logged_at, self._unlogged = now, 0
        return suffix
