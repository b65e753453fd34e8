"""The work inbox: admission (C1), claim (C5), finish (C6), release and fail (C9), forget (C12).

Every function here runs inside a transaction that its caller opened (`Database.write`), on the connection it is
given, so a producer can admit inside its own transaction together with its cursor (C2).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .. import faults, redaction
from ..clock import from_db, from_db_or_none
from ..errors import NotClaimed
from ..records import (
    Admission,
    AdmitResult,
    Claim,
    FinishOutcome,
    Occurrence,
    Renewal,
    ReportDraft,
    WorkItem,
    WorkKind,
    WorkState,
)
from . import outbox, retention, shop
from .connection import Connection, Row, marks

OPEN_AGENT = "kind = 'agent' AND state IN ('pending', 'running')"


def minute_of(now: str) -> str:
    return now[:16]


def count(conn: Connection, now: str, kind: str, by: int = 1) -> int:
    """Bump a per-minute counter (refusals, strangers, malformed input) and return its new value."""
    row = conn.execute(
        "INSERT INTO counters (minute, kind, count) VALUES ($1, $2, $3) "
        "ON CONFLICT (minute, kind) DO UPDATE SET count = counters.count + excluded.count RETURNING count",
        (minute_of(now), kind, by)).fetchone()
    return row[0]


def open_agent_work(conn: Connection, cap: int | None = None) -> int:
    """Open agent work (pending + running), counted; with `cap`, counting stops there. Admission reads the kept
    count instead (`kept_open_agent_work`); this count is what `shopbot check` (W1) holds it against."""
    if cap is None:
        return conn.execute(f"SELECT count(*) FROM work WHERE {OPEN_AGENT}").fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM work WHERE {OPEN_AGENT} LIMIT $1) AS open",
                        (cap,)).fetchone()[0]


def kept_open_agent_work(conn: Connection) -> int:
    """Open agent work as the triggers of migration 0019 keep it: a few rows read, however long the queue (C1's
    capacity check no longer slows as work piles up)."""
    return int(conn.execute("SELECT sum(n) FROM open_agent_tally").fetchone()[0])


def admit(conn: Connection, occurrence: Occurrence, now: str, capacity: int,
          open_count: list[int] | None = None) -> AdmitResult:
    """C1 on an open transaction: identity first, then capacity (agent work only), then the insert.

    `open_count` carries the open agent work read once per transaction (a batch of admissions reads it once, then
    counts its own inserts: BEGIN IMMEDIATE holds the write lock, so nothing else changes it meanwhile)."""
    existing = conn.execute("SELECT work_id, session, payload, pruned_at, payload_sha256 FROM work WHERE source = $1",
                            (occurrence.source,)).fetchone()
    if existing is not None:       # a retention tombstone compares by its kept hash (store/shared/retention.py)
        same = existing["session"] == occurrence.session and retention.payload_matches(existing, occurrence.payload)
        return AdmitResult(Admission.DUPLICATE if same else Admission.CONFLICT, existing["work_id"])
    if occurrence.kind is WorkKind.AGENT:
        if open_count is None:
            open_count = [kept_open_agent_work(conn)]
        elif not open_count:
            open_count.append(kept_open_agent_work(conn))
        if open_count[0] >= capacity:
            count(conn, now, "refused_capacity")
            return AdmitResult(Admission.REFUSED)
        open_count[0] += 1
    work_id = conn.execute(
        "INSERT INTO work (source, session, kind, payload, destination, admitted_at) VALUES ($1, $2, $3, $4, $5, $6) "
        "RETURNING work_id",
        (occurrence.source, occurrence.session, occurrence.kind.value, occurrence.payload,
         occurrence.destination, now)).fetchone()[0]
    return AdmitResult(Admission.ACCEPTED, work_id)


def admit_answered(conn: Connection, occurrence: Occurrence, now: str,
                   answer: Callable[[int], ReportDraft]) -> AdmitResult:
    """A control or notice item: admitted, run and finished with its report in this one transaction (docs/contracts.md,
    Words).

    `answer(work_id)` is called only for a new occurrence, inside the transaction, and returns the report to store.
    Never refused for capacity; never claimed by the worker; not part of agent history.
    """
    if occurrence.kind is WorkKind.AGENT:
        raise ValueError("admit_answered is for control and notice items")
    # the bot's own text, which may quote outside error text (an order's outcome on its card, a fault): no secret
    # is stored in its payload or its report (store/redaction.py)
    occurrence = dataclasses.replace(occurrence, payload=redaction.error_detail(occurrence.payload))
    result = admit(conn, occurrence, now, capacity=0)
    if result.outcome is not Admission.ACCEPTED:
        return result
    assert result.work_id is not None
    draft = answer(result.work_id)
    draft = dataclasses.replace(draft, body=redaction.error_detail(draft.body))
    conn.execute("UPDATE work SET state = 'running' WHERE work_id = $1", (result.work_id,))
    report_id = outbox.insert_report(conn, [result.work_id], draft, now, run_id=None)
    conn.execute("UPDATE work SET state = $1, ended_at = $2 WHERE work_id = $3",
                 ("failed" if draft.is_error else "finished", now, result.work_id))
    return AdmitResult(Admission.ACCEPTED, result.work_id, report_id)


def work_item(row: Row) -> WorkItem:
    return WorkItem(row["work_id"], row["source"], row["session"], WorkKind(row["kind"]), row["payload"],
                    row["destination"], WorkState(row["state"]), row["attempts"], from_db(row["admitted_at"]))


def session_epoch(conn: Connection, session: str) -> int:
    row = conn.execute("SELECT epoch FROM sessions WHERE session = $1", (session,)).fetchone()
    return row[0] if row else 0


# C5 under clock steps. Times are wall-clock text, so a backward step of the wall clock puts earlier stamps in the
# future. A debounce judged only as `admitted_at <= now - debounce` would then hold admitted work for the whole step
# (an hour's step: an hour's silence), and a not-before time would wait the step on top of its delay. So an item
# stamped after `now` (admitted before a backward step) is due at once, and so is a not-before time set by a release
# stamped after `now`: a backward step never delays admitted work by more than the debounce window (it can only
# shorten one window or one back-off), and a forward step claims early by at most the step.
# Its parameters are $1 (the debounce cutoff) and $2 (now).
DUE = ("(w.admitted_at <= $1 OR w.admitted_at > $2) AND (w.not_before IS NULL OR w.not_before <= $2 "
       "OR (SELECT r.ended_at FROM runs r WHERE r.run_id = w.run_id) > $2)")
# The owner's sessions are claimed before the producers' (a stock check or a scheduled brief) when both are due: on a
# slow model a producer's turn must not delay an owner's question that arrived before it started; oldest first within.
# Migration 0023's work_claimable index is keyed by exactly this order, so a claim walks it and stops at the first due
# anchor instead of judging every pending item and sorting them (the text must stay the index's expression).
OWNER_FIRST = "CASE WHEN w.session LIKE 'tg:%' THEN 0 ELSE 1 END, w.work_id"
# A session's anchor: its oldest open agent item, pending (a running turn holds its session's pending items back).
# One probe of work_open (session, work_id) per candidate.
ANCHOR = ("NOT EXISTS (SELECT 1 FROM work x WHERE x.session = w.session AND x.state IN ('pending', 'running') "
          "AND x.kind = 'agent' AND x.work_id < w.work_id)")


def claim(conn: Connection, worker_id: str, run_id: str, now: str, debounce_cutoff: str,
          skip_sessions: Sequence[str] = ()) -> Claim | None:
    """C5: the pending items of one due session become one turn, running for this worker, committed before any
    model runs. A session is due when its oldest pending item was admitted at or before the cutoff (the debounce
    window is not reset by later items) and has no not-before time in the future, and no turn of it is running
    (`DUE`, which also keeps a backward clock step from holding admitted work)."""
    skip = tuple(skip_sessions)
    # an empty NOT IN () is SQLite's only: the clause is left out when nothing is skipped
    skipped = f"AND w.session NOT IN ({marks(len(skip), first=3)})" if skip else ""
    row = conn.execute(
        f"""SELECT w.session, w.work_id FROM work w
            WHERE w.state = 'pending' AND w.kind = 'agent' AND {ANCHOR} AND {DUE}
              {skipped}
            ORDER BY {OWNER_FIRST} LIMIT 1""",
        (debounce_cutoff, now, *skip)).fetchone()
    if row is None:
        return None
    session = row["session"]
    epoch = session_epoch(conn, session)
    # `state IN (...)` restates work_open's condition so SQLite finds the session's rows through it (it does not
    # infer it from `state = 'pending'`, and walked every pending item instead)
    rows = conn.execute(
        "UPDATE work SET state = 'running', attempts = attempts + 1, worker_id = $1, run_id = $2, not_before = NULL "
        "WHERE session = $3 AND state IN ('pending', 'running') AND state = 'pending' AND kind = 'agent' RETURNING *",
        (worker_id, run_id, session)).fetchall()
    return start_run(conn, rows, worker_id, run_id, session, epoch, now)


def claimable(conn: Connection, now: str, debounce_cutoff: str) -> bool:
    """Whether `claim` would find a due session now (its own condition, as an existence test)."""
    return conn.execute(
        f"""SELECT EXISTS (SELECT 1 FROM work w
            WHERE w.state = 'pending' AND w.kind = 'agent' AND {ANCHOR} AND {DUE})""",
        (debounce_cutoff, now)).fetchone()[0] == 1


def no_lease(mark: int) -> tuple[str, Sequence[Any]]:
    return "NULL", ()


def start_run(conn: Any, rows: Sequence[Any], worker_id: str, run_id: str, session: str, epoch: int,
              now: str, lease: Callable[[int], tuple[str, Sequence[Any]]] = no_lease) -> Claim:
    """The turn a claim moved to running (`rows`, the work rows): its run recorded, its Claim (C5, C9, C12).
    `lease(mark)` is the SQL expression (and its parameters, bound from `$mark` on) of the run's lease expiry: none
    on SQLite, the database clock plus the lease on PostgreSQL (C15)."""
    items = tuple(sorted((work_item(r) for r in rows), key=lambda item: item.work_id))
    attempt = max(item.attempts for item in items)
    expression, lease_params = lease(8)
    conn.execute(
        "INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at, lease_expires_at) "
        f"VALUES ($1, $2, $3, $4, $5, $6, $7, {expression})",
        (run_id, worker_id, session, items[0].work_id, attempt, epoch, now, *lease_params))
    return Claim(run_id, worker_id, session, items, attempt, epoch)


def waiting_sessions(conn: Connection) -> list[tuple[datetime, datetime | None, datetime | None]]:
    """(admitted_at, not_before, released_at) of the anchors (oldest items of sessions whose turn is not running)
    among which the earliest due time lies: every anchor with a not-before time, and of those without one the
    earliest and the latest admitted (the latest is due at once when a backward clock step put it after now). One
    walk of the claim's index each and a few rows back, however many sessions wait."""
    held = conn.execute(
        "SELECT w.admitted_at, w.not_before, (SELECT r.ended_at FROM runs r WHERE r.run_id = w.run_id) "
        f"FROM work w WHERE w.state = 'pending' AND w.kind = 'agent' AND w.not_before IS NOT NULL AND {ANCHOR}"
    ).fetchall()
    unheld = conn.execute(
        "SELECT min(w.admitted_at), max(w.admitted_at) FROM work w "
        f"WHERE w.state = 'pending' AND w.kind = 'agent' AND w.not_before IS NULL AND {ANCHOR}").fetchone()
    rows = [(r[0], r[1], r[2]) for r in held] + [(at, None, None) for at in unheld if at is not None]
    return [(from_db(a), from_db_or_none(n), from_db_or_none(r)) for a, n, r in rows]


