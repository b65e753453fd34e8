"""K16: the outcome of a commit whose answer was lost, read back from the records on a fresh connection.

A connection lost after COMMIT was sent leaves the transaction committed or not, and the client cannot tell which
(store/postgres/connection.py raises CommitUnknown). The records can: each read below answers from what that one
transaction would have written, and nothing else writes it.

- A finish (`finish`, `finish_counts`): the run's row. Ended `finished` or `discarded` (only its own finish writes
  these) means the commit happened: its report id, and the next turn it claimed in the same commit (the next run's
  id was drawn before the transaction). Still open and every item still held by it means it did not: the finish is
  run again (the same transaction, with the same guards and fence). Anything else (released, recovered, failed by
  another) means the run is no longer this worker's: refused, as a late finish is.
- A `sending` mark: the delivery's state. `sending` means the mark committed (the send may go ahead, once);
  `pending` means it did not (marked again); anything else means another move took it: nothing is sent.
- A `take_due` (the due read and the `sending` mark in one transaction): the part it took is the one `sending` by
  this sender stamped with the transaction's time, if any; the earlier parts' receipts it carried tell whether it
  committed when it took none (`confirmed`: yes; still `sending`: no, taken again). Without a receipt and without
  a part found, running it again is harmless either way (it wrote nothing, or only denials, which stand).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records import Claim, FinishOutcome, Taken
from ..shared import outbox
from ..shared.connection import Connection, marks
from ..shared.dialect import DialectSQL
from ..shared.inbox import work_item

DONE, AGAIN, REFUSED = "done", "again", "refused"


def held_claim(conn: Connection, run_id: str) -> Claim | None:
    """The open turn `run_id`, rebuilt from its run and the items it holds (None if it is not open)."""
    run = conn.execute("SELECT worker_id, session, attempt, session_epoch FROM runs "
                       "WHERE run_id = $1 AND ended_at IS NULL", (run_id,)).fetchone()
    rows = conn.execute("SELECT * FROM work WHERE run_id = $1 AND state = 'running' ORDER BY work_id",
                        (run_id,)).fetchall()
    if run is None or not rows:
        return None
    items = tuple(work_item(r) for r in rows)
    return Claim(run_id, run["worker_id"], run["session"], items, int(run["attempt"]), int(run["session_epoch"]))


def finish_outcome(conn: Connection, claim: Claim, next_run_id: str | None) -> tuple[str, Any]:
    run = conn.execute("SELECT ended_at, outcome, report_id FROM runs WHERE run_id = $1", (claim.run_id,)).fetchone()
    if run is None:
        return REFUSED, "no such run"
    if run["ended_at"] is None:
        ids = [item.work_id for item in claim.items]
        held = conn.execute(
            f"SELECT count(*) FROM work WHERE work_id IN ({marks(len(ids), first=3)}) "
            "AND state = 'running' AND run_id = $1 AND worker_id = $2",
            (claim.run_id, claim.worker_id, *ids)).fetchone()[0]
        return (AGAIN, "still open and held") if held == len(ids) else (REFUSED, "open but no longer held")
    if run["outcome"] in ("finished", "discarded"):
        following = held_claim(conn, next_run_id) if next_run_id else None
        return DONE, FinishOutcome(run["report_id"], discarded=run["outcome"] == "discarded", next_claim=following)
    return REFUSED, f"ended {run['outcome']}"


def sending_outcome(conn: Connection, delivery_id: int) -> tuple[str, Any]:
    row = conn.execute("SELECT state FROM deliveries WHERE delivery_id = $1", (delivery_id,)).fetchone()
    state = row["state"] if row else None
    if state == "sending":
        return DONE, None
    if state == "pending":
        return AGAIN, "still pending"
    return REFUSED, f"now {state}"


def take_outcome(conn: Connection, sql: DialectSQL, now: str, confirms: Sequence[tuple[int, str]],
                 sender: str | None) -> tuple[str, Any]:
    for delivery_id, _ in confirms:
        row = conn.execute("SELECT state FROM deliveries WHERE delivery_id = $1", (delivery_id,)).fetchone()
        state = row["state"] if row else None
        if state == "sending":               # a receipt it carried is not recorded: the transaction did not commit
            return AGAIN, "its receipts are not recorded"
        if state != "confirmed":
            return REFUSED, f"a part whose receipt it carried is now {state}"
    taken = outbox.taken_at(conn, sql, now, sender)
    return (DONE, Taken(tuple(taken))) if taken or confirms else (AGAIN, "no part taken")
