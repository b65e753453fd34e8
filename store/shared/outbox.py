"""The report outbox: immutable reports (C6), their deliveries in parts (C7) and recorded decisions (C8).

Functions run inside their caller's transaction. The relay's moves are each one short transaction of their own:
`sending` is committed before the HTTP call and the outcome after it; the network never sits inside a transaction.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime

from .. import asks, faults, redaction
from ..clock import from_db, from_db_or_none
from ..destination import telegram_chat
from ..errors import IllegalTransition, UnknownTarget
from ..order_records import UnknownReport
from ..records import Delivery, DeliveryState, ReportDraft, SentMessage, Taken, WorkKind
from .connection import Connection, Row, marks
from .dialect import DialectSQL
from .moves import move

CAPTION_LIMIT = 1024   # Telegram: a photo's caption is at most 1,024 characters after entities parsing
PART_LIMIT = 4000   # C7: parts of at most 4,000 UTF-16 code units of visible text (Telegram counts so; limit 4,096)
# The condition of the open parts' partial index (deliveries_open), repeated by every statement that reads pending or
# sending parts: SQLite reads a partial index only for a query that states its condition (PostgreSQL infers it).
# Migration 0022 dropped the narrower indexes (one page fewer in each finish, `sending` mark and confirmation).
OPEN_PARTS = "state IN ('pending', 'sending', 'unknown')"
# C7/C16: why a `sending` part became unknown when its sender's leader lease lapsed (each dialect's sweep_sending)
UNKNOWN_REASON = "its sender's lease lapsed while it was sending: it may or may not have been sent"


def units(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (a character outside the BMP, most emoji, counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(text: str, room: int) -> int:
    """How many characters of `text` fit in `room` UTF-16 units (a character is never split, so neither is a
    surrogate pair)."""
    used = 0
    for index, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > room:
            return max(index, 1)
    return len(text)


def split_parts(body: str, report_id: str, limit: int = PART_LIMIT) -> list[str]:
    """Split at line boundaries into parts that, with their identity line, fit `limit` UTF-16 code units (how
    Telegram counts a message's visible text); each part ends with its identity (`r12.1`, or `r12.1 (2/3)`) so a
    person can spot a duplicate. The parts are plain text: the relay renders each to HTML on its own
    (bot/relays/render.py), which changes no visible character, so no tag or entity is ever split."""
    room = limit - units(f"\n\n{report_id} (999/999)")
    chunks: list[str] = []
    current, used = "", 0
    for line in body.splitlines(keepends=True) or [""]:
        while units(line) > room:                     # a single line longer than a part: hard split
            if current:
                chunks.append(current)
                current, used = "", 0
            cut = _cut(line, room)
            chunks.append(line[:cut])
            line = line[cut:]
        size = units(line)
        if used + size > room:
            chunks.append(current)
            current, used = "", 0
        current += line
        used += size
    if current or not chunks:
        chunks.append(current)
    return identified(chunks, report_id)


def identified(chunks: Sequence[str], report_id: str) -> list[str]:
    """Each part ending with its identity: `r12.1` alone, `r12.1 (2/3)` among several."""
    total = len(chunks)
    if total == 1:
        return [f"{chunks[0].rstrip()}\n\n{report_id}"]
    return [f"{chunk.rstrip()}\n\n{report_id} ({i}/{total})" for i, chunk in enumerate(chunks, start=1)]


def next_generation(conn: Connection, anchor: int) -> int:
    """Read through report_items' key: every report links its anchor (the turn's lowest item, `insert_report`), and
    reports keep no index on the anchor of their own (migration 0022: a page fewer in every finish). A generation
    taken twice would still be refused by the reports' primary key, r<anchor>.<generation>."""
    return conn.execute("SELECT coalesce(max(r.generation), 0) + 1 FROM report_items i "
                        "JOIN reports r USING (report_id) WHERE i.work_id = $1 AND r.anchor = $1",
                        (anchor,)).fetchone()[0]


