"""What `shopbot status`, `shopbot reports` and the owner's /status read."""
from __future__ import annotations

from datetime import datetime

from ..clock import from_db
from ..records import (
    AppliedSetting,
    DeliveryCounts,
    DeliveryState,
    FailedPart,
    FailedWork,
    HeldAction,
    PartView,
    ReportView,
    Stats,
    Status,
    StatusExtra,
    UnknownPart,
    WorkCounts,
)
from . import inbox, producer_state, sales
from .connection import Connection


def pending_age(now: datetime, oldest: str | datetime | None) -> tuple[float | None, float | None]:
    """The oldest pending item's age, and how far ahead of `now` its stamp is. An item stamped after `now` was
    admitted before a backward step of the wall clock: its age cannot be told from the wall clock, so it is not shown
    as zero or negative but as unknown (None), with how far ahead of this clock its stamp is."""
    if oldest is None:
        return None, None
    age = (now - from_db(oldest)).total_seconds()
    if age < 0:
        return None, -age
    return age, None


def failed_work(conn: Connection) -> tuple[FailedWork, ...]:
    """The last 20 failed work items, newest first."""
    return tuple(FailedWork(r["work_id"], r["source"], r["report_id"]) for r in conn.execute(
        "SELECT w.work_id, w.source, i.report_id FROM work w LEFT JOIN report_items i USING (work_id) "
        "WHERE w.state = 'failed' ORDER BY w.work_id DESC LIMIT 20"))


def failed_deliveries(conn: Connection) -> tuple[FailedPart, ...]:
    """The last 20 report parts refused (failed) or no longer allowed (denied), newest first."""
    return tuple(FailedPart(r["report_id"], r["part"], r["chat_id"], r["reason"]) for r in conn.execute(
        "SELECT report_id, part, chat_id, reason FROM deliveries WHERE state IN ('failed', 'denied') "
        "ORDER BY delivery_id DESC LIMIT 20"))


# The oldest pending item of any kind, read through work_open (its condition restated: SQLite does not infer it from
# `state = 'pending'`, and there is no index of pending work of every kind since migration 0023).
OLDEST_PENDING = "SELECT min(admitted_at) FROM work WHERE state IN ('pending', 'running') AND state = 'pending'"


def read_status(conn: Connection, now: datetime, window: Stats) -> Status:
    work = dict(conn.execute("SELECT state, count(*) FROM work GROUP BY state").fetchall())
    agent_work = dict(conn.execute("SELECT state, count(*) FROM work WHERE kind = 'agent' GROUP BY state").fetchall())
    deliveries = dict(conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state").fetchall())
    oldest = conn.execute(OLDEST_PENDING).fetchone()[0]
    unknown = tuple(UnknownPart(r["report_id"], r["part"], r["parts"], r["chat_id"], r["reason"],
                                from_db(r["updated_at"])) for r in conn.execute(
        "SELECT report_id, part, parts, chat_id, reason, updated_at FROM deliveries WHERE state = 'unknown' "
        "ORDER BY delivery_id"))
    action_states = {state: n for state, n in conn.execute("SELECT state, count(*) FROM actions GROUP BY state")}
    quarantined = tuple(HeldAction(r["action_id"], r["proposal_id"], r["reason"]) for r in conn.execute(
        "SELECT action_id, proposal_id, reason FROM actions WHERE state = 'quarantined' ORDER BY action_id"))
    unknown_actions = tuple(HeldAction(r["action_id"], r["proposal_id"], r["reason"]) for r in conn.execute(
        "SELECT action_id, proposal_id, reason FROM actions WHERE state = 'unknown' ORDER BY action_id"))
    counters = {kind: n for kind, n in conn.execute(
        "SELECT kind, sum(count) FROM counters GROUP BY kind ORDER BY kind")}
    missed = tuple(producer_state.missed_occurrences(conn))
    applied = tuple(AppliedSetting(r["item"], r["reorder_point"], r["target"], r["file_reorder_point"],
                                   r["file_target"], r["decided_by"], from_db(r["decided_at"]))
                    for r in sales.applied(conn))
    oldest_age, ahead = pending_age(now, oldest)
    return Status(
        work=WorkCounts.of(work), agent_work=WorkCounts.of(agent_work), deliveries=DeliveryCounts.of(deliveries),
        open_agent_work=inbox.open_agent_work(conn), oldest_pending_seconds=oldest_age,
        oldest_pending_ahead_seconds=ahead, unknown=unknown, failed_work=failed_work(conn),
        failed_deliveries=failed_deliveries(conn), counters=counters, actions=action_states,
        quarantined_actions=quarantined, unknown_actions=unknown_actions, extra=StatusExtra(missed),
        littles_law=window, applied=applied)


def read_reports(conn: Connection, limit: int) -> list[ReportView]:
    rows = conn.execute("SELECT * FROM reports ORDER BY created_at DESC, anchor DESC, generation DESC LIMIT $1",
                        (limit,)).fetchall()
    result = []
    for row in rows:
        items = conn.execute("SELECT i.work_id, w.source FROM report_items i JOIN work w USING (work_id) "
                             "WHERE i.report_id = $1 ORDER BY i.work_id", (row["report_id"],)).fetchall()
        parts = tuple(PartView(r["part"], DeliveryState(r["state"]), r["receipt"], r["reason"]) for r in conn.execute(
            "SELECT part, state, receipt, reason FROM deliveries WHERE report_id = $1 ORDER BY part",
            (row["report_id"],)))
        result.append(ReportView(report=row["report_id"], work=tuple(r[0] for r in items),
                                 sources=tuple(r[1] for r in items), is_error=bool(row["is_error"]),
                                 destination=row["destination"], created_at=from_db(row["created_at"]),
                                 deliveries=parts, body=row["body"]))
    return result
