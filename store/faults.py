"""Named fault points (kill points K1-K10 of docs/contracts.md, and any added later).

`SHOPBOT_FAULT=<point>:kill` arms one point; reaching it sends SIGKILL to this process. Unarmed, `reached` is a
single set lookup. The composition root calls `arm` once from the configuration; nothing else changes it.
"""
from __future__ import annotations

import os
import signal
import sys

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
}

_armed: frozenset[str] = frozenset()


def parse(spec: str) -> frozenset[str]:
    """Parse `K7:kill` or `K3:kill,K7:kill`; an unknown point or action is an error, never ignored."""
    points = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, _, action = part.partition(":")
        if point not in POINTS:
            raise ValueError(f"SHOPBOT_FAULT: unknown fault point {point!r} (known: {', '.join(POINTS)})")
        if action != "kill":
            raise ValueError(f"SHOPBOT_FAULT: unknown action {action!r} for {point}: only 'kill' exists")
        points.add(point)
    return frozenset(points)


def arm(spec: str) -> None:
    global _armed
    _armed = parse(spec)


def armed() -> frozenset[str]:
    return _armed


def reached(point: str) -> None:
    if point in _armed:
        sys.stderr.write(f"fault point {point} reached: killing process {os.getpid()}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