def _held(conn: Connection, claim: Claim) -> None:
    """C5: a worker finishes, releases or fails only the exact set it claimed and still holds."""
    ids = [item.work_id for item in claim.items]
    held = conn.execute(
        f"SELECT count(*) FROM work WHERE work_id IN ({marks(len(ids), first=3)}) "
        "AND state = 'running' AND run_id = $1 AND worker_id = $2",
        (claim.run_id, claim.worker_id, *ids)).fetchone()[0]
    _check_held(claim, held)


def _check_held(claim: Claim, held: int) -> None:
    if held != len(claim.items):
        raise NotClaimed(claim.run_id, f"holds {held} of the {len(claim.items)} items of its turn; it cannot end them")


def _finish_held(conn: Connection, claim: Claim, now: str) -> None:
    """C5 and C6 in one statement: the items the claim still holds become finished, and a worker that does not hold
    every item of its turn finishes none (NotClaimed: its transaction rolls back, nothing of it stays)."""
    ids = [item.work_id for item in claim.items]
    held = conn.execute(
        f"UPDATE work SET state = 'finished', ended_at = $1 WHERE work_id IN ({marks(len(ids), first=4)}) "
        "AND state = 'running' AND run_id = $2 AND worker_id = $3", (now, claim.run_id, claim.worker_id, *ids)).rowcount
    _check_held(claim, held)


