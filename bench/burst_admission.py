"""Burst admission, store side (issue 8 item 3, first half): 10,000 pre-parsed occurrences in batches of 100
through `Store.admit_many` (one commit per batch, as one `getUpdates` batch), updates per second, median of runs.

    python -m bench.burst_admission [--runs 5] [--updates 10000] [--batch 100] [--dir PATH] [--no-profile]

Target: >= 20,000 updates/s. The occurrences come from 100 chats (`tg:<chat>:<message>`), distinct identities,
agent kind, Telegram destination; each run starts from an empty database (WAL, synchronous=FULL, the product's
migrations and triggers).

Scenarios (product code, unmodified):
- accepted: capacity 20,000, so every occurrence is accepted and stays pending (the queue grows 0 -> 10,000).
- default capacity: capacity 100 (the product default): 100 accepted, 9,900 refused (refusals are counted).

Then, to show where the time goes: the accepted scenario once more through the real `Store.admit_many`, with the
time split into BEGIN, the admission SQL, the open-work count (`inbox.open_agent_work`, wrapped), COMMIT and the
rest (aiosqlite's thread hop, the event loop); cProfile runs inside the connection thread around the transaction
functions. The split follows whatever the product code does when the benchmark runs.

Experiments (NOT product code; each is applied to the scratch database or as a replacement transaction function
inside this benchmark only, to measure a proposed change to store/ before anyone makes it):
- E1 count once per batch: `admit_many` counts open agent work once per transaction (bounded by LIMIT capacity)
  and carries the count through the batch. Exact: BEGIN IMMEDIATE holds the write lock, so only this transaction's
  own inserts change the count. (Commit df498b8 made the product count once per transaction; E1 remains as the
  reference, and differs only by the LIMIT.)
- E2 trigger counter: a one-row table kept by AFTER INSERT / AFTER UPDATE OF state triggers on work; admission
  reads one row instead of counting (applied on top of whatever the product does).
- E3 covering index: `CREATE INDEX ... ON work (kind) WHERE state IN ('pending', 'running')` so the count reads
  the index alone (still O(open); applied on top of the product code).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from store import Admission, AdmitResult, ManualClock, Occurrence, SqliteStore
from store.shared import inbox
from store.sqlite.connection import SqliteConnection

from .common import cleanup, median, print_machine, remove_db, scratch_dir, spread

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
TARGET = 20_000

E2_SCHEMA = (
    "CREATE TABLE bench_open_agent (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)",
    "INSERT INTO bench_open_agent VALUES (1, 0)",
    "CREATE TRIGGER bench_open_agent_insert AFTER INSERT ON work "
    "WHEN NEW.kind = 'agent' AND NEW.state IN ('pending', 'running') "
    "BEGIN UPDATE bench_open_agent SET n = n + 1 WHERE id = 1; END",
    "CREATE TRIGGER bench_open_agent_update AFTER UPDATE OF state ON work "
    "WHEN NEW.kind = 'agent' AND (OLD.state IN ('pending', 'running')) != (NEW.state IN ('pending', 'running')) "
    "BEGIN UPDATE bench_open_agent SET n = n + (CASE WHEN NEW.state IN ('pending', 'running') THEN 1 ELSE -1 END) "
    "WHERE id = 1; END",
)
E3_SCHEMA = ("CREATE INDEX bench_work_open_kind ON work (kind) WHERE state IN ('pending', 'running')",)


def occurrences(n: int, chats: int = 100) -> list[Occurrence]:
    return [Occurrence(f"tg:{1000 + i % chats}:{i}", f"tg:{1000 + i % chats}", f"count vanilla {i}",
                       destination=f"tg:{1000 + i % chats}") for i in range(n)]


def admit_many_counted(conn: SqliteConnection, batch: Sequence[Occurrence], now: str,
                       capacity: int) -> list[AdmitResult]:
    """E1: inbox.admit's rules (identity first, then capacity, then insert) with the open count taken once."""
    open_now = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM work WHERE {inbox.OPEN_AGENT} LIMIT $1)",
                            (capacity,)).fetchone()[0]
    results = []
    for o in batch:
        existing = conn.execute("SELECT work_id, session, payload FROM work WHERE source = $1",
                                (o.source,)).fetchone()
        if existing is not None:
            same = existing["session"] == o.session and existing["payload"] == o.payload
            results.append(AdmitResult(Admission.DUPLICATE if same else Admission.CONFLICT, existing["work_id"]))
            continue
        if o.kind.value == "agent" and open_now >= capacity:
            inbox.count(conn, now, "refused_capacity")
            results.append(AdmitResult(Admission.REFUSED))
            continue
        work_id = conn.execute(
            "INSERT INTO work (source, session, kind, payload, destination, admitted_at) "
            "VALUES ($1, $2, $3, $4, $5, $6)",
            (o.source, o.session, o.kind.value, o.payload, o.destination, now)).lastrowid
        if o.kind.value == "agent":
            open_now += 1
        results.append(AdmitResult(Admission.ACCEPTED, work_id))
    return results


