"""The drill's audit, from outside the product: the store (on an independent read-only connection) and the local
servers' own records (what the owner received, what the supplier holds). Used by the kill-point drill and the soak."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from store.shared.invariants import check_connection
from store.sqlite.invariants import check
from tests.support.proc import connect_read_only

IDENTITY = re.compile(r"\n\n(r\d+\.\d+)(?: \((\d+)/(\d+)\))?$")


@dataclass
class Audit:
    violations: list[str] = field(default_factory=list)
    figures: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


def _violations(db: Path | str) -> list:  # type: ignore[type-arg]
    if isinstance(db, Path):
        return check(db)
    from store.postgres.connection import PgConnection, configure
    with connect_read_only(db) as conn:
        configure(conn)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return check_connection(PgConnection(conn))


def audit(db: Path | str, sent_texts: list[str], supplier_orders: list[dict] | None = None, *,
          owner_messages: int | None = None, allow_open: bool = False) -> Audit:
    """`sent_texts`: every text the Bot API server accepted from the bot; `owner_messages`: how many owner messages
    the server holds (each must be admitted, or refused and counted). `allow_open` accepts work not yet finished."""
    result = Audit()
    v = result.violations
    v += [f"{x.rule}: {x.detail}" for x in _violations(db)]
    conn = connect_read_only(db)
    try:
        open_work = conn.execute("SELECT count(*) FROM work WHERE kind = 'agent' AND state IN ('pending', 'running')"
                                 ).fetchone()[0]
        if open_work and not allow_open:
            v.append(f"{open_work} admitted item(s) still open after the drain")
        # every accepted owner message is covered by exactly one report
        for work_id, reports in conn.execute(
                "SELECT w.work_id, count(i.report_id) FROM work w LEFT JOIN report_items i USING (work_id) "
                "WHERE w.kind = 'agent' AND w.state IN ('finished', 'failed') GROUP BY w.work_id"):
            if reports != 1:
                v.append(f"work {work_id} is covered by {reports} reports")
        # ... whose delivery is confirmed, or unknown and awaiting a decision (or visibly refused)
        undelivered = conn.execute(
            "SELECT d.report_id, d.part, d.state FROM deliveries d WHERE d.state IN ('pending', 'sending')").fetchall()
        if undelivered and not allow_open:
            v.append(f"deliveries not settled after the drain: {undelivered[:5]}")
        # nothing delivered twice without a recorded resend decision
        sent = Counter()
        for text in sent_texts:
            match = IDENTITY.search(text)
            if match:
                sent[(match.group(1), int(match.group(2) or 1))] += 1
        resends = {(r, p): n for r, p, n in conn.execute(
            "SELECT d.report_id, d.part, count(x.resolution_id) FROM deliveries d LEFT JOIN resolutions x "
            "ON x.delivery_id = d.delivery_id AND x.decision = 'resend' GROUP BY d.delivery_id")}
        for key, copies in sent.items():
            if copies > 1 + resends.get(key, 0):
                v.append(f"{key[0]} part {key[1]} reached the owner {copies} times with {resends.get(key, 0)} "
                         "resend decision(s)")
        # one supplier order per approved action, with the action's own key
        if supplier_orders is not None:
            keys = Counter(o["key"] for o in supplier_orders)
            actions = dict(conn.execute("SELECT idempotency_key, state FROM actions"))
            for key, n in keys.items():
                if n > 1:
                    v.append(f"the supplier holds {n} orders for key {key}")
                if key not in actions:
                    v.append(f"the supplier holds an order no approved action asked for ({key})")
            for key, state in actions.items():
                if state == "delivered" and key not in keys:
                    v.append(f"action with key {key} is delivered but the supplier has no such order")
        # every failed item visible (an error report it was told about, through the outbox or the till's GET)
        for (work_id,) in conn.execute("SELECT w.work_id FROM work w WHERE w.state = 'failed' AND NOT EXISTS ("
                                       "SELECT 1 FROM report_items i JOIN reports r USING (report_id) "
                                       "WHERE i.work_id = w.work_id AND r.is_error = 1)"):
            v.append(f"failed work {work_id} has no error report")
        # every owner message admitted, or refused and counted
        if owner_messages is not None:
            admitted = conn.execute("SELECT count(*) FROM work WHERE source LIKE 'tg:' || '%'").fetchone()[0]
            refused = conn.execute("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = 'refused_capacity'"
                                   ).fetchone()[0]
            if admitted + refused < owner_messages:
                v.append(f"{owner_messages} owner messages, but {admitted} admitted and {refused} refused")
        result.figures = {
            "work": conn.execute("SELECT count(*) FROM work WHERE kind = 'agent'").fetchone()[0],
            "failed": conn.execute("SELECT count(*) FROM work WHERE kind = 'agent' AND state = 'failed'").fetchone()[0],
            "unknown": conn.execute("SELECT count(*) FROM deliveries WHERE state = 'unknown'").fetchone()[0],
            "duplicated": sum(max(0, c - 1 - resends.get(k, 0)) for k, c in sent.items()),
            "refused": conn.execute("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = 'refused_capacity'"
                                    ).fetchone()[0],
        }
    finally:
        conn.close()
    return result
