"""Recovery (C10) from records only: at startup on SQLite (one process owns the file), and per expired lease on
PostgreSQL (`recover_run`, called by the sweep of store/postgres/guards.py, C15)."""
from __future__ import annotations

from typing import Any

from ..records import Claim, RecoverySummary, ReportDraft
from . import actions, inbox, outbox
from .connection import Connection


def recover(conn: Connection, now: str, attempt_cap: int) -> RecoverySummary:
    """A running turn whose operations stayed inside the store (read, internal, or a proposal: void while its turn
    is unfinished, C11) goes back to pending, or fails at the attempt cap (C9); a turn with a completed operation
    that acted outside the store fails visibly; `sending` deliveries become unknown (C7)."""
    released: list[int] = []
    failed: list[int] = []
    runs = conn.execute(
        "SELECT DISTINCT w.run_id, w.worker_id, w.session, r.session_epoch FROM work w "
        "LEFT JOIN runs r USING (run_id) WHERE w.state = 'running' AND w.kind = 'agent' ORDER BY w.run_id").fetchall()
    for run in runs:
        was_released, ids = recover_run(conn, run, now, attempt_cap, reason="the process stopped during this turn")
        (released if was_released else failed).extend(ids)
    for (run_id,) in conn.execute("SELECT run_id FROM runs WHERE ended_at IS NULL").fetchall():
        inbox._end_run(conn, run_id, now, "recovered", stop_reason="the process stopped")
    unknown = outbox.sending_to_unknown(conn, now)
    actions.sending_to_unknown(conn, now)     # C11: an action found sending may have reached the supplier
    return RecoverySummary(tuple(released), tuple(failed), tuple(unknown))


def recover_run(conn: Any, run: Any, now: str, attempt_cap: int, *, reason: str, started_external_acted: bool = False,
                ended_as: str | None = None) -> tuple[bool, list[int]]:
    """C10 for one run (`run`: run_id, worker_id, session, session_epoch) whose process stopped: its running items
    go back to pending (C9's cap applies), or fail visibly when one of its operations acted outside the store; with
    `started_external_acted` (the lease sweep, C15) an `external` operation that started and never finished counts
    as having acted. Returns (released, the work ids). `ended_as` is the run's outcome ('expired' for the sweep)."""
    rows = conn.execute("SELECT * FROM work WHERE run_id = $1 AND state = 'running' ORDER BY work_id",
                        (run["run_id"],)).fetchall()
    items = tuple(inbox.work_item(r) for r in rows)
    if not items:
        return True, []
    # the epoch the run was claimed under: a conversation forgotten since is discarded, never re-run (C12)
    epoch = run["session_epoch"] if run["session_epoch"] is not None else inbox.session_epoch(conn, run["session"])
    claim = Claim(run["run_id"], run["worker_id"], run["session"], items, max(i.attempts for i in items), epoch)
    ids = [i.work_id for i in items]
    unfinished_external = " OR (effect = 'external' AND status = 'started')" if started_external_acted else ""
    acted = conn.execute(f"SELECT tool FROM operations WHERE run_id = $1 AND ((acted_outside = 1 AND status = 'done')"
                         f"{unfinished_external}) ORDER BY started_at", (claim.run_id,)).fetchone()
    if acted is not None:
        draft = ReportDraft(
            f"I stopped while working on this, after '{acted[0]}' had already acted outside the shop's records. "
            "I will not redo it on my own: please check the result and ask again if needed.",
            destination=claim.destination, is_error=True)
        inbox.fail(conn, claim, draft, now, stop_reason="recovery: acted outside the store",
                   ended_as=ended_as or "failed")
        return False, ids
    if inbox.release(conn, claim, now, None, attempt_cap, reason=reason, ended_as=ended_as):
        return False, ids
    return True, ids
