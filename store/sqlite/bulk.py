"""Bulk-load finished history through the real triggers (benchmarks and tests only; issue 8, history scale).

Nothing here is a shortcut around the state machine: every item is inserted `pending` (work_insert_pending),
moved to `running` under a recorded run (work_state_machine, work_claim_recorded), then to `finished` with a
report linked to it (reports, report_items), exactly the moves of admit -> claim -> finish, only many rows per
statement (executemany) and many items per transaction. A report to a Telegram chat gets its delivery part, which
is moved pending -> sending -> confirmed with a receipt (delivery_state_machine, delivery_receipt_required), or left
pending. The result passes `store.shared.invariants.check` (tests/integration/sqlite/test_bulk.py).

The product never calls this; it exists so that a benchmark can stand on 1,000,000 finished items without taking
1,000,000 single commits. Its own speed is not a product figure.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..clock import to_text
from ..destination import Destination
from ..shared.outbox import split_parts
from .connection import SqliteConnection

DELIVERY_MODES = ("confirmed", "pending", "none")


if TYPE_CHECKING:
    from .store import SqliteStore


@dataclass(frozen=True)
class Loaded:
    first_work_id: int
    last_work_id: int
    items: int
    deliveries: int


def load_history(conn: sqlite3.Connection, count: int, *, start: datetime, step_seconds: float = 1.0,
                 service_seconds: float = 3.0, chats: Sequence[int] = tuple(range(1000, 1100)),
                 deliveries: str = "confirmed", batch: int = 50_000, source_prefix: str = "tg",
                 body: str = "Opening brief: vanilla 6 tubs, strawberry 4 tubs.") -> Loaded:
    """Insert `count` finished agent items, each answered by its own report, in transactions of `batch` items.

    Item i (0-based) is the Telegram message `tg:<chat>:<message>` of chat `chats[i % len(chats)]`, admitted at
    `start + i * step_seconds` and finished `service_seconds` later. `deliveries`: 'confirmed' (each report's part
    sent and confirmed with a receipt), 'pending' (queued for the relay) or 'none' (reports stored only, no
    Telegram destination). The connection must not be inside a transaction; each batch is one
    BEGIN IMMEDIATE ... COMMIT, with the store's own pragmas (synchronous=FULL) left as they are.
    """
    if deliveries not in DELIVERY_MODES:
        raise ValueError(f"deliveries must be one of {DELIVERY_MODES}")
    if count < 0 or batch < 1 or not chats:
        raise ValueError("count >= 0, batch >= 1 and at least one chat")
    if conn.in_transaction:
        raise ValueError("load_history manages its own transactions; call it outside one")
    base = conn.execute("SELECT coalesce(max(work_id), 0) FROM work").fetchone()[0]
    delivered = 0
    done = 0
    while done < count:
        n = min(batch, count - done)
        conn.execute("BEGIN IMMEDIATE")
        try:
            delivered += _load_batch(SqliteConnection(conn), base + done + 1, n, done, start=start, step=step_seconds,
                                     service=service_seconds, chats=chats, deliveries=deliveries,
                                     prefix=source_prefix, body=body)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        done += n
    return Loaded(base + 1, base + count, count, delivered)


def _load_batch(conn: SqliteConnection, first_id: int, n: int, offset: int, *, start: datetime, step: float,
                service: float, chats: Sequence[int], deliveries: str, prefix: str, body: str) -> int:
    last_id = first_id + n - 1
    work: list[tuple[Any, ...]] = []
    runs: list[tuple[Any, ...]] = []
    ends: list[tuple[Any, ...]] = []
    reports: list[tuple[Any, ...]] = []
    links: list[tuple[Any, ...]] = []
    parts: list[tuple[Any, ...]] = []
    for k in range(n):
        work_id = first_id + k
        i = offset + k
        chat = chats[i % len(chats)]
        session = Destination.telegram(chat)
        destination = session if deliveries != "none" else None
        admitted = start + timedelta(seconds=i * step)
        ended = to_text(admitted + timedelta(seconds=service))
        run_id = f"bulk-{work_id}"
        report_id = f"r{work_id}.1"
        work.append((work_id, f"{prefix}:{chat}:{work_id}", session, "agent", f"message {work_id}", destination,
                     to_text(admitted)))
        runs.append((run_id, "bulk", session, work_id, 1, 0, to_text(admitted), ended, report_id))
        ends.append((ended, work_id))
        reports.append((report_id, work_id, 1, body, 0, destination, run_id, ended))
        links.append((report_id, work_id))
        if destination is not None:
            texts = split_parts(body, report_id)
            parts.extend((report_id, part, len(texts), chat, text, ended, ended)
                         for part, text in enumerate(texts, start=1))
    # admit: every row starts pending (work_insert_pending)
    conn.executemany("INSERT INTO work (work_id, source, session, kind, payload, destination, admitted_at) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7)", work)
    # claim: a run row, then pending -> running under it (work_state_machine, work_claim_recorded); the run is
    # recorded already ended as it will be (a session has many turns in one batch, and at most one open run)
    conn.executemany("INSERT INTO runs (run_id, worker_id, session, anchor, attempt, session_epoch, started_at, "
                     "ended_at, outcome, report_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'finished', $9)", runs)
    conn.execute("UPDATE work SET state = 'running', attempts = attempts + 1, worker_id = 'bulk', "
                 "run_id = 'bulk-' || work_id WHERE work_id BETWEEN $1 AND $2", (first_id, last_id))
    # finish: running -> finished, the report inserted and linked, the run ended (C6)
    conn.executemany("UPDATE work SET state = 'finished', ended_at = $1 WHERE work_id = $2", ends)
    conn.executemany("INSERT INTO reports (report_id, anchor, generation, body, is_error, destination, run_id, "
                     "created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", reports)
    conn.executemany("INSERT INTO report_items (report_id, work_id) VALUES ($1, $2)", links)
    if not parts:
        return 0
    # delivery: every part starts pending (delivery_insert_pending); confirmed goes through sending with a receipt
    conn.executemany(
        "INSERT INTO deliveries (report_id, part, parts, chat_id, text, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7)", parts)
    if deliveries == "confirmed":
        low = conn.execute("SELECT min(delivery_id) FROM deliveries WHERE report_id = $1",
                           (f"r{first_id}.1",)).fetchone()[0]
        high = conn.execute("SELECT max(delivery_id) FROM deliveries WHERE report_id = $1",
                            (f"r{last_id}.1",)).fetchone()[0]
        conn.execute("UPDATE deliveries SET state = 'sending', attempts = attempts + 1 "
                     "WHERE delivery_id BETWEEN $1 AND $2 AND state = 'pending'", (low, high))
        conn.execute("UPDATE deliveries SET state = 'confirmed', receipt = 'bulk-' || delivery_id "
                     "WHERE delivery_id BETWEEN $1 AND $2 AND state = 'sending'", (low, high))
    return len(parts)


async def load_into(store: SqliteStore, count: int, **options: Any) -> Loaded:
    """`load_history` on an open `Store`'s own connection, in its connection thread (outside any transaction)."""
    return await store.db.raw(lambda conn: load_history(conn, count, **options))


