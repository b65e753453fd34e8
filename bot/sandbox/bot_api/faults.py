"""Fault injection for the fake Bot API: the known faults, the queue of injected ones and what each does to a call.

`FaultPlan` holds the faults `inject` queued; `LocalBotApi` (in `server`) runs every Bot API call through
`FaultPlan.run`, which answers in the fault's place, or processes the call and then spoils the reply. The table of
fault semantics is in the package docstring. Refusing and accepting the port stay on `LocalBotApi`: they close and
reopen its listener.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.sandbox.bot_api.methods import _CONFLICT_POLL, _err
from bot.sandbox.mini_http import Response as _Response

FAULTS = frozenset(
    {
        "drop_after_accept",
        "drop_before_accept",
        "429",
        "400",
        "401",
        "403",
        "500",
        "502_html",
        "non_json_200",
        "slow",
        "409",
        "huge_200",
        "dribble",
    }
)

_HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>"
    b"\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n"
)
_HTML_200 = b"<html><body>Service temporarily unavailable (this is not JSON)</body></html>"
# huge_200's answer: a JSON object longer than any client should read (17 MiB), with no Content-Length
HUGE_BYTES = 17 * 1024 * 1024


@dataclass
class _Fault:
    method: str  # lower-case method name or "*"
    kind: str
    count: int
    retry_after: int
    delay: float
    description: str | None


class _Drop(Exception):
    """Close the connection without a reply."""


class FaultPlan:
    """The injected faults, in injection order; each applies to the next `count` calls of its method."""

    def __init__(self) -> None:
        self.faults: list[_Fault] = []

    def inject(
        self,
        method: str,
        fault: str,
        *,
        count: int = 1,
        retry_after: int = 1,
        delay: float = 0.0,
        description: str | None = None,
    ) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {sorted(FAULTS)}")
        if count < 1:
            raise ValueError("count must be >= 1")
        self.faults.append(_Fault(method.lower(), fault, count, int(retry_after), float(delay), description))

    def take(self, method: str) -> _Fault | None:
        """The first fault for `method` (lower case) or "*", used up by one; None if there is none."""
        for fault in self.faults:
            if fault.method in (method, "*"):
                fault.count -= 1
                if fault.count <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    async def run(
        self, method: str, process: Callable[[], Awaitable[_Response]], notify: Callable[[], None]
    ) -> _Response:
        """Answer one call of `method`: `process()` does the work; `notify()` wakes waiters before a drop or a wait.

        Raises `_Drop` when the connection is to close without a reply.
        """
        fault = self.take(method)
        if fault is None:
            return await process()
        kind = fault.kind
        if kind == "drop_before_accept":
            raise _Drop
        refusal = _refusal(fault)
        if refusal is not None:
            return refusal
        response = await process()
        if kind == "drop_after_accept":
            notify()
            raise _Drop
        if kind == "slow":
            notify()
            await asyncio.sleep(fault.delay)
        if kind == "non_json_200":
            return _Response(200, _HTML_200, "text/html")
        if kind == "huge_200":
            notify()
            pad = HUGE_BYTES - len(response.body)
            return _Response(200, response.body[:-1] + b',"pad":"' + b"x" * pad + b'"}', unsized=True)
        if kind == "dribble":
            notify()
            return _Response(response.status, response.body, response.content_type, trickle=fault.delay or 0.2)
        return response


def _refusal(fault: _Fault) -> _Response | None:
    """The error reply for a fault that stops the call before it is processed; None for the others."""
    kind, desc = fault.kind, fault.description
    if kind == "429":
        return _err(
            429,
            desc or f"Too Many Requests: retry after {fault.retry_after}",
            {"retry_after": fault.retry_after},
        )
    if kind == "400":
        return _err(400, desc or "Bad Request: chat not found")
    if kind == "401":
        return _err(401, desc or "Unauthorized")
    if kind == "403":
        return _err(403, desc or "Forbidden: bot was blocked by the user")
    if kind == "500":
        return _err(500, desc or "Internal Server Error")
    if kind == "502_html":
        return _Response(502, _HTML_502, "text/html")
    if kind == "409":
        return _err(409, desc or _CONFLICT_POLL)
    return None


class FloodLimit:
    """Telegram's flood control over all chats as python-telegram-bot's rate limiter models it (a leaky bucket,
    as aiolimiter keeps it): at most `capacity` sendMessage calls at once, draining at `per_s` a second. A call
    that would overflow it is answered 429 with `retry_after` 1, and counted in `refused`. Off unless configured
    (`LocalBotApi(flood_per_s=...)`, `--flood-per-s`)."""

    def __init__(self, per_s: float, capacity: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if per_s <= 0:
            raise ValueError("a flood limit needs a positive rate")
        self.per_s = per_s
        self.capacity = capacity if capacity is not None else per_s
        self.clock = clock
        self.level = 0.0
        self.last = clock()
        self.refused = 0

    def admit(self) -> bool:
        now = self.clock()
        self.level = max(0.0, self.level - (now - self.last) * self.per_s)
        self.last = now
        if self.level + 1 > self.capacity + 1e-9:
            self.refused += 1
            return False
        self.level += 1
        return True


def flood_refusal() -> _Response:
    return _err(429, "Too Many Requests: retry after 1", {"retry_after": 1})
