"""C8 prompts: inline buttons carry '<verb>:<nonce>'; the nonce is 128 random bits stored with its target, so a
button cannot be guessed or forged from a sequential id."""
from __future__ import annotations

import secrets
from datetime import datetime

from ..clock import from_db_or_none, to_text
from ..records import Prompt
from .connection import Connection


def create(conn: Connection, kind: str, target: str, chat_id: int, now: str,
           expires_at: datetime | None = None) -> str:
    nonce = secrets.token_hex(16)
    conn.execute("INSERT INTO prompts (nonce, kind, target, chat_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                 (nonce, kind, target, chat_id, now, to_text(expires_at) if expires_at else None))
    return nonce


def get(conn: Connection, nonce: str) -> Prompt | None:
    row = conn.execute("SELECT nonce, kind, target, chat_id, expires_at, decided_at, decision FROM prompts "
                       "WHERE nonce = ?", (nonce,)).fetchone()
    if row is None:
        return None
    return Prompt(row[0], row[1], row[2], row[3], from_db_or_none(row[4]),
                  from_db_or_none(row[5]), row[6])


def decide(conn: Connection, nonce: str, decision: str, by: str, now: str) -> bool:
    """Record the decision once; False when it was already decided."""
    return conn.execute("UPDATE prompts SET decided_at = ?, decision = ?, decided_by = ? "
                        "WHERE nonce = ? AND decided_at IS NULL", (now, decision, by, nonce)).rowcount == 1


def close_for_target(conn: Connection, kind: str, target: str, decision: str, by: str, now: str) -> None:
    """A decision made elsewhere (the CLI) closes the open prompts for the same target."""
    conn.execute("UPDATE prompts SET decided_at = ?, decision = ?, decided_by = ? "
                 "WHERE kind = ? AND target = ? AND decided_at IS NULL", (now, decision, by, kind, target))
