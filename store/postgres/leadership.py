"""Leader leases (C16) on PostgreSQL: every judgement of a lease (acquire, renew, fence, sweep) is made by the
database clock, `clock_timestamp()`, so processes whose own clocks disagree can never both hold one.

The fence takes the lease row FOR SHARE inside the singleton's own write transaction: a takeover (which updates the
row) waits until that transaction has committed, so a fenced write and a takeover never interleave.

A process frozen (SIGSTOP, a VM pause) inside such a transaction, or inside its renewal, keeps that row lock for as
long as it is frozen, so no standby could take the lease over however long ago it lapsed. Every statement that locks
a lease row therefore also sets, for its own transaction only, `idle_in_transaction_session_timeout`: a lease
transaction whose client has been silent for `FROZEN_MS` is ended by the server (rolled back, its connection closed;
the frozen process finds out when it wakes: a lost connection, or a commit read back, K16). A standby's acquire
waits for the row's lock no longer than its caller waits for the answer (a third of the lease).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from ..clock import from_db, to_text
from ..errors import LeaseLost
from ..records import Fence, LeaderView, ProcessView
from ..shared.outbox import UNKNOWN_REASON
from .connection import LOCK_TIMEOUT_MS, PgConnection

# A lease transaction whose client has been silent this long is a frozen process's, and the server ends it: as long as
# any transaction may wait for a lock (the pool's lock_timeout), so it ends no transaction a live process would not.
FROZEN_MS = LOCK_TIMEOUT_MS
_BOUNDED = f"set_config('idle_in_transaction_session_timeout', '{FROZEN_MS}', true)"


def _span(mark: int) -> str:
    """The database clock plus a lease of `$mark` seconds."""
    return f"clock_timestamp() + make_interval(secs => ${mark})"


def acquire(conn: PgConnection, name: str, holder: str, lease_s: float, now: Any = None) -> int | None:
    # `ON CONFLICT DO UPDATE ... WHERE` locks the conflicting row even when its WHERE is false, until the transaction
    # ends: a standby frozen (SIGSTOP, a VM pause) before its COMMIT would keep a live lease's row locked, its
    # leader's renewals waiting. So the row is only proposed when no unexpired lease is visible (a plain read takes
    # no lock); the WHERE still decides a race with a renewal committed meanwhile.
    # the row may be locked by the lapsed leader's last fenced write or renewal (ended by the server after
    # FROZEN_MS if that leader froze): waited for no longer than the Leader waits for this answer
    conn.execute("SELECT set_config('lock_timeout', $1, true)", (f"{max(50, int(lease_s * 1000 / 3))}ms",))
    row = conn.execute(
        "INSERT INTO leader_leases (name, holder, generation, expires_at, acquired_at, renewed_at) "
        f"SELECT $1, $2, 1, {_span(3)}, clock_timestamp(), clock_timestamp() WHERE NOT EXISTS ("
        "SELECT 1 FROM leader_leases WHERE name = $4 AND expires_at > clock_timestamp()) "
        "ON CONFLICT (name) DO UPDATE SET "
        "holder = excluded.holder, generation = leader_leases.generation + 1, expires_at = excluded.expires_at, "
        "acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at "
        f"WHERE leader_leases.expires_at <= clock_timestamp() RETURNING generation, {_BOUNDED}",
        (name, holder, float(lease_s), name)).fetchone()
    return int(row[0]) if row else None


def renew(conn: PgConnection, name: str, holder: str, generation: int, lease_s: float, now: Any = None) -> bool:
    return bool(conn.execute(
        f"UPDATE leader_leases SET expires_at = {_span(1)}, renewed_at = clock_timestamp() WHERE name = $2 "
        f"AND holder = $3 AND generation = $4 AND expires_at > clock_timestamp() RETURNING {_BOUNDED}",
        (float(lease_s), name, holder, generation)).rowcount == 1)


def resign(conn: PgConnection, name: str, holder: str, generation: int, now: Any = None) -> bool:
    return bool(conn.execute(
        "UPDATE leader_leases SET expires_at = clock_timestamp() WHERE name = $1 AND holder = $2 AND generation = $3 "
        f"AND expires_at > clock_timestamp() RETURNING {_BOUNDED}", (name, holder, generation)).rowcount == 1)


def fence(conn: PgConnection, held: Fence, now: Any = None) -> None:
    """C16 inside a singleton's write transaction: its lease still held and unexpired on the database clock, else
    `LeaseLost`; the row is held FOR SHARE until this transaction ends, so a takeover waits for its commit (and is
    ended by the server if this process freezes inside it: FROZEN_MS)."""
    if conn.execute(f"SELECT {_BOUNDED} FROM leader_leases WHERE name = $1 AND holder = $2 AND generation = $3 "
                    "AND expires_at > clock_timestamp() FOR SHARE",
                    (held.name, held.holder, held.generation)).fetchone() is None:
        raise LeaseLost(held.name, held.holder, held.generation)


def release_all(conn: PgConnection, now: datetime) -> int:
    """`recover` (start-up recovery where one process owns the database): every lease ends now."""
    at = to_text(now)
    return int(conn.execute("UPDATE leader_leases SET expires_at = $1 WHERE expires_at > $2", (at, at)).rowcount)


def heartbeat(conn: PgConnection, holder: str, pid: int, host: str, now: Any, forget_after_s: float) -> None:
    conn.execute("INSERT INTO processes (holder, pid, host, started_at, seen_at) "
                 "VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp()) "
                 "ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at", (holder, pid, host))
    conn.execute("DELETE FROM processes WHERE seen_at < clock_timestamp() - make_interval(secs => $1)",
                 (float(forget_after_s),))


def depart(conn: PgConnection, holder: str) -> None:
    conn.execute("DELETE FROM processes WHERE holder = $1", (holder,))


def leaders(conn: PgConnection, now: Any = None) -> list[LeaderView]:
    rows = conn.execute(
        "SELECT name, holder, generation, extract(epoch FROM expires_at - clock_timestamp())::float8, acquired_at "
        "FROM leader_leases ORDER BY name").fetchall()
    return [LeaderView(r[0], r[1], int(r[2]), round(float(r[3]), 3), from_db(r[4])) for r in rows]


def processes(conn: PgConnection, now: Any = None) -> list[ProcessView]:
    rows = conn.execute(
        "SELECT holder, pid, host, started_at, "
        "extract(epoch FROM clock_timestamp() - seen_at)::float8 FROM processes ORDER BY started_at, holder"
    ).fetchall()
    return [ProcessView(r[0], int(r[1]), r[2], from_db(r[3]), round(float(r[4]), 3)) for r in rows]


_LAPSED = ("state = 'sending' AND NOT EXISTS (SELECT 1 FROM leader_leases l WHERE l.name = '{name}' "
           "AND l.holder || '/' || l.generation = {table}.sender AND l.expires_at > clock_timestamp())")


def sweep_sending(conn: PgConnection, now_text: str) -> tuple[list[int], list[int]]:
    """C7/C16: a `sending` delivery or action whose sender's lease is over (on the database clock) becomes unknown."""
    deliveries = conn.execute(
        "UPDATE deliveries SET state = 'unknown', updated_at = $1, reason = $2 WHERE "
        + _LAPSED.format(name="relay", table="deliveries") + " RETURNING delivery_id",
        (now_text, UNKNOWN_REASON)).fetchall()
    actions = conn.execute(
        "UPDATE actions SET state = 'unknown', updated_at = $1, reason = $2 WHERE "
        + _LAPSED.format(name="actions", table="actions") + " RETURNING action_id",
        (now_text, UNKNOWN_REASON)).fetchall()
    return sorted(int(r[0]) for r in deliveries), sorted(int(r[0]) for r in actions)