def _journaled(conn: Connection, run_id: str) -> bool:
    """Whether the run journaled a tool call or recorded a proposal: most turns call no tool, and their finish has
    nothing to attach to the report (one read instead of three updates that would find nothing)."""
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM operations WHERE run_id = $1) "
                             "OR EXISTS (SELECT 1 FROM proposals WHERE run_id = $1)", (run_id,)).fetchone()[0])


def _end_run(conn: Connection, run_id: str, now: str, outcome: str, *, report_id: str | None = None,
             stop_reason: str | None = None, usage: tuple[int, int, int] = (0, 0, 0)) -> None:
    """A run that did not finish: its proposals void (C11), its end recorded."""
    shop.void_proposals(conn, run_id, now)   # C11: a proposal whose turn did not finish is void
    _record_end(conn, run_id, now, outcome, report_id=report_id, stop_reason=stop_reason, usage=usage)


def _record_end(conn: Connection, run_id: str, now: str, outcome: str, *, report_id: str | None,
                stop_reason: str | None, usage: tuple[int, int, int]) -> None:
    conn.execute(
        "UPDATE runs SET ended_at = $1, outcome = $2, report_id = $3, stop_reason = $4, "
        "model_calls = model_calls + $5, input_tokens = input_tokens + $6, output_tokens = output_tokens + $7 "
        "WHERE run_id = $8",
        (now, outcome, report_id, redaction.error_detail(stop_reason), *usage, run_id))


