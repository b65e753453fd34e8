"""Receipts (C19): the reaction that tells the owner a message was stored.

A receipt row is written in the admission's own transaction (`add`), so a message that was not stored never gets
one and one that was always does; the receipt relay (bot/relays/receipts.py) sets it. Setting a reaction is
idempotent, so unlike a message an attempt whose outcome is unknown simply leaves the row pending to be set again:
there is no `sending` state and nothing to recover at start.
"""
from __future__ import annotations

from datetime import datetime

from ..clock import from_db_or_none
from ..records import Receipt
from .connection import Connection, Row
from .moves import move

_COLUMNS = "receipt_id, chat_id, message_id, emoji, state, attempts, reason"


def _receipt(row: Row) -> Receipt:
    return Receipt(*row)


def add(conn: Connection, chat_id: int, message_id: int, emoji: str, now: str) -> bool:
    """One receipt per message: a second one for the same message is no new row (a redelivery adds none)."""
    cursor = conn.execute(
        "INSERT INTO receipts (chat_id, message_id, emoji, created_at, updated_at) VALUES ($1, $2, $3, $4, $5) "
        "ON CONFLICT (chat_id, message_id) DO NOTHING", (chat_id, message_id, emoji, now, now))
    return cursor.rowcount == 1


def due(conn: Connection, now: str, limit: int) -> list[Receipt]:
    return [_receipt(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM receipts WHERE state = 'pending' AND (not_before IS NULL OR not_before <= $1) "
        "ORDER BY receipt_id LIMIT $2", (now, limit)).fetchall()]


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
