"""C8 prompts: inline buttons carry '<verb>:<nonce>'; the nonce is 128 random bits stored with its target, so a
button cannot be guessed or forged from a sequential id."""
from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    nonce: str
    kind: str
    target: str
    chat_id: int
    expires_at: str | None
    decided_at: str | None
    decision: str | None


def create(conn: sqlite3.Connection, kind: str, target: str, chat_id: int, now: str,
           expires_at: str | None = None) -> str:
    nonce = secrets.token_hex(16)
    conn.execute("INSERT INTO prompts (nonce, kind, target, chat_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                 (nonce, kind, target, chat_id, now, expires_at))
    return nonce


def get(conn: sqlite3.Connection, nonce: str) -> Prompt | None:
    row = conn.execute("SELECT nonce, kind, target, chat_id, expires_at, decided_at, decision FROM prompts "
                       "WHERE nonce = ?", (nonce,)).fetchone()
    return Prompt(*row) if row else None


def decide(conn: sqlite3.Connection, nonce: str, decision: str, by: str, now: str) -> bool:
    """Record the decision once; False when it was already decided."""
    return conn.execute("UPDATE prompts SET decided_at = ?, decision = ?, decided_by = ? "
                        "WHERE nonce = ? AND decided_at IS NULL", (now, decision, by, nonce)).rowcount == 1


def close_for_target(conn: sqlite3.Connection, kind: str, target: str, decision: str, by: str, now: str) -> None:
    """A decision made elsewhere (the CLI) closes the open prompts for the same target."""
    conn.execute("UPDATE prompts SET decided_at = ?, decision = ?, decided_by = ? "
                 "WHERE kind = ? AND target = ? AND decided_at IS NULL", (now, decision, by, kind, target))