# the outcomes a run's own ending write (finish, finish_counts, fail, release) gives it; a sweep ends a run `expired`
# (SQLite's start-up recovery also ends runs `released` or `failed`: a stopped process's, whose turns run no more)
OWN_ENDINGS = ("finished", "discarded", "failed", "released")


def run_ended(conn: Connection, run_id: str) -> Renewal | None:
    """C15, for a renewal: None while the run is open; ENDED once its own ending write ended it; LAPSED when anything
    else did, or there is no such run."""
    row = conn.execute("SELECT ended_at, outcome FROM runs WHERE run_id = $1", (run_id,)).fetchone()
    if row is not None and row[0] is None:
        return None
    return Renewal.ENDED if row is not None and row[1] in OWN_ENDINGS else Renewal.LAPSED


def finish(conn: Connection, claim: Claim, draft: ReportDraft | Callable[[], ReportDraft],
           now: str, *,
           user_text: str | None = None, model_said: tuple[str, str] | None = None, stop_reason: str | None = None,
           usage: tuple[int, int, int] = (0, 0, 0),
           apply: Callable[[Connection], None] | None = None) -> FinishOutcome:
    """C6 in one transaction: items finished, report inserted and linked, operations attached, history updated.

    `apply` runs domain changes that belong to the same commit (a till count's stock update). The fault point
    `finish-writes` lies between the two writes. If the session was forgotten during the run (C12) the result is
    discarded and the items fail with a report saying so.
    """
    if session_epoch(conn, claim.session) != claim.epoch:    # C12: forgotten while it ran
        _held(conn, claim)
        return FinishOutcome(_discard(conn, claim, now, usage), discarded=True)
    ids = [item.work_id for item in claim.items]
    _finish_held(conn, claim, now)
    faults.reached("finish-writes")
    if apply is not None:
        apply(conn)
    if callable(draft):   # a report rendered from what `apply` did, inside the same transaction
        draft = draft()
    report_id = outbox.insert_report(conn, ids, draft, now, run_id=claim.run_id)
    if _journaled(conn, claim.run_id):
        conn.execute("UPDATE operations SET report_id = $1 WHERE run_id = $2", (report_id, claim.run_id))
        shop.activate_proposals(conn, claim.run_id, report_id, now)
    _record_end(conn, claim.run_id, now, "finished", report_id=report_id, stop_reason=stop_reason, usage=usage)
    if user_text is not None:
        conn.execute("INSERT INTO history (session, role, text, created_at) VALUES ($1, 'user', $2, $3)",
                     (claim.session, user_text, now))
        prose, messages = model_said if model_said is not None else (draft.body, None)
        conn.execute("INSERT INTO history (session, role, text, report_id, created_at, messages) "
                     "VALUES ($1, 'assistant', $2, $3, $4, $5)", (claim.session, prose, report_id, now, messages))
    return FinishOutcome(report_id)


