"""PostgreSQL's own SQL: the guards for every check-then-act that SQLite's single writer (BEGIN IMMEDIATE) makes safe,
and the few statements whose text differs between the dialects. Everything else is the shared SQL of store/shared,
run through `PgConnection`.

Under READ COMMITTED two transactions may both read, then both write. Each spot below serialises on a lock:
- capacity (C1): `pg_advisory_xact_lock(ADMISSION_LOCK)` before the kept open-work count is read (migration 0019),
  so N admitters see each other's inserts (SKIP LOCKED is the wrong tool for a global budget);
- duplicate identity (C1): `INSERT ... ON CONFLICT (source) DO NOTHING RETURNING`; no row back means another
  transaction admitted it: read it and answer duplicate or conflict (a control or notice item, answered in its
  admission, locks its identity first);
- claim (C5, T2): the anchor (oldest open item of a due session) `FOR UPDATE SKIP LOCKED`, the turn is exactly the
  rows the UPDATE moved, and a unique index allows one open run per session;
- leases (C15): every write of a run first locks its run row under `FENCE` (open, unexpired on the database clock);
  the sweep takes expired runs `FOR UPDATE SKIP LOCKED`, so a fenced write and the sweep never both commit;
- forget against claim and finish (C12): forget locks the session row and its pending rows; finish and release read
  the epoch `FOR SHARE` (the claim creates the session row, so there is a row to lock);
- approval and daily spend (C11): the proposal `FOR UPDATE` and `pg_advisory_xact_lock` per spending day;
- resolve (C8): the unknown parts `FOR UPDATE`, so a second decision finds none unknown;
- producer cursors (C2): the cursor row `FOR UPDATE` before it is read and moved;
- report generations (C6): one writer per turn (the claim), the key r<anchor>.<generation> as the alarm.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from psycopg import errors as pgerrors

from ..errors import NotClaimed
from ..records import Admission, AdmitResult, Claim, Decision, Occurrence, Renewal, WorkKind
from ..shared import actions, inbox, producer_state, recovery, retention, sales, shop
from ..shared.connection import Connection, marks
from ..shared.inbox import ANCHOR, DUE, OWNER_FIRST
from ..shared.orders import DEFAULT_LEAD_TIME_DAYS
from ..shared.store import DEFAULT_LEASE_S

ADMISSION_LOCK = 0x5_0B07_0002   # advisory lock key: agent admission (the capacity budget)
SPEND_LOCK = 0x50B_0703          # advisory lock namespace (int4, with a hashed key): one spending day
IDENTITY_LOCK = 0x50B_0704       # advisory lock namespace (int4, with a hashed key): one occurrence identity
SHOP_LOCK = 0x5_0B07_0005        # advisory lock key: seeding and syncing the shop's items (processes start at once)


def seed_shop(conn: Connection, *args: Any, **kwargs: Any) -> bool:
    """The shop seeded once however many processes start at once on an empty database (K18): behind a lock, the
    second finds it seeded."""
    conn.execute("SELECT pg_advisory_xact_lock($1)", (SHOP_LOCK,))
    return shop.seed(conn, *args, **kwargs)


def sync_shop(conn: Connection, *args: Any, **kwargs: Any) -> list[str]:
    conn.execute("SELECT pg_advisory_xact_lock($1)", (SHOP_LOCK,))
    return shop.sync(conn, *args, **kwargs)


def import_sales(conn: Connection, *args: Any, **kwargs: Any) -> Any:
    """Two imports at once: the second checks its days after the first committed (behind the shop's lock)."""
    conn.execute("SELECT pg_advisory_xact_lock($1)", (SHOP_LOCK,))
    return sales.import_lines(conn, *args, **kwargs)


def _existing(conn: Connection, occurrence: Occurrence) -> AdmitResult | None:
    row = conn.execute("SELECT work_id, session, payload, pruned_at, payload_sha256 FROM work WHERE source = $1",
                       (occurrence.source,)).fetchone()
    if row is None:
        return None
    # a pruned row is a tombstone: its content is compared by the hash retention kept (C1)
    same = row["session"] == occurrence.session and retention.payload_matches(row, occurrence.payload)
    return AdmitResult(Admission.DUPLICATE if same else Admission.CONFLICT, row["work_id"])


def admit(conn: Connection, occurrence: Occurrence, now: str, capacity: int,
          open_count: list[int] | None = None) -> AdmitResult:
    """C1 as on SQLite (identity, then capacity for agent work, then the insert), with the capacity count taken under
    the admission lock and the insert idempotent on the source."""
    found = _existing(conn, occurrence)
    if found is not None:
        return found
    if occurrence.kind is WorkKind.AGENT:
        if open_count is None:
            open_count = []
        if not open_count:             # once per transaction: lock, then read what every committed admitter left
            conn.execute("SELECT pg_advisory_xact_lock($1)", (ADMISSION_LOCK,))
            open_count.append(inbox.kept_open_agent_work(conn))
        if open_count[0] >= capacity:
            inbox.count(conn, now, "refused_capacity")
            return AdmitResult(Admission.REFUSED)
    row = conn.execute(
        "INSERT INTO work (source, session, kind, payload, destination, admitted_at) VALUES ($1, $2, $3, $4, $5, $6) "
        "ON CONFLICT (source) DO NOTHING RETURNING work_id",
        (occurrence.source, occurrence.session, occurrence.kind.value, occurrence.payload, occurrence.destination,
         now)).fetchone()
    if row is None:                    # admitted by another transaction since the first look
        found = _existing(conn, occurrence)
        assert found is not None
        return found
    if occurrence.kind is WorkKind.AGENT and open_count:
        open_count[0] += 1
    return AdmitResult(Admission.ACCEPTED, row[0])


def admit_answered(conn: Connection, occurrence: Occurrence, now: str, answer: Any) -> AdmitResult:
    """A control or notice item with its report (store/shared/inbox.py), with its identity locked first: the same
    item admitted by two connections at once is one accepted and one duplicate, never a unique violation (its
    report is built between the identity check and the insert, so ON CONFLICT alone cannot cover it)."""
    conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", (IDENTITY_LOCK, occurrence.source))
    return inbox.admit_answered(conn, occurrence, now, answer)


def claim(conn: Connection, worker_id: str, run_id: str, now: str, debounce_cutoff: str,
          skip_sessions: Sequence[str] = (), *, lease_s: float = DEFAULT_LEASE_S) -> Claim | None:
    """C5 as on SQLite (the same due rule, `DUE`, clock steps included), safe with several claimers: only a
    session's anchor qualifies and it is locked SKIP LOCKED, so a concurrent claimer takes another session or none,
    and never item 2 of a session out of order. The run is a lease (C15): it expires `lease_s` after the claim on
    the database clock unless renewed. An open run of the session already there (the unique index
    runs_one_open_per_session, the backstop of T2) means the session is busy: another session is tried, or none."""
    skip = tuple(skip_sessions)
    while True:
        skipped = f"AND w.session NOT IN ({marks(len(skip), first=3)})" if skip else ""
        row = conn.execute(
            f"""SELECT w.session, w.work_id FROM work w
                WHERE w.state = 'pending' AND w.kind = 'agent' AND {ANCHOR} AND {DUE}
                  {skipped}
                ORDER BY {OWNER_FIRST} LIMIT 1 FOR UPDATE OF w SKIP LOCKED""",
            (debounce_cutoff, now, *skip)).fetchone()
        if row is None:
            return None
        session = row["session"]
        conn.execute("INSERT INTO sessions (session) VALUES ($1) ON CONFLICT (session) DO NOTHING", (session,))
        conn.execute("SAVEPOINT claim_run")
        try:
            found = _open_run(conn, worker_id, run_id, session, now, lease_s)
        except pgerrors.UniqueViolation as exc:
            if exc.diag.constraint_name != "runs_one_open_per_session":
                raise
            conn.execute("ROLLBACK TO SAVEPOINT claim_run")     # busy: nothing of this attempt stays
            skip += (session,)
            continue
        conn.execute("RELEASE SAVEPOINT claim_run")
        return found


def _open_run(conn: Connection, worker_id: str, run_id: str, session: str, now: str,
              lease_s: float) -> Claim | None:
    rows = conn.execute(
        "UPDATE work SET state = 'running', attempts = attempts + 1, worker_id = $1, run_id = $2, not_before = NULL "
        "WHERE session = $3 AND state = 'pending' AND kind = 'agent' RETURNING *",
        (worker_id, run_id, session)).fetchall()
    if not rows:                       # a forget cancelled them meanwhile
        return None
    # the epoch after the move: a forget that cancelled pending items committed before it, or waits for this commit
    epoch = int(conn.execute("SELECT epoch FROM sessions WHERE session = $1 FOR SHARE", (session,)).fetchone()[0])
    return inbox.start_run(conn, rows, worker_id, run_id, session, epoch, now,
                           lease=functools.partial(lease_expiry, lease_s))


def lease_expiry(lease_s: float, mark: int = 1) -> tuple[str, tuple[float]]:
    """The SQL of a lease's expiry: the database clock (never a worker's) plus the lease (C15), its parameter bound
    as `$mark`."""
    return f"clock_timestamp() + make_interval(secs => ${mark})", (float(lease_s),)


# ---- leases (C15) -------------------------------------------------------------------------------------------------
# The fence every write of a run starts with, in the write's own transaction: the run still open, held by this
# worker, its lease unexpired on the database clock, and its row locked until the commit, so a sweep (which takes
# expired runs SKIP LOCKED) and this write never both commit. A lapsed lease is never revived (renew requires it live).
FENCE = ("SELECT 1 FROM runs WHERE run_id = $1 AND worker_id = coalesce($2, worker_id) AND ended_at IS NULL "
         "AND lease_expires_at > clock_timestamp() FOR UPDATE")


def fence(conn: Connection, run_id: str, worker_id: str | None = None) -> None:
    """Raise NotClaimed (nothing written: the caller's transaction rolls back) unless `run_id` still holds its lease.
    `worker_id` is checked when the caller knows it (finish, fail, release); the journal and the tools name the run
    only (a run id is a random 128-bit value drawn per claim, never reused)."""
    if conn.execute(FENCE, (run_id, worker_id)).fetchone() is None:
        raise NotClaimed(run_id, "its lease is over (expired, or the run ended); nothing of it is written")


def renew(conn: Connection, run_id: str, lease_s: float) -> Renewal:
    """Extend a live lease by `lease_s` from now on the database clock (HELD). Refused, nothing changes and the run is
    read in the same transaction: ENDED by its own ending write, else LAPSED (never revived). An ending write in
    flight holds the run's row (the fence), so the UPDATE waits for its commit and the read sees it."""
    expression, params = lease_expiry(lease_s)
    moved: int = conn.execute(
        f"UPDATE runs SET lease_expires_at = {expression} WHERE run_id = $2 AND ended_at IS NULL "
        "AND lease_expires_at > clock_timestamp()", (*params, run_id)).rowcount
    return Renewal.HELD if moved == 1 else inbox.run_ended(conn, run_id) or Renewal.LAPSED


SWEEP_REASON = "the run's lease expired (its process died, stopped or lost the database)"


def sweep_one(conn: Connection, now: str, attempt_cap: int) -> tuple[bool, list[int]] | None:
    """One expired open run, taken `FOR UPDATE SKIP LOCKED` (a run whose owner is inside a fenced write is skipped:
    exactly one of the two commits), ended by C10's rule (store/shared/recovery.py `recover_run`: an `external`
    operation started and never finished counts as having acted) with C9's cap; outcome 'expired', its proposals
    void (C11). None when no run is expired. A live lease is never touched."""
    run = conn.execute(
        "SELECT run_id, worker_id, session, session_epoch FROM runs WHERE ended_at IS NULL "
        "AND lease_expires_at <= clock_timestamp() ORDER BY lease_expires_at LIMIT 1 FOR UPDATE SKIP LOCKED").fetchone()
    if run is None:
        return None
    hold_epoch(conn, run["session"])
    result = recovery.recover_run(conn, run, now, attempt_cap, reason=SWEEP_REASON, started_external_acted=True,
                                  ended_as="expired")
    if not result[1]:          # an open run without running items (none is written so; planted or old): just end it
        inbox._end_run(conn, run["run_id"], now, "expired", stop_reason=SWEEP_REASON)
    return result


def hold_epoch(conn: Connection, session: str) -> None:
    """C12: finish and release read the session's epoch under a share lock, so a forget cannot commit between that
    read and the history they write."""
    conn.execute("SELECT epoch FROM sessions WHERE session = $1 FOR SHARE", (session,))


def lock_for_forget(conn: Connection, session: str) -> None:
    """C12: forget takes the session row (finish waits, then sees the new epoch) and the pending rows (a claim
    waits, then finds them failed)."""
    conn.execute("INSERT INTO sessions (session) VALUES ($1) ON CONFLICT (session) DO NOTHING", (session,))
    conn.execute("SELECT epoch FROM sessions WHERE session = $1 FOR UPDATE", (session,))
    conn.execute("SELECT work_id FROM work WHERE session = $1 AND state = 'pending' AND kind = 'agent' FOR UPDATE",
                 (session,))


def approve(conn: Connection, proposal_id: int, by: str, now: str, day: str, day_max_cents: int | None,
            supplier_destination: str, lead_time_days: int = DEFAULT_LEAD_TIME_DAYS) -> Decision:
    """C11: the proposal locked, and the day's spending behind its advisory lock, then the shared approval."""
    conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", (SPEND_LOCK, day))
    conn.execute("SELECT 1 FROM proposals WHERE proposal_id = $1 FOR UPDATE", (proposal_id,))
    return actions.approve(conn, proposal_id, by, now, day, day_max_cents, supplier_destination, lead_time_days)


def lock_unknown_parts(conn: Connection, report_id: str) -> None:
    """C8: a second decision on the same report waits, then finds no part unknown (refused, nothing counted)."""
    conn.execute("SELECT delivery_id FROM deliveries WHERE report_id = $1 AND state = 'unknown' FOR UPDATE",
                 (report_id,))


def lock_cursor(conn: Connection, schedule: str) -> None:
    conn.execute("SELECT 1 FROM schedule_cursors WHERE schedule = $1 FOR UPDATE", (schedule,))


class ProducerState(producer_state.ProducerState):
    """The shared producer records (store/shared/producer_state.py), with the cursor row locked before it is read
    (two producers never move a cursor from the same stale reading)."""

    def get_cursor(self, schedule: str) -> Any:
        lock_cursor(self._conn, schedule)
        return super().get_cursor(schedule)
