"""Named fault points (kill points K1-K10 of docs/contracts.md, and any added later).

`SHOPBOT_FAULT=<point>:kill` arms one point; reaching it sends SIGKILL to this process. `<point>:stop` sends it
SIGSTOP instead: the process freezes there, holding what it holds (connections, leases it no longer renews), until
someone sends SIGCONT, which is how a test pauses a process past its lease (K11-K18). `<point>:raise` raises
`FaultInjected` there instead, so an in-process test can stop a transaction at a named line (its writes roll back
as a crash's would). Unarmed, `reached` is a single dict lookup. The composition root calls `arm` once from the
configuration; tests arm and disarm around one call.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

POINTS = {
    "K1": "after a Telegram batch is fetched (or a webhook call read), before its admission commits",
    "K2": "after admission commits, before the offset advances (or the webhook call is answered)",
    "K3": "after claim, before the model call",
    "K4": "during the model call",
    "K5": "after a tool operation, before finish",
    "K6": "before the finish commit",
    "K7": "after `sending` commits, before the HTTP call",
    "K8": "after Telegram accepted the message, before `confirmed` commits",
    "K9": "after an approval commits, before the action relay sends",
    "K10": "after the supplier accepted an action, before it is marked delivered",
    "K19": "after an owner message's admission (and its receipt) committed, before the receipt is set",
    "K20": "after Telegram accepted a photo part, before `confirmed` commits",
    "finish-writes": "inside the finish transaction, after the items are finished, before the report is written",
    "clock-cursor": "inside a clock catch-up, after its admissions, before its cursor moves",
    "take-due": "inside the relay's every look (`take_due`), after its lease fence, before the due read",
    "seed": "inside the start's seeding of the shop from its file, after its items, before its seeded mark",
    "schema-step": "while a new SQLite database is created, after one migration committed, before the next",
}
ACTIONS = ("kill", "stop", "raise")

_armed: dict[str, str] = {}


class FaultInjected(Exception):
    """An armed `<point>:raise` was reached."""

    def __init__(self, point: str) -> None:
        self.point = point
        super().__init__(f"fault point {point} reached")


def parse(spec: str) -> dict[str, str]:
    """Parse `K7:kill` or `K3:kill,K7:kill`; an unknown point or action is an error, never ignored."""
    points = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, _, action = part.partition(":")
        if point not in POINTS:
            raise ValueError(f"SHOPBOT_FAULT: unknown fault point {point!r} (known: {', '.join(POINTS)})")
        if action not in ACTIONS:
            raise ValueError(f"SHOPBOT_FAULT: unknown action {action!r} for {point}: one of {', '.join(ACTIONS)}")
        points[point] = action
    return points


def arm(spec: str) -> None:
    global _armed
    _armed = parse(spec)


def armed() -> frozenset[str]:
    return frozenset(_armed)


def is_armed(point: str) -> bool:
    """Whether `point` is armed now (a dict lookup): for a point whose setting-up costs something of its own."""
    return point in _armed


def _to_this_thread(sig: signal.Signals) -> None:
    """SIGKILL or SIGSTOP (both end or freeze the whole process) sent to the calling thread, so that it is this
    thread that takes it on its way back from the call: sent to the process, the kernel may wake another thread to
    take it, and a point reached in a database thread (inside a transaction) would run on for a statement or two,
    even past its COMMIT, before the stop reached it."""
    signal.pthread_kill(threading.get_ident(), sig)


def reached(point: str) -> None:
    action = _armed.get(point)
    if action == "raise":
        raise FaultInjected(point)
    if action == "kill":
        sys.stderr.write(f"fault point {point} reached: killing process {os.getpid()}\n")
        sys.stderr.flush()
        _to_this_thread(signal.SIGKILL)
    if action == "stop":
        # once: after SIGCONT the process goes on as a paused one would, and reaching the point again runs on
        del _armed[point]
        sys.stderr.write(f"fault point {point} reached: stopping process {os.getpid()}\n")
        sys.stderr.flush()
        _to_this_thread(signal.SIGSTOP)