def _discard_if_forgotten(conn: Connection, claim: Claim, now: str,
                          usage: tuple[int, int, int]) -> str | None:
    """C12: a turn whose conversation was forgotten while it ran is never stored nor run again: its items fail with
    a report saying so. Returns that report's id, or None when the conversation was not forgotten."""
    if session_epoch(conn, claim.session) == claim.epoch:
        return None
    return _discard(conn, claim, now, usage)


def _discard(conn: Connection, claim: Claim, now: str, usage: tuple[int, int, int]) -> str:
    who = conn.execute("SELECT forgotten_by FROM sessions WHERE session = $1", (claim.session,)).fetchone()[0]
    cancel = ReportDraft(
        f"This conversation was forgotten ({who}) while I was answering; the answer was discarded.",
        destination=claim.destination, is_error=True)
    report_id = _fail_items(conn, [item.work_id for item in claim.items], cancel, now, claim.run_id)
    _end_run(conn, claim.run_id, now, "discarded", report_id=report_id, stop_reason="forgotten", usage=usage)
    return report_id


def _fail_items(conn: Connection, ids: Sequence[int], draft: ReportDraft, now: str,
                run_id: str | None) -> str:
    """Items (running or pending) become failed with one error report linked to all of them (C9, R3)."""
    conn.execute(f"UPDATE work SET state = 'failed', ended_at = $1 WHERE work_id IN ({marks(len(ids), first=2)})",
                 (now, *ids))
    return outbox.insert_report(conn, ids, draft, now, run_id=run_id)


def fail(conn: Connection, claim: Claim, draft: ReportDraft, now: str, *,
         stop_reason: str | None = None, usage: tuple[int, int, int] = (0, 0, 0), ended_as: str = "failed") -> str:
    """running -> failed with an error report the owner will see (C9). `ended_as` is the run's outcome ('expired'
    when a sweep ends a lapsed lease, C15)."""
    _held(conn, claim)
    report_id = _fail_items(conn, [item.work_id for item in claim.items], draft, now, claim.run_id)
    conn.execute("UPDATE operations SET report_id = $1 WHERE run_id = $2", (report_id, claim.run_id))
    _end_run(conn, claim.run_id, now, ended_as, report_id=report_id, stop_reason=stop_reason, usage=usage)
    return report_id


