"""Receipts (C19): the reaction that tells the owner a message was stored.

A receipt row is written in the admission's own transaction (`add`), so a message that was not stored never gets
one and one that was always does; the receipt relay (bot/relays/receipts.py) sets it. Setting a reaction is
idempotent, so unlike a message an attempt whose outcome is unknown simply leaves the row pending to be set again:
there is no `sending` state and nothing to recover at start.
"""
from __future__ import annotations

import threading
from datetime import datetime

from ..clock import from_db_or_none
from ..records import Receipt
from .connection import Connection, Row
from .moves import move

_COLUMNS = "receipt_id, chat_id, message_id, emoji, state, attempts, reason"


def _receipt(row: Row) -> Receipt:
    return Receipt(*row)


def add(conn: Connection, chat_id: int, message_id: int, emoji: str, now: str) -> int | None:
    """One receipt per message: a second one for the same message is no new row (a redelivery adds none). The new
    receipt's id, or None."""
    row = conn.execute(
        "INSERT INTO receipts (chat_id, message_id, emoji, created_at, updated_at) VALUES ($1, $2, $3, $4, $5) "
        "ON CONFLICT (chat_id, message_id) DO NOTHING RETURNING receipt_id",
        (chat_id, message_id, emoji, now, now)).fetchone()
    return int(row[0]) if row is not None else None


def due(conn: Connection, now: str, limit: int, skip: set[int] | frozenset[int] = frozenset()) -> list[Receipt]:
    """The pending receipts due at `now`, oldest first; those in `skip` (set, the set not yet stored) left out."""
    return [r for r in (_receipt(row) for row in conn.execute(
        f"SELECT {_COLUMNS} FROM receipts WHERE state = 'pending' AND (not_before IS NULL OR not_before <= $1) "
        "ORDER BY receipt_id LIMIT $2", (now, limit + len(skip))).fetchall()) if r.receipt_id not in skip][:limit]


def next_wake_after(conn: Connection, now: str) -> datetime | None:
    """The earliest not-before time still to come of a pending receipt (the relay's timed wake-up)."""
    return from_db_or_none(conn.execute(
        "SELECT min(not_before) FROM receipts WHERE state = 'pending' AND not_before > $1", (now,)).fetchone()[0])


def next_wake(conn: Connection) -> datetime | None:
    return from_db_or_none(conn.execute("SELECT min(not_before) FROM receipts WHERE state = 'pending'").fetchone()[0])


def listed(conn: Connection, chat_id: int | None, limit: int) -> list[Receipt]:
    where, args = ("WHERE chat_id = $2", (chat_id,)) if chat_id is not None else ("", ())
    return [_receipt(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM receipts {where} ORDER BY receipt_id DESC LIMIT $1", (limit, *args)).fetchall()]


def mark_set(conn: Connection, receipt_id: int, now: str) -> None:
    conn.execute("UPDATE receipts SET attempts = attempts + 1 WHERE receipt_id = $1", (receipt_id,))
    move(conn, "receipts", "receipt_id", receipt_id, "pending", "set", now, reason=None)


def mark_retry(conn: Connection, receipt_id: int, not_before: str, reason: str, now: str) -> None:
    """Still pending, tried again at `not_before`: the request never left, was refused for flood (429), or its
    outcome is unknown (setting the same reaction again changes nothing on Telegram)."""
    conn.execute("UPDATE receipts SET attempts = attempts + 1 WHERE receipt_id = $1", (receipt_id,))
    move(conn, "receipts", "receipt_id", receipt_id, "pending", "pending", now, not_before=not_before, reason=reason)


def mark_failed(conn: Connection, receipt_id: int, reason: str, now: str) -> None:
    conn.execute("UPDATE receipts SET attempts = attempts + 1 WHERE receipt_id = $1", (receipt_id,))
    move(conn, "receipts", "receipt_id", receipt_id, "pending", "failed", now, reason=reason)


class HeldSets:
    """Receipts set on Telegram whose `set` is not stored yet (issue 31). Recording a set costs no commit of its own:
    it rides along with the next transaction that writes anyway (`CommitHooks`, as the refusal counts do,
    store/shared/tallies.py), or a flush within a second when nothing else commits, so the relay's store work never
    queues ahead of a turn's claim or finish. A crash before it is stored leaves the receipt pending, and it is set
    again after the restart: the same reaction again, which changes nothing (C19, K19); never lost.

    Each transaction's share is kept by its thread (PostgreSQL runs several at once); a set stored by a committed
    transaction is still left out of the relay's next due read (`skip`), which forgets it only then (its snapshot
    starts after the commit), so a receipt is not set a second time while its set is in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, str] = {}                     # receipt id -> when it was set
        self._in_flight: dict[int, dict[int, str]] = {}     # thread -> written by the transaction now committing
        self._stored: set[int] = set()                      # committed since the relay's last due read

    def hold(self, receipt_id: int, now: str) -> None:
        with self._lock:
            self._held[receipt_id] = now

    def taken(self) -> set[int]:
        """The receipts whose set is held, in flight or stored since the last due read (nothing is forgotten)."""
        with self._lock:
            ids = set(self._held) | self._stored
            for share in self._in_flight.values():
                ids |= share.keys()
            return ids

    def skip(self) -> set[int]:
        """The receipts a due read leaves out; called in the read's transaction, before its query."""
        ids = self.taken()
        with self._lock:
            self._stored -= ids
            return ids

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._held)

    # ---- CommitHooks (called in the transaction's thread, inside it) -----------------------------------------
    def before_commit(self, conn: Connection) -> None:
        with self._lock:
            taken, self._held = self._held, {}
            self._in_flight.setdefault(threading.get_ident(), {}).update(taken)
        for receipt_id, at in taken.items():
            # only a pending one: a set stored by a commit whose answer was lost (K16) is not stored twice
            conn.execute("UPDATE receipts SET state = 'set', attempts = attempts + 1, updated_at = $1, reason = NULL "
                         "WHERE receipt_id = $2 AND state = 'pending'", (at, receipt_id))

    def committed(self) -> None:
        with self._lock:
            self._stored |= self._in_flight.pop(threading.get_ident(), {}).keys()

    def rolled_back(self) -> None:
        with self._lock:
            self._held.update(self._in_flight.pop(threading.get_ident(), {}))