def insert_report(conn: Connection, work_ids: Sequence[int], draft: ReportDraft, now: str, *,
                  run_id: str | None) -> str:
    """Insert a report for a turn (anchor = lowest work id, next generation), link it to every item of the turn,
    and queue its deliveries when the destination is a Telegram chat. The body is redacted first (configured
    secrets always; credential shapes too in an error report: store/redaction.py)."""
    body = redaction.error_detail(draft.body) if draft.is_error else redaction.secrets_only(draft.body)
    if body != draft.body:
        draft = dataclasses.replace(draft, body=body)
    anchor = min(work_ids)
    generation = next_generation(conn, anchor)
    report_id = f"r{anchor}.{generation}"
    conn.execute(
        "INSERT INTO reports (report_id, anchor, generation, body, is_error, destination, buttons, run_id, created_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        (report_id, anchor, generation, draft.body, int(draft.is_error), draft.destination,
         asks.to_json(draft.asks), run_id, now))
    conn.executemany("INSERT INTO report_items (report_id, work_id) VALUES ($1, $2)",
                     [(report_id, work_id) for work_id in sorted(set(work_ids))])
    chat_id = telegram_chat(draft.destination)
    if chat_id is not None:
        parts = split_parts(draft.body, report_id)
        edit_of = draft.edit_of if len(parts) == 1 and draft.photo is None else None  # else new messages
        photos: list[bytes | None] = [None] * len(parts)
        if draft.photo is not None:      # the picture first: a part of its own, its caption ending with its identity
            bodies = [draft.caption[:CAPTION_LIMIT - 20]] + [part.rpartition("\n\n")[0] for part in parts]
            parts = identified(bodies, report_id)
            photos.insert(0, draft.photo)
        rows = list(zip(parts, photos, strict=True))
        conn.executemany(
            "INSERT INTO deliveries (report_id, part, parts, chat_id, text, edit_of, photo, created_at, updated_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            [(report_id, i, len(rows), chat_id, text, edit_of, photo, now, now)
             for i, (text, photo) in enumerate(rows, start=1)])
    return report_id


def sent_message(conn: Connection, chat_id: int, message_id: int) -> SentMessage | None:
    """What a message the bot sent reads now (its latest send or edit, pending edits included), or None when no
    delivery made it."""
    select = ("SELECT d.delivery_id, d.report_id, d.text, r.buttons FROM deliveries d JOIN reports r USING (report_id) "
              "WHERE d.chat_id = $1 AND {} AND d.state NOT IN ('failed', 'denied') AND d.part = d.parts "
              "ORDER BY d.delivery_id DESC LIMIT 1")
    found = [conn.execute(select.format("d.edit_of = $2"), (chat_id, message_id)).fetchone(),
             conn.execute(select.format("d.receipt = $2 AND d.edit_of IS NULL"), (chat_id, str(message_id))).fetchone()]
    row = max((r for r in found if r is not None), key=lambda r: r["delivery_id"], default=None)
    if row is None:
        return None
    text, _, last = row["text"].rpartition("\n\n")
    if not last.startswith(row["report_id"]):
        text = row["text"]
    return SentMessage(row["report_id"], text, asks.from_json(row["buttons"]))


def _delivery(row: Row) -> Delivery:
    edit_of = row["edit_of"]
    return Delivery(row["delivery_id"], row["report_id"], row["part"], row["parts"], row["chat_id"], row["text"],
                    DeliveryState(row["state"]), row["attempts"],
                    asks.from_json(row["buttons"]) if row["part"] == row["parts"] else (),
                    _reply_to(row["sources"], row["chat_id"]) if row["part"] == 1 and edit_of is None else None,
                    edit_of, bytes(row["photo"]) if row["photo"] is not None else None)


def _reply_to(sources: str | None, chat_id: int) -> int | None:
    """The newest owner message (`tg:<chat_id>:<message_id>`) among the items the report answers, to quote it."""
    ids = []
    for source in (sources or "").split(","):
        kind, _, rest = source.partition(":")
        chat, _, message = rest.partition(":")
        if kind == "tg" and chat == str(chat_id) and message.isdigit():
            ids.append(int(message))
    return max(ids) if ids else None


def due_deliveries(conn: Connection, sql: DialectSQL, now: str, limit: int,
                   skip_chats: Sequence[int] = ()) -> list[Delivery]:
    """Pending deliveries that are due, oldest first, whose earlier parts are all confirmed (C7: a report's parts go
    in order and stop at the first part that is not confirmed)."""
    skip = tuple(skip_chats)
    # an empty NOT IN () is SQLite's only: the clause is left out when no chat is skipped
    skipped = f"AND d.chat_id NOT IN ({marks(len(skip), first=3)})" if skip else ""
    rows = conn.execute(
        f"""SELECT d.*, r.buttons, {sql.report_sources} AS sources FROM deliveries d JOIN reports r USING (report_id)
            WHERE d.state = 'pending' AND d.{OPEN_PARTS} AND (d.not_before IS NULL OR d.not_before <= $1)
              {skipped}
              AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.report_id = d.report_id AND e.part < d.part
                              AND e.state != 'confirmed')
            ORDER BY d.delivery_id LIMIT $2""", (now, limit, *skip)).fetchall()
    return [_delivery(r) for r in rows]