def cap_failure(attempts: int, destination: str | None, reason: str) -> ReportDraft:
    return ReportDraft(
        f"Sorry, I could not do this after {attempts} attempts ({reason}). Nothing was lost: the request is "
        "kept as failed, and you can ask again.", destination=destination, is_error=True)


def release(conn: Connection, claim: Claim, now: str, not_before: str | None, attempt_cap: int, *,
            reason: str, refund: bool = False, usage: tuple[int, int, int] = (0, 0, 0),
            ended_as: str | None = None) -> str | None:
    """running -> pending with a not-before time, or failed at the attempt cap (C9). `refund` gives back the
    attempt (a model call abandoned at shutdown). A turn whose conversation was forgotten meanwhile is discarded
    (C12). Returns the error report id when the turn failed (the cap, or forgotten). `ended_as` overrides the run's
    outcome ('expired' when a sweep ends a lapsed lease, C15)."""
    _held(conn, claim)
    ids = [item.work_id for item in claim.items]
    discarded = _discard_if_forgotten(conn, claim, now, usage)
    if discarded is not None:
        return discarded
    if not refund and claim.attempt >= attempt_cap:
        report_id = _fail_items(conn, ids, cap_failure(claim.attempt, claim.destination, reason), now, claim.run_id)
        _end_run(conn, claim.run_id, now, ended_as or "failed", report_id=report_id, stop_reason=reason, usage=usage)
        return report_id
    conn.execute(
        f"UPDATE work SET state = 'pending', not_before = $1, attempts = attempts - $2 "
        f"WHERE work_id IN ({marks(len(ids), first=3)})",
        (not_before, 1 if refund else 0, *ids))
    _end_run(conn, claim.run_id, now, ended_as or "released", stop_reason=reason, usage=usage)
    return None


def forget(conn: Connection, session: str, by: str, now: str) -> tuple[int, int]:
    """C12: delete the session's agent history and cancel its pending work (pending -> failed, with a report naming
    who cancelled). A running turn finds the new epoch at finish and is discarded. Returns (history rows, cancelled)."""
    deleted = conn.execute("DELETE FROM history WHERE session = $1", (session,)).rowcount
    conn.execute(
        "INSERT INTO sessions (session, epoch, forgotten_at, forgotten_by) VALUES ($1, 1, $2, $3) "
        "ON CONFLICT (session) DO UPDATE SET epoch = sessions.epoch + 1, forgotten_at = excluded.forgotten_at, "
        "forgotten_by = excluded.forgotten_by", (session, now, by))
    rows = conn.execute("SELECT work_id, destination FROM work WHERE session = $1 AND state = 'pending' "
                        "AND kind = 'agent' ORDER BY work_id", (session,)).fetchall()
    if rows:
        ids = [r["work_id"] for r in rows]
        draft = ReportDraft(
            f"Cancelled {len(ids)} waiting request(s): the conversation was forgotten ({by}).",
            destination=rows[0]["destination"], is_error=True)
        _fail_items(conn, ids, draft, now, None)
    return deleted, len(rows)


def history(conn: Connection, session: str, limit: int) -> list[tuple[str, str]]:
    return [(role, text) for role, text, _ in exchanges(conn, session, limit)]


def exchanges(conn: Connection, session: str, limit: int) -> list[tuple[str, str, str | None]]:
    rows = conn.execute("SELECT role, text, messages FROM history WHERE session = $1 ORDER BY entry_id DESC LIMIT $2",
                        (session, limit)).fetchall()
    return [(r["role"], r["text"], r["messages"]) for r in reversed(rows)]
