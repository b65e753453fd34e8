"""The operations journal: every tool call of a run, started before it acts and finished after (C10, C11)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..order_records import JsonObject
from .connection import Connection

Guard = Callable[[Any, str], None]


def op_started(conn: Connection, run_id: str, call_id: str, tool: str, arguments: JsonObject, effect: str,
               now: str, *, guard: Guard | None = None) -> None:
    (guard or _run_open)(conn, run_id)
    conn.execute("INSERT INTO operations (run_id, call_id, tool, arguments, effect, started_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6)",
                 (run_id, call_id, tool, json.dumps(arguments, sort_keys=True), effect, now))


def op_finished(conn: Connection, run_id: str, call_id: str, status: str, result: JsonObject, now: str, *,
                acted_outside: bool = False, guard: Guard | None = None) -> None:
    """`guard(conn, run_id)` refuses a run that may no longer write (`_run_open`; PostgreSQL's lease fence)."""
    (guard or _run_open)(conn, run_id)
    cursor = conn.execute(
        "UPDATE operations SET status = $1, result = $2, finished_at = $3, acted_outside = $4 "
        "WHERE run_id = $5 AND call_id = $6 AND status = 'started'",
        (status, json.dumps(result, sort_keys=True, default=str), now, int(acted_outside), run_id, call_id))
    if cursor.rowcount != 1:
        raise ValueError(f"operation {call_id} of run {run_id} was not started or is already finished")


def _run_open(conn: Connection, run_id: str) -> None:
    """A run whose turn was released, failed or finished cannot write more (its claim is gone)."""
    row = conn.execute("SELECT ended_at FROM runs WHERE run_id = $1", (run_id,)).fetchone()
    if row is None or row[0] is not None:
        from ..errors import NotClaimed
        raise NotClaimed(run_id, "the run is over; it cannot journal operations")


def steps(conn: Connection, run_id: str) -> list[str]:
    """The tools a run has journaled so far, in order (C20's progress drafts name them, nothing else)."""
    return [row[0] for row in conn.execute(
        "SELECT tool FROM operations WHERE run_id = $1 ORDER BY op_id", (run_id,)).fetchall()]
