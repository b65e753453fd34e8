"""Counts of refused requests kept in memory and flushed at most once a second or with the next commit (C1).

A refusal (a till request with a bad token, a Telegram stranger, a malformed update) must cost nothing durable: a
flood of them would otherwise be one fsynced commit each and slow down the owner's replies. So they are added up
here, per minute and kind, and written to `counters` inside the next transaction that writes anyway, or by a flush
at most once a second when nothing else commits. A crash loses at most the last second of counts, never work.

`add` may be called from the event loop or from the connection thread (inside a transaction's function); the lock
keeps the two apart. `Database` calls the `CommitHooks` methods from its connection thread.
"""
from __future__ import annotations

import threading

from . import inbox
from .connection import Connection

FLUSH_S = 1.0


class Tallies:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}       # (minute, kind) -> not yet stored
        self._in_flight: dict[tuple[str, str], int] = {}    # written by the transaction now committing

    def add(self, now: str, kind: str, by: int = 1) -> None:
        key = (inbox.minute_of(now), kind)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + by

    def pending(self) -> dict[str, int]:
        """Counts not yet stored, per kind (for a status read in this process)."""
        with self._lock:
            merged: dict[str, int] = {}
            for (_, kind), n in self._counts.items():
                merged[kind] = merged.get(kind, 0) + n
            return merged

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._counts)

    # ---- CommitHooks (called in the connection thread, inside the transaction) ---------------------------
    def before_commit(self, conn: Connection) -> None:
        with self._lock:
            due = {k: n - self._in_flight.get(k, 0) for k, n in self._counts.items()}
        for (minute, kind), n in due.items():
            if n > 0:
                conn.execute(
                    "INSERT INTO counters (minute, kind, count) VALUES ($1, $2, $3) "
                    "ON CONFLICT (minute, kind) DO UPDATE SET count = counters.count + excluded.count",
                    (minute, kind, n))
                self._in_flight[(minute, kind)] = self._in_flight.get((minute, kind), 0) + n

    def committed(self) -> None:
        with self._lock:
            for key, n in self._in_flight.items():
                left = self._counts.get(key, 0) - n
                if left > 0:
                    self._counts[key] = left
                else:
                    self._counts.pop(key, None)
            self._in_flight = {}

    def rolled_back(self) -> None:
        with self._lock:
            self._in_flight = {}
