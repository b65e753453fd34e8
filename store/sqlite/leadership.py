"""Leader leases (C16) on SQLite: one lease per singleton name, judged by the store's clock (text times).

On SQLite one process holds the instance lock, so it always wins; the same moves as PostgreSQL's
(store/postgres/leadership.py) keep one code path in the bot. A lease's length is given in real seconds and
converted to the store clock's seconds by the caller (an accelerated test clock runs faster than real time).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from ..clock import from_text, to_text
from ..errors import LeaseLost
from ..records import Fence, LeaderView, ProcessView
from ..shared.connection import Connection
from ..shared.outbox import UNKNOWN_REASON


def acquire(conn: Connection, name: str, holder: str, lease_s: float, now: datetime) -> int | None:
    """The lease for `holder` when it is free or expired (the generation grows at every takeover); None when another
    holder's lease is current."""
    at, until = to_text(now), to_text(now + timedelta(seconds=lease_s))
    row = conn.execute(
        "INSERT INTO leader_leases (name, holder, generation, expires_at, acquired_at, renewed_at) "
        "VALUES ($1, $2, 1, $3, $4, $5) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
        "generation = leader_leases.generation + 1, expires_at = excluded.expires_at, "
        "acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at "
        "WHERE leader_leases.expires_at <= $6 RETURNING generation", (name, holder, until, at, at, at)).fetchone()
    return int(row[0]) if row else None


def renew(conn: Connection, name: str, holder: str, generation: int, lease_s: float, now: datetime) -> bool:
    """Extend the lease of this holder and generation while it is current; a lapsed lease is never revived."""
    at, until = to_text(now), to_text(now + timedelta(seconds=lease_s))
    return conn.execute(
        "UPDATE leader_leases SET expires_at = $1, renewed_at = $2 WHERE name = $3 AND holder = $4 AND generation = $5 "
        "AND expires_at > $6", (until, at, name, holder, generation, at)).rowcount == 1


def resign(conn: Connection, name: str, holder: str, generation: int, now: datetime) -> bool:
    """End the lease now (a clean stop), so a standby takes over at once."""
    at = to_text(now)
    return conn.execute("UPDATE leader_leases SET expires_at = $1 WHERE name = $2 AND holder = $3 AND generation = $4 "
                        "AND expires_at > $5", (at, name, holder, generation, at)).rowcount == 1


def fence(conn: Connection, held: Fence, now: datetime) -> None:
    """C16 inside a singleton's write transaction: its lease still held and unexpired, else `LeaseLost`."""
    if conn.execute("SELECT 1 FROM leader_leases WHERE name = $1 AND holder = $2 AND generation = $3 "
                    "AND expires_at > $4",
                    (held.name, held.holder, held.generation, to_text(now))).fetchone() is None:
        raise LeaseLost(held.name, held.holder, held.generation)


def release_all(conn: Connection, now: datetime) -> int:
    """Start-up under the instance lock: the leases of the process that held the file before are its no longer."""
    at = to_text(now)
    return conn.execute("UPDATE leader_leases SET expires_at = $1 WHERE expires_at > $2", (at, at)).rowcount


def heartbeat(conn: Connection, holder: str, pid: int, host: str, now: datetime, forget_after_s: float) -> None:
    """This process is alive (`processes.seen_at`); rows of processes not seen for `forget_after_s` are dropped."""
    at = to_text(now)
    conn.execute("INSERT INTO processes (holder, pid, host, started_at, seen_at) VALUES ($1, $2, $3, $4, $5) "
                 "ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at", (holder, pid, host, at, at))
    conn.execute("DELETE FROM processes WHERE seen_at < $1", (to_text(now - timedelta(seconds=forget_after_s)),))


def depart(conn: Connection, holder: str) -> None:
    conn.execute("DELETE FROM processes WHERE holder = $1", (holder,))


def leaders(conn: Connection, now: datetime) -> list[LeaderView]:
    rows = conn.execute("SELECT name, holder, generation, expires_at, acquired_at FROM leader_leases ORDER BY name")
    return [LeaderView(r[0], r[1], int(r[2]), round((from_text(r[3]) - now).total_seconds(), 3), from_text(r[4]))
            for r in rows]


def processes(conn: Connection, now: datetime) -> list[ProcessView]:
    rows = conn.execute("SELECT holder, pid, host, started_at, seen_at FROM processes ORDER BY started_at, holder")
    return [ProcessView(r[0], int(r[1]), r[2], from_text(r[3]), round((now - from_text(r[4])).total_seconds(), 3))
            for r in rows]


_LAPSED = ("state = 'sending' AND NOT EXISTS (SELECT 1 FROM leader_leases l WHERE l.name = '{name}' "
           "AND l.holder || '/' || l.generation = {table}.sender AND l.expires_at > $1)")


def sweep_sending(conn: Connection, now_text: str) -> tuple[list[int], list[int]]:
    """C7/C16: a delivery (or action) `sending` whose sender's lease is no longer current may or may not have left:
    it becomes unknown. One whose sender still holds its lease is left alone, whoever runs the sweep."""
    deliveries = conn.execute(
        "UPDATE deliveries SET state = 'unknown', updated_at = $1, reason = $2 WHERE "
        + _LAPSED.format(name="relay", table="deliveries") + " RETURNING delivery_id",
        (now_text, UNKNOWN_REASON)).fetchall()
    actions = conn.execute(
        "UPDATE actions SET state = 'unknown', updated_at = $1, reason = $2 WHERE "
        + _LAPSED.format(name="actions", table="actions") + " RETURNING action_id",
        (now_text, UNKNOWN_REASON)).fetchall()
    return sorted(int(r[0]) for r in deliveries), sorted(int(r[0]) for r in actions)