async def one_run(path: Path, items: list[Occurrence], batch: int, capacity: int, *, schema: Sequence[str] = (),
                  variant: str = "product") -> tuple[float, dict[str, int]]:
    remove_db(path)
    clock = ManualClock(START)
    store = await SqliteStore.open(path, clock, capacity=capacity, debounce_ms=0)
    original = inbox.open_agent_work
    try:
        for statement in schema:
            await store.db.raw(lambda conn, s=statement: conn.execute(s))
        batches = [items[b:b + batch] for b in range(0, len(items), batch)]
        outcomes: dict[str, int] = {}
        if variant == "e2":
            inbox.open_agent_work = lambda conn, cap=None: conn.execute(
                "SELECT n FROM bench_open_agent WHERE id = 1").fetchone()[0]
        start = time.perf_counter()
        for chunk in batches:
            if variant == "e1":
                now = store.now()
                results = await store.db.write(lambda conn, c=chunk, t=now: admit_many_counted(conn, c, t, capacity))
            else:
                results = await store.admit_many(chunk)
            for r in results:
                outcomes[r.outcome.value] = outcomes.get(r.outcome.value, 0) + 1
        rate = len(items) / (time.perf_counter() - start)
        counted = await store.db.read(inbox.open_agent_work) if variant != "e2" else None
        violations = await store.check()
        assert not violations, violations
        if variant == "e2":
            inbox.open_agent_work = original
            counted = await store.db.read(inbox.open_agent_work)
            kept = await store.db.read(lambda conn: conn.execute("SELECT n FROM bench_open_agent").fetchone()[0])
            assert kept == counted, (kept, counted)
        assert counted == outcomes.get("accepted", 0), (counted, outcomes)
        return rate, outcomes
    finally:
        inbox.open_agent_work = original
        await store.close()
        remove_db(path)