def next_wake(conn: Connection) -> datetime | None:
    """The earliest not-before time among pending deliveries (for the relay's timed wake-up)."""
    return from_db_or_none(conn.execute(
        f"SELECT min(not_before) FROM deliveries WHERE state = 'pending' AND {OPEN_PARTS} AND not_before IS NOT NULL"
    ).fetchone()[0])


def _move(conn: Connection, delivery_id: int, expect: str, new: str, now: str, **columns: object) -> None:
    move(conn, "deliveries", "delivery_id", delivery_id, expect, new, now, **columns)


def mark_sending(conn: Connection, delivery_id: int, now: str, sender: str | None = None) -> None:
    """pending -> sending, one more attempt; `sender` names the relay's lease that marked it (C16)."""
    moved = conn.execute(
        "UPDATE deliveries SET attempts = attempts + 1, state = 'sending', updated_at = $1, "
        "sender = coalesce($2, sender) WHERE delivery_id = $3 AND state = 'pending'",
        (now, sender, delivery_id)).rowcount
    if moved != 1:      # the guarded move's own refusal (the row is not pending)
        _move(conn, delivery_id, "pending", "sending", now)


DENIED_REASON = "the chat is no longer allow-listed (C3)"


def take_due(conn: Connection, sql: DialectSQL, now: str, skip_chats: Sequence[int],
             refuse: Callable[[int], bool] | None, sender: str | None, limit: int = 1) -> Taken:
    """The oldest due parts (as `due_deliveries` orders them), up to `limit` and one per chat, moved to `sending` in
    this transaction; a due part whose chat `refuse` names is denied on the way (C3 at send time, its later parts
    with it). One per chat: two parts sent at once to one chat could arrive in either order."""
    faults.reached("take-due")
    denied: list[Delivery] = []
    taken: list[Delivery] = []
    skip = list(skip_chats)
    while len(taken) < limit and (due := due_deliveries(conn, sql, now, 1, skip)):
        part = due[0]
        if refuse is not None and refuse(part.chat_id):
            mark_denied(conn, part.delivery_id, DENIED_REASON, now)
            denied.append(part)
            continue
        mark_sending(conn, part.delivery_id, now, sender)
        taken.append(dataclasses.replace(part, state=DeliveryState.SENDING, attempts=part.attempts + 1))
        skip.append(part.chat_id)
    return Taken(tuple(taken), tuple(denied), None if taken else next_wake(conn))


def taken_at(conn: Connection, sql: DialectSQL, now: str, sender: str | None) -> list[Delivery]:
    """The parts a `take_due` of time `now` by `sender` moved to `sending`, those that still are (K16's read-back)."""
    rows = conn.execute(
        f"""SELECT d.*, r.buttons, {sql.report_sources} AS sources FROM deliveries d JOIN reports r USING (report_id)
            WHERE d.state = 'sending' AND d.{OPEN_PARTS} AND d.updated_at = $1
              AND d.sender IS NOT DISTINCT FROM $2
            ORDER BY d.delivery_id""", (now, sender)).fetchall()
    return [_delivery(row) for row in rows]


def mark_confirmed(conn: Connection, delivery_id: int, receipt: str, now: str) -> None:
    _move(conn, delivery_id, "sending", "confirmed", now, receipt=receipt, reason=None)


def mark_not_sent(conn: Connection, delivery_id: int, not_before: str | None, reason: str, now: str) -> None:
    """sending -> pending: the request provably never reached Telegram, or 429 with a not-before time."""
    _move(conn, delivery_id, "sending", "pending", now, not_before=not_before, reason=reason)


def _cascade(conn: Connection, delivery_id: int, state: str, reason: str, now: str) -> None:
    """Later parts of a refused report can never go out in order: they end the same way (through the legal moves)."""
    row = conn.execute("SELECT report_id, part FROM deliveries WHERE delivery_id = $1", (delivery_id,)).fetchone()
    later = "WHERE report_id = $1 AND part > $2 AND state = $3"
    if state == "failed":   # failed is reached only from sending
        conn.execute(f"UPDATE deliveries SET state = 'sending' {later}", (row["report_id"], row["part"], "pending"))
        source = "sending"
    else:
        source = "pending"
    conn.execute(f"UPDATE deliveries SET state = $4, reason = $5, updated_at = $6 {later}",
                 (row["report_id"], row["part"], source, state,
                  redaction.error_detail(f"an earlier part was {state}: {reason}"), now))


