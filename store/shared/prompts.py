"""C8 prompts: inline buttons carry '<verb>:<nonce>'; the nonce is 128 random bits stored with its target, so a
button cannot be guessed or forged from a sequential id."""
from __future__ import annotations

import secrets

from ..clock import from_db_or_none
from ..records import Prompt
from .connection import Connection


def create(conn: Connection, kind: str, target: str, chat_id: int, now: str) -> str:
    """A prompt with a fresh nonce; a proposal's expires with the proposal (a press after it changes nothing)."""
    nonce = secrets.token_hex(16)
    expires = None
    if kind == "proposal" and target.isdigit():
        row = conn.execute("SELECT expires_at FROM proposals WHERE proposal_id = $1", (int(target),)).fetchone()
        expires = row[0] if row is not None else None
    conn.execute("INSERT INTO prompts (nonce, kind, target, chat_id, created_at, expires_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6)",
                 (nonce, kind, target, chat_id, now, expires))
    return nonce


def get(conn: Connection, nonce: str) -> Prompt | None:
    row = conn.execute("SELECT nonce, kind, target, chat_id, expires_at, decided_at, decision FROM prompts "
                       "WHERE nonce = $1", (nonce,)).fetchone()
    if row is None:
        return None
    return Prompt(row[0], row[1], row[2], row[3], from_db_or_none(row[4]),
                  from_db_or_none(row[5]), row[6])


def decide(conn: Connection, nonce: str, decision: str, by: str, now: str) -> bool:
    """Record the decision once; False when it was already decided."""
    return conn.execute("UPDATE prompts SET decided_at = $1, decision = $2, decided_by = $3 "
                        "WHERE nonce = $4 AND decided_at IS NULL", (now, decision, by, nonce)).rowcount == 1


def close_for_target(conn: Connection, kind: str, target: str, decision: str, by: str, now: str) -> None:
    """A decision made elsewhere (the CLI) closes the open prompts for the same target."""
    conn.execute("UPDATE prompts SET decided_at = $1, decision = $2, decided_by = $3 "
                 "WHERE kind = $4 AND target = $5 AND decided_at IS NULL", (now, decision, by, kind, target))