def load_side_rows(conn: sqlite3.Connection, first_work_id: int, last_work_id: int, *, history_text: str,
                   operations_per_run: int = 2, prompt_every: int = 20, batch: int = 50_000) -> int:
    """The rows a busy shop's turns leave beside work and reports (retention's bench): for each bulk item its two
    agent-history entries (the owner's text and the reply), `operations_per_run` finished tool calls of its run,
    a decided button prompt every `prompt_every` items, and a per-minute counter. Times follow the item's. Returns
    the rows inserted."""
    inserted = 0
    bound = SqliteConnection(conn)
    for low in range(first_work_id, last_work_id + 1, batch):
        high = min(last_work_id, low + batch - 1)
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = bound.execute("SELECT w.work_id, w.session, w.admitted_at, w.ended_at, w.run_id FROM work w "
                                "WHERE w.work_id BETWEEN $1 AND $2", (low, high)).fetchall()
            history: list[tuple[Any, ...]] = []
            operations: list[tuple[Any, ...]] = []
            prompts: list[tuple[Any, ...]] = []
            counters: dict[Any, Any] = {}
            for work_id, session, admitted, ended, run_id in rows:
                history.append((session, "user", history_text[: len(history_text) // 3], None, admitted))
                history.append((session, "assistant", history_text, f"r{work_id}.1", ended))
                for call in range(operations_per_run):
                    operations.append((run_id, f"call-{call}", "list_stock", '{"item": "vanilla"}', "read", "done",
                                       '{"items": [{"item": "vanilla", "on_hand": 6, "unit": "tub"}]}', admitted,
                                       ended))
                if work_id % prompt_every == 0:
                    prompts.append((f"bulk{work_id:028d}", "forget", session, 0, admitted, ended, "keep", "bulk"))
                counters[(admitted[:16], "stranger")] = counters.get((admitted[:16], "stranger"), 0) + 1
            bound.executemany("INSERT INTO history (session, role, text, report_id, created_at) "
                              "VALUES ($1, $2, $3, $4, $5)", history)
            bound.executemany("INSERT INTO operations (run_id, call_id, tool, arguments, effect, status, result, "
                              "started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", operations)
            bound.executemany("INSERT INTO prompts (nonce, kind, target, chat_id, created_at, decided_at, decision, "
                              "decided_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", prompts)
            bound.executemany("INSERT INTO counters (minute, kind, count) VALUES ($1, $2, $3) "
                              "ON CONFLICT (minute, kind) DO UPDATE SET count = count + excluded.count",
                              [(m, k, n) for (m, k), n in counters.items()])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        inserted += len(history) + len(operations) + len(prompts) + len(counters)
    return inserted


def file_bytes(conn: sqlite3.Connection) -> tuple[int, int]:
    """(bytes in use, bytes free) of the database file: pages in use and pages on the freelist."""
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages, free = conn.execute("PRAGMA page_count").fetchone()[0], conn.execute("PRAGMA freelist_count").fetchone()[0]
    return (pages - free) * size, free * size
