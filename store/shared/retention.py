"""Retention (`shopbot prune --older-than DAYS`, `SHOPBOT_RETENTION_DAYS`): what is finished and old goes, identity
and lineage stay.

Removed (rows deleted): agent history entries, operations of ended runs that no proposal or draft points to,
decided or expired button prompts (a press on a removed nonce is answered "no longer valid", as any unknown
nonce is), per-minute counters, receipts that were set or failed (C19: a receipt is no identity; a redelivered
update is still a duplicate by its work row and gets none).

Emptied (rows kept as tombstones): the payload of ended work, the body of a report whose every part is confirmed,
failed or denied, and the text of those parts. A work tombstone keeps its source, session, kind, destination,
states and times and the payload's SHA-256 (`payload_sha256`), so admission still answers a retried occurrence
`duplicate` and a changed one `conflict` (C1); a report tombstone keeps its identity, its work items and
`body_sha256` (C6). The immutability triggers allow exactly this move (migration 0011) and `shopbot check` knows
tombstones (rules P1, P2). Rows are never deleted from work, reports, deliveries, runs, proposals, actions or their
decisions, so an id is never reused (`r<id>.<gen>` included) and every action's lineage stays.

Never touched: open work (pending, running), a report with a part not yet ended (pending, sending, unknown), an
action (whatever its state: quarantined and unknown ones included), stock events, schedules' records.

Each call of `prune_batch` is one short write transaction over at most `batch` rows of each kind; `Store.prune`
repeats it until nothing is left, so the bot keeps admitting while a year of history is pruned.
"""
from __future__ import annotations

import hashlib

from .connection import Connection, Row
from .dialect import DialectSQL

ENDED_PART = "('confirmed', 'failed', 'denied')"


def content_hash(text: str) -> str:
    """The SHA-256 a tombstone keeps of the payload or body it replaced (hex, 64 characters)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prune_batch(conn: Connection, sql: DialectSQL, cutoff: str, now: str, batch: int) -> dict[str, int]:
    """One transaction's worth: up to `batch` rows of each kind older than `cutoff` (UTC text). Returns the rows
    removed or emptied per kind; all zero when nothing is left."""
    done = {}
    done["history"] = conn.execute(
        "DELETE FROM history WHERE entry_id IN (SELECT entry_id FROM history WHERE created_at < $1 LIMIT $2)",
        (cutoff, batch)).rowcount
    done["operations"] = conn.execute(sql.prune_operations, (cutoff, batch)).rowcount
    done["prompts"] = conn.execute(
        "DELETE FROM prompts WHERE nonce IN (SELECT nonce FROM prompts WHERE (decided_at IS NOT NULL AND "
        "decided_at < $1) OR (expires_at IS NOT NULL AND expires_at < $2) LIMIT $3)", (cutoff, cutoff, batch)).rowcount
    done["receipts"] = conn.execute(
        "DELETE FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM receipts WHERE state != 'pending' "
        "AND updated_at < $1 LIMIT $2)", (cutoff, batch)).rowcount
    done["counters"] = conn.execute(
        "DELETE FROM counters WHERE (minute, kind) IN (SELECT minute, kind FROM counters WHERE minute < $1 LIMIT $2)",
        (cutoff[:16], batch)).rowcount

    work = conn.execute(
        "SELECT w.work_id, w.payload FROM work w WHERE w.ended_at IS NOT NULL AND w.ended_at < $1 "
        "AND w.state IN ('finished', 'failed') AND w.pruned_at IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM report_items i JOIN deliveries d USING (report_id) "
        f"WHERE i.work_id = w.work_id AND d.state NOT IN {ENDED_PART}) LIMIT $2", (cutoff, batch)).fetchall()
    conn.executemany("UPDATE work SET payload = '', payload_sha256 = $1, pruned_at = $2 WHERE work_id = $3",
                     [(content_hash(payload), now, work_id) for work_id, payload in work])
    done["work_payloads"] = len(work)

    reports = conn.execute(
        "SELECT r.report_id, r.body FROM reports r WHERE r.created_at < $1 AND r.pruned_at IS NULL "
        f"AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.report_id = r.report_id AND d.state NOT IN {ENDED_PART}) "
        "LIMIT $2", (cutoff, batch)).fetchall()
    parts = 0
    for report_id, body in reports:
        parts += conn.execute("UPDATE deliveries SET text = '', photo = NULL, pruned_at = $1 WHERE report_id = $2 "
                              "AND pruned_at IS NULL", (now, report_id)).rowcount
        conn.execute("UPDATE reports SET body = '', body_sha256 = $1, pruned_at = $2 WHERE report_id = $3",
                     (content_hash(body), now, report_id))
    done["report_bodies"] = len(reports)
    done["delivery_texts"] = parts
    return done


def payload_matches(row: Row, payload: str) -> bool:
    """Admission's content check (C1) on a row that may be a tombstone: the payload, or its kept SHA-256."""
    if row["pruned_at"] is None:
        return row["payload"] == payload
    return row["payload_sha256"] == content_hash(payload)
