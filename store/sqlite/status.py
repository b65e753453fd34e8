"""What `shopbot status`, `shopbot reports` and the owner's /status read."""
from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from ..clock import from_text
from ..records import Stats
from . import inbox, producer_state


def pending_age(now: datetime, oldest: str | None) -> dict[str, float | None]:
    """The oldest pending item's age. An item stamped after `now` was admitted before a backward step of the wall
    clock: its age cannot be told from the wall clock, so it is not shown as zero or negative but as unknown, with
    how far ahead of this clock its stamp is (`oldest_pending_ahead_seconds`)."""
    if oldest is None:
        return {"oldest_pending_seconds": None, "oldest_pending_ahead_seconds": None}
    age = (now - from_text(oldest)).total_seconds()
    if age < 0:
        return {"oldest_pending_seconds": None, "oldest_pending_ahead_seconds": -age}
    return {"oldest_pending_seconds": age, "oldest_pending_ahead_seconds": None}


def read_status(conn: sqlite3.Connection, now: datetime, window: Stats) -> dict[str, Any]:
    work = {state: 0 for state in ("pending", "running", "finished", "failed")}
    for state, n in conn.execute("SELECT state, count(*) FROM work GROUP BY state"):
        work[state] = n
    agent_work = {state: 0 for state in ("pending", "running", "finished", "failed")}
    for state, n in conn.execute("SELECT state, count(*) FROM work WHERE kind = 'agent' GROUP BY state"):
        agent_work[state] = n
    deliveries = {state: 0 for state in ("pending", "sending", "confirmed", "unknown", "failed", "denied")}
    for state, n in conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state"):
        deliveries[state] = n
    oldest = conn.execute("SELECT min(admitted_at) FROM work WHERE state = 'pending'").fetchone()[0]
    unknown = [dict(r) for r in conn.execute(
        "SELECT report_id, part, parts, chat_id, reason, updated_at FROM deliveries WHERE state = 'unknown' "
        "ORDER BY delivery_id")]
    failed_deliveries = [dict(r) for r in conn.execute(
        "SELECT report_id, part, chat_id, reason FROM deliveries WHERE state IN ('failed', 'denied') "
        "ORDER BY delivery_id DESC LIMIT 20")]
    failed_work = [dict(r) for r in conn.execute(
        "SELECT w.work_id, w.source, i.report_id FROM work w LEFT JOIN report_items i USING (work_id) "
        "WHERE w.state = 'failed' ORDER BY w.work_id DESC LIMIT 20")]
    action_states = {state: n for state, n in conn.execute("SELECT state, count(*) FROM actions GROUP BY state")}
    quarantined = [dict(r) for r in conn.execute(
        "SELECT action_id, proposal_id, reason FROM actions WHERE state = 'quarantined' ORDER BY action_id")]
    unknown_actions = [dict(r) for r in conn.execute(
        "SELECT action_id, proposal_id, reason FROM actions WHERE state = 'unknown' ORDER BY action_id")]
    counters = {kind: n for kind, n in conn.execute(
        "SELECT kind, sum(count) FROM counters GROUP BY kind ORDER BY kind")}
    return {
        "work": work,
        "agent_work": agent_work,
        "deliveries": deliveries,
        "open_agent_work": inbox.open_agent_work(conn),
        **pending_age(now, oldest),
        "unknown": unknown,
        "failed_work": failed_work,
        "failed_deliveries": failed_deliveries,
        "counters": counters,
        "actions": action_states,
        "quarantined_actions": quarantined,
        "unknown_actions": unknown_actions,
        "extra": {"missed": producer_state.missed_occurrences(conn)},
        "littles_law": {"window_seconds": window.window_seconds, "lambda_per_s": window.lam, "W_s": window.w,
                        "L": window.l, "lambda_W": window.lam_w, "arrivals": window.arrivals,
                        "refused": window.refused},
    }


def read_reports(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT * FROM reports ORDER BY created_at DESC, anchor DESC, generation DESC LIMIT ?",
                        (limit,)).fetchall()
    result = []
    for row in rows:
        items = conn.execute("SELECT i.work_id, w.source FROM report_items i JOIN work w USING (work_id) "
                             "WHERE i.report_id = ? ORDER BY i.work_id", (row["report_id"],)).fetchall()
        parts = [dict(r) for r in conn.execute(
            "SELECT part, state, receipt, reason FROM deliveries WHERE report_id = ? ORDER BY part",
            (row["report_id"],))]
        result.append({"report": row["report_id"], "work": [r[0] for r in items],
                       "sources": [r[1] for r in items], "is_error": bool(row["is_error"]),
                       "destination": row["destination"], "created_at": row["created_at"],
                       "deliveries": parts, "body": row["body"]})
    return result