def mark_failed(conn: Connection, delivery_id: int, reason: str, now: str) -> None:
    _move(conn, delivery_id, "sending", "failed", now, reason=reason)
    _cascade(conn, delivery_id, "failed", reason, now)


def mark_unknown(conn: Connection, delivery_id: int, reason: str, now: str) -> None:
    _move(conn, delivery_id, "sending", "unknown", now, reason=reason)


def mark_denied(conn: Connection, delivery_id: int, reason: str, now: str) -> None:
    _move(conn, delivery_id, "pending", "denied", now, reason=reason)
    _cascade(conn, delivery_id, "denied", reason, now)


def sending_to_unknown(conn: Connection, now: str) -> list[int]:
    """C7/C10: a delivery found in `sending` at startup may or may not have reached Telegram."""
    rows = conn.execute("UPDATE deliveries SET state = 'unknown', updated_at = $1, "
                        f"reason = 'the process stopped while sending' WHERE state = 'sending' AND {OPEN_PARTS} "
                        "RETURNING delivery_id", (now,)).fetchall()
    return sorted(r[0] for r in rows)


def unknown_reports(conn: Connection) -> list[UnknownReport]:
    # grouped by every column shown (a report's parts share its chat, anchor and body): PostgreSQL refuses bare ones
    rows = conn.execute(
        "SELECT d.report_id, d.chat_id, max(d.resends) AS resends, min(d.updated_at) AS since, "
        "w.kind AS kind, substr(r.body, 1, 80) AS preview, r.created_at AS created_at "
        "FROM deliveries d JOIN reports r USING (report_id) JOIN work w ON w.work_id = r.anchor "
        f"WHERE d.state = 'unknown' AND d.{OPEN_PARTS} GROUP BY d.report_id, d.chat_id, w.kind, r.body, r.created_at "
        "ORDER BY min(d.delivery_id)").fetchall()
    return [UnknownReport(r["report_id"], r["chat_id"], WorkKind(r["kind"]), r["preview"], r["resends"],
                          from_db(r["since"]), from_db(r["created_at"])) for r in rows]


def has_unknown(conn: Connection, report_id: str) -> bool:
    return conn.execute("SELECT 1 FROM deliveries WHERE report_id = $1 AND state = 'unknown'",
                        (report_id,)).fetchone() is not None


def resolve(conn: Connection, report_id: str, decision: str, by: str, now: str) -> list[int]:
    """C8: record the decision for every unknown part of the report and apply it: `resend` puts the part back to
    pending (it is sent once more), `delivered` confirms it without a receipt. Returns the deliveries moved."""
    if decision not in ("resend", "delivered"):
        raise ValueError(f"unknown decision {decision!r}: use resend or delivered")
    exists = conn.execute("SELECT 1 FROM reports WHERE report_id = $1", (report_id,)).fetchone()
    if exists is None:
        raise UnknownTarget(f"no report {report_id}")
    ids = [r[0] for r in conn.execute(
        "SELECT delivery_id FROM deliveries WHERE report_id = $1 AND state = 'unknown' ORDER BY part",
        (report_id,)).fetchall()]
    if not ids:
        raise IllegalTransition(f"report {report_id} has no delivery awaiting a decision (none is unknown)",
                                table="deliveries", row=report_id, expected="unknown")
    for delivery_id in ids:
        conn.execute("INSERT INTO resolutions (delivery_id, decision, decided_by, decided_at) VALUES ($1, $2, $3, $4)",
                     (delivery_id, decision, by, now))
        if decision == "resend":
            conn.execute("UPDATE deliveries SET state = 'pending', resends = resends + 1, not_before = NULL, "
                         "updated_at = $1 WHERE delivery_id = $2", (now, delivery_id))
        else:
            conn.execute("UPDATE deliveries SET state = 'confirmed', updated_at = $1, reason = $2 "
                         "WHERE delivery_id = $3", (now, f"confirmed by {by}", delivery_id))
    return ids


def mark_all_unknown_after_restore(conn: Connection, now: str) -> int:
    """After a restore nothing non-terminal is known to be unsent: pending and sending become unknown (via sending),
    so nothing is resent silently; the owner or operator decides."""
    n = conn.execute(
        f"UPDATE deliveries SET state = 'sending', updated_at = $1 WHERE state = 'pending' AND {OPEN_PARTS}",
        (now,)).rowcount
    n += len(sending_to_unknown(conn, now))
    conn.execute("UPDATE deliveries SET reason = 'restored from a backup: may or may not have been sent' "
                 f"WHERE state = 'unknown' AND {OPEN_PARTS} AND updated_at = $1", (now,))
    return n