async def instrumented(path: Path, items: list[Occurrence], batch: int, capacity: int,
                       profile: bool) -> tuple[dict[str, float], int, str]:
    """The accepted scenario through the real `Store.admit_many`, with the time split where it is spent.

    The store's `Database.write` is replaced, on this store instance only, by the same three steps (BEGIN IMMEDIATE,
    the transaction function, COMMIT) with clocks around them; `inbox.open_agent_work` is wrapped to time the
    capacity count wherever the product calls it; with `profile`, cProfile runs inside the connection thread around
    the transaction function (cProfile sees only its own thread). Returns seconds per phase, the number of counts,
    and the profile text."""
    remove_db(path)
    store = await SqliteStore.open(path, ManualClock(START), capacity=capacity, debounce_ms=0)
    phases = {"begin": 0.0, "admission SQL except the count": 0.0, "open-work count": 0.0, "commit": 0.0,
              "outside the connection thread (aiosqlite hop, event loop, Python)": 0.0}
    counts = [0]
    original = inbox.open_agent_work
    profiler = cProfile.Profile() if profile else None
    tick = time.perf_counter

    def timed_count(conn: SqliteConnection, cap: int | None = None) -> int:
        t = tick()
        try:
            return original(conn, cap)
        finally:
            phases["open-work count"] += tick() - t
            counts[0] += 1

    async def write(fn: Callable, *args):
        def transaction(raw: sqlite3.Connection):
            t0 = tick()
            raw.execute("BEGIN IMMEDIATE")
            t1 = tick()
            try:
                conn = SqliteConnection(raw)
                result = profiler.runcall(fn, conn, *args) if profiler else fn(conn, *args)
            except BaseException:
                raw.execute("ROLLBACK")
                raise
            t2 = tick()
            raw.execute("COMMIT")
            t3 = tick()
            phases["begin"] += t1 - t0
            phases["admission SQL except the count"] += t2 - t1
            phases["commit"] += t3 - t2
            return result
        return await store.db._call(transaction)

    try:
        store.db.write = write          # this instance only
        inbox.open_agent_work = timed_count
        start = tick()
        for b in range(0, len(items), batch):
            await store.admit_many(items[b:b + batch])
        total = tick() - start
    finally:
        inbox.open_agent_work = original
        await store.close()
        remove_db(path)
    phases["admission SQL except the count"] -= phases["open-work count"]
    inside = sum(v for k, v in phases.items() if not k.startswith("outside"))
    phases["outside the connection thread (aiosqlite hop, event loop, Python)"] = total - inside
    text = ""
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(8)
        text = "\n".join(line for line in out.getvalue().splitlines() if line.strip())
    return phases, counts[0], text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--updates", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    scratch = scratch_dir(args.dir)
    print_machine(scratch)
    items = occurrences(args.updates)
    n, batch = args.updates, args.batch
    big = 2 * n
    scenarios: list[tuple[str, int, Sequence[str], str]] = [
        ("accepted (capacity 20,000: all 10,000 admitted)", big, (), "product"),
        ("default capacity 100 (100 admitted, the rest refused)", 100, (), "product"),
        ("E1 count once per batch, all admitted [experiment]", big, (), "e1"),
        ("E2 trigger-kept open count, all admitted [experiment]", big, E2_SCHEMA, "e2"),
        ("E3 covering index for the count, all admitted [experiment]", big, E3_SCHEMA, "product"),
        ("E1 at default capacity 100 [experiment]", 100, (), "e1"),
    ]
    try:
        rates: dict[str, list[float]] = {name: [] for name, *_ in scenarios}
        seen: dict[str, dict[str, int]] = {}
        for run in range(args.runs):   # scenarios interleaved inside each run, so drift hits them all alike
            for name, capacity, schema, variant in scenarios:
                rate, outcomes = asyncio.run(one_run(scratch / "burst.db", items, batch, capacity, schema=schema,
                                                     variant=variant))
                rates[name].append(rate)
                seen[name] = outcomes
            print(f"run {run + 1}: " + "  ".join(f"{rates[name][-1]:,.0f}" for name, *_ in scenarios))
        print()
        print(f"{n:,} updates in batches of {batch} through Store.admit_many, one commit per batch; "
              f"updates/s, median of {args.runs} runs [min..max]; target >= {TARGET:,}/s")
        for name, *_ in scenarios:
            med = median(rates[name])
            verdict = "meets" if med >= TARGET else f"SHORT ({med / TARGET:.2f}x of target)"
            print(f"  {name:60} {spread(rates[name]):>28}  {verdict}  outcomes {seen[name]}")
        phases, counts, text = asyncio.run(instrumented(scratch / "split.db", items, batch, big,
                                                        profile=not args.no_profile))
        total = sum(phases.values())
        print()
        print("where the time goes: the accepted scenario once more through the real Store.admit_many, instrumented "
              f"(so slower than above); {counts:,} open-work counts for {n:,} updates")
        for name, seconds in phases.items():
            per = (f"{1e6 * seconds / counts:8.1f} us per count" if name == "open-work count" and counts else
                   f"{1e3 * seconds / (n / batch):8.3f} ms per batch")
            print(f"  {name:68} {seconds:7.3f} s  {100 * seconds / total:5.1f} %  {per}")
        print(f"  {'total':68} {total:7.3f} s  -> {n / total:,.0f} updates/s instrumented")
        if text:
            print()
            print("cProfile inside the connection thread, around the transaction functions (cumulative):")
            print(text)
    finally:
        cleanup(scratch)


if __name__ == "__main__":
    main()
