"""Counts of refused requests kept in memory and flushed at most once a second or with the next commit (C1).

A refusal (a till request with a bad token, a Telegram stranger, a malformed update) must cost nothing durable: a
flood of them would otherwise be one fsynced commit each and slow down the owner's replies. So they are added up
here, per minute and kind, and written to `counters` inside the next transaction that writes anyway, or by a flush
at most once a second when nothing else commits. A crash loses at most the last second of counts, never work.

`add` may be called from the event loop or from the connection thread (inside a transaction's function); the lock
keeps the two apart. `Database` calls the `CommitHooks` methods in the transaction's own thread. Each transaction's
share is kept by its thread, as the receipts' sets are (store/shared/receipts.py `HeldSets`): PostgreSQL runs several
transactions at once, and one's end must not settle another's counts (a failed write beside a commit that carried
counts once made them count twice; a commit beside a failed one that carried counts once lost them).
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from . import inbox
from .connection import Connection

FLUSH_S = 1.0


class Tallies:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}       # (minute, kind) -> not yet written by any transaction
        self._in_flight: dict[int, dict[tuple[str, str], int]] = {}   # thread -> written by its open transaction
        self._stored = 0         # commits that stored a share: a status read's check (`mark`, `pending_since`)
        self.held_again: Callable[[], None] | None = None    # told when a rolled-back share is held again

    def add(self, now: str, kind: str, by: int = 1) -> None:
        key = (inbox.minute_of(now), kind)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + by

    def pending(self) -> dict[str, int]:
        """Counts not yet stored, per kind (for a status read in this process): held, or in a transaction that has
        not committed."""
        with self._lock:
            return self._merged()

    def _merged(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for share in (self._counts, *self._in_flight.values()):
            for (_, kind), n in share.items():
                merged[kind] = merged.get(kind, 0) + n
        return merged

    def mark(self) -> int:
        """Taken before a status read of the stored counts (`pending_since`)."""
        with self._lock:
            return self._stored

    def pending_since(self, mark: int) -> dict[str, int] | None:
        """`pending()`, for the stored counts read since `mark`; None when a commit that carried counts may have
        ended in between, or is ending now: its COMMIT may or may not be in what the read saw (PostgreSQL commits in
        other threads; the caller reads again). On SQLite a read never runs beside a commit, so this never fails."""
        with self._lock:
            if self._stored != mark or any(self._in_flight.values()):
                return None
            return self._merged()

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._counts)

    # ---- CommitHooks (called in the transaction's thread, inside it) -------------------------------------
    def before_commit(self, conn: Connection) -> None:
        with self._lock:
            due, self._counts = self._counts, {}
            mine = self._in_flight.setdefault(threading.get_ident(), {})
            for key, n in due.items():
                mine[key] = mine.get(key, 0) + n
        # in one order, the same in every transaction: two on PostgreSQL carrying the same kinds at once would
        # otherwise lock their `counters` rows in opposite orders, and one of them would fail as a deadlock
        for (minute, kind), n in sorted(due.items()):
            conn.execute(
                "INSERT INTO counters (minute, kind, count) VALUES ($1, $2, $3) "
                "ON CONFLICT (minute, kind) DO UPDATE SET count = counters.count + excluded.count",
                (minute, kind, n))

    def committed(self) -> None:
        with self._lock:
            if self._in_flight.pop(threading.get_ident(), None):
                self._stored += 1

    def rolled_back(self) -> None:
        """Not stored: this transaction's share is held again, for the next commit."""
        with self._lock:
            share = self._in_flight.pop(threading.get_ident(), {})
            for key, n in share.items():
                self._counts[key] = self._counts.get(key, 0) + n
        if share and self.held_again is not None:
            self.held_again()
