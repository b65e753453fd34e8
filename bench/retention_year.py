"""Retention on a year of a busy shop's history: the database's size with and without pruning (issue 20).

    python -m bench.retention_year [--items 173000] [--older-than 30] [--dir PATH]

- A year of finished agent work is bulk-loaded by `store.bulk.load_history` (through the real triggers; each report
  a ~700-character reply with its confirmed Telegram part) and `store.bulk.load_side_rows` (two history entries,
  two journaled tool calls per turn, a decided button prompt every 20 turns, the per-minute counters), spread evenly
  over 365 days. 173,000 items is ~475 a day: the issue's "busy shop" (~1.5 KB an item, ~260 MB a year).
- Planted before the history, so a year old at the end: a till post answered and applied, and a reply whose
  delivery is `unknown`; planted at the end: one pending item. Prune must leave the last two whole and answer the
  till post's retry `duplicate`.
- Then `Store.prune(--older-than)` (the product path: batches of 2,000 rows a kind per transaction), timed, and
  `Store.vacuum()`. Printed: the file before, the bytes in use after the prune (the freed pages are reused by new
  rows, so without VACUUM the file stops growing but does not shrink), the file after VACUUM, and the checks.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import cleanup, print_machine, scratch_dir
from store import Admission, ManualClock, Occurrence, ReportDraft, SqliteStore, WorkKind
from store.sqlite.bulk import file_bytes, load_history, load_side_rows
from store.sqlite.invariants import check

REPLY = ("Opening brief for Tuesday: vanilla 6 tubs (reorder point 4), strawberry 4 tubs (reorder point 5: below, "
         "a reorder check is queued), chocolate 11 tubs, pistachio 2 tubs (reorder point 3: below). Yesterday the till "
         "counted 38 scoops of vanilla and 21 of chocolate; the count matched the stock within tolerance. The supplier "
         "delivered order 4411 (12 tubs of strawberry) at 07:40. Weather: warm, busy afternoon expected. Suggested: "
         "reorder pistachio (6 tubs, 4,200 cents) before Thursday; approve or reject it from the proposal message.")
TILL = json.dumps({"counts": {"vanilla": 3}, "request_id": "close-0001"}, separators=(",", ":"))


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=173_000)
    parser.add_argument("--older-than", type=float, default=30)
    parser.add_argument("--dir")
    args = parser.parse_args(argv)
    print_machine()
    directory = scratch_dir(args.dir)
    path = directory / "year.sqlite3"
    end = datetime(2028, 3, 1, 9, 0, tzinfo=UTC)
    start = end - timedelta(days=365)
    clock = ManualClock(start - timedelta(hours=1))
    store = await SqliteStore.open(path, clock, debounce_ms=0)
    try:
        # a year ago: a till post applied and answered, and a reply whose delivery is unknown
        await store.admit(Occurrence("till:1:close-0001", "till:1", TILL, WorkKind.AGENT, "till:1"))
        claim = await store.claim("bench")
        await store.finish(claim, ReportDraft("Applied: vanilla 3.", destination="till:1"))
        await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
        claim = await store.claim("bench")
        unknown_report = (await store.finish(claim, ReportDraft(REPLY, destination="tg:1"))).report_id
        for delivery in await store.due_deliveries():
            await store.mark_sending(delivery.delivery_id)
            await store.mark_unknown(delivery.delivery_id, "ReadTimeout")

        started = time.perf_counter()
        step = 365 * 86400 / args.items

        def load(conn):
            loaded = load_history(conn, args.items, start=start, step_seconds=step, service_seconds=4.0, body=REPLY)
            side = load_side_rows(conn, loaded.first_work_id, loaded.last_work_id, history_text=REPLY[:450])
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return loaded, side
        loaded, side = await store.db.raw(load)
        print(f"loaded {loaded.items:,} items with {loaded.deliveries:,} parts and {side:,} side rows "
              f"in {time.perf_counter() - started:.1f} s (not a product figure)")
        clock.set(end)
        await store.admit(Occurrence("tg:2:1", "tg:2", "still waiting", WorkKind.AGENT, "tg:2"))

        in_use, free = await store.db.raw(file_bytes)
        before_file = os.path.getsize(path)
        print(f"a year without pruning: file {mb(before_file)} ({mb(in_use)} in use), "
              f"{before_file / (args.items + 3):,.0f} bytes per work item")

        started = time.perf_counter()
        done = await store.prune(args.older_than)
        took = time.perf_counter() - started
        in_use_after, free_after = await store.db.raw(file_bytes)
        counts = ", ".join(f"{k} {v:,}" for k, v in done.items())
        print(f"prune --older-than {args.older_than:g}: {took:.1f} s; {counts}")
        print(f"after prune: {mb(in_use_after)} in use, {mb(free_after)} free pages (reused before the file grows)")
        started = time.perf_counter()
        vacuum_before, vacuum_after = await store.vacuum()
        print(f"after VACUUM ({time.perf_counter() - started:.1f} s): file {mb(os.path.getsize(path))}")
        kept_days = args.older_than
        print(f"per year with pruning at {kept_days:g} days: about {mb(os.path.getsize(path))} steady "
              f"(tombstones: {(os.path.getsize(path) / (args.items + 3)):,.0f} bytes per work item)")

        violations = check(Path(path))
        pending = await store.db.read(lambda c: c.execute(
            "SELECT payload, state FROM work WHERE source = 'tg:2:1'").fetchone())
        unknown = await store.db.read(lambda c: c.execute(
            "SELECT d.state, length(d.text), length(r.body) FROM deliveries d JOIN reports r USING (report_id) "
            "WHERE d.report_id = $1", (unknown_report,)).fetchone())
        retry = await store.admit(Occurrence("till:1:close-0001", "till:1", TILL, WorkKind.AGENT, "till:1"))
        print(f"shopbot check: {len(violations)} violation(s); pending item {tuple(pending)}; unknown delivery "
              f"{tuple(unknown)}; retried old till post: {retry.outcome.value}")
        ok = (not violations and tuple(pending) == ("still waiting", "pending") and unknown[0] == "unknown"
              and unknown[1] > 0 and unknown[2] > 0 and retry.outcome is Admission.DUPLICATE)
        print("all checks hold" if ok else "A CHECK FAILED")
        return 0 if ok else 1
    finally:
        await store.close()
        cleanup(directory)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
