"""The disk's floor: single-row commits per second with WAL and synchronous=FULL, and the store's own admissions
per second one by one (`Store.admit`), medians of repeated runs.

    python -m bench.disk_floor [--runs 5] [--commits 2000] [--admits 2000] [--dir /path/on/the/disk]

Figures:
- floor: a bare sqlite3 connection, `PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL`, one
  `BEGIN IMMEDIATE; INSERT one row; COMMIT` per iteration (each commit syncs the WAL).
- context only (never allowed in the product): the same loop with synchronous=NORMAL, which does not sync the WAL
  at each commit; the difference is what the per-commit fsync costs on this disk.
- aiosqlite hop: `Database.raw(lambda conn: None)` round trips per second (the price of one await on the store).
- direct: the same admissions through `store.inbox.admit` on a plain sqlite3 connection (what the store's SQL and
  commit cost without aiosqlite's thread hop and the event loop).
- store.admit: `Store.admit` of distinct agent occurrences one at a time (one commit each, capacity large enough
  that none is refused). The open queue grows during the run (every admitted item stays pending), and admission
  counts open work on every call (C1 capacity check), so the rate over the first and the last 10 % of the run is
  printed too.
"""
from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from pathlib import Path

from store import Occurrence, SqliteStore, SystemClock

from .common import cleanup, median, print_machine, remove_db, scratch_dir, spread


def commits_per_second(path: Path, n: int, synchronous: str) -> float:
    remove_db(path)
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        assert mode == "wal", mode
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        for _ in range(50):    # warm-up: file created, WAL in place
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES ('warm')")
            conn.execute("COMMIT")
        start = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
            conn.execute("COMMIT")
        return n / (time.perf_counter() - start)
    finally:
        conn.close()
        remove_db(path)


async def store_admits(path: Path, n: int) -> tuple[float, float, float, float]:
    """(admissions/s over the run, first 10 %, last 10 %, aiosqlite round trips/s)."""
    remove_db(path)
    store = await SqliteStore.open(path, SystemClock(), capacity=10 * n, debounce_ms=0)
    try:
        sync = await store.db.raw(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0])
        mode = await store.db.raw(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0])
        assert (sync, mode) == (2, "wal"), (sync, mode)   # 2 = FULL
        hops = 2000
        start = time.perf_counter()
        for _ in range(hops):
            await store.db.raw(lambda conn: None)
        hop_rate = hops / (time.perf_counter() - start)
        occurrences = [Occurrence(f"tg:{1000 + i % 100}:{i}", f"tg:{1000 + i % 100}", f"count vanilla {i}",
                                  destination=f"tg:{1000 + i % 100}") for i in range(n)]
        stamps = []
        start = time.perf_counter()
        for occurrence in occurrences:
            result = await store.admit(occurrence)
            assert result.outcome.value == "accepted", result
            stamps.append(time.perf_counter())
        total = n / (stamps[-1] - start)
        tenth = max(1, n // 10)
        first = tenth / (stamps[tenth - 1] - start)
        last = tenth / (stamps[-1] - stamps[-tenth - 1])
        return total, first, last, hop_rate
    finally:
        await store.close()
        remove_db(path)


def sync_admits(path: Path, n: int) -> tuple[float, dict[str, float]]:
    """The same admissions as `store_admits`, with the SQL of `store.inbox.admit` (identity lookup, open-work count,
    insert) on a plain sqlite3 connection with the store's pragmas, one BEGIN IMMEDIATE ... COMMIT each: the store's
    SQL and commit without aiosqlite and asyncio, timed statement by statement (us per admission)."""
    from store.clock import to_text
    from store.shared import inbox
    from store.sqlite.connection import configure

    remove_db(path)

    async def create() -> None:
        await (await SqliteStore.open(path, SystemClock(), debounce_ms=0)).close()
    asyncio.run(create())
    conn = sqlite3.connect(str(path), isolation_level=None)
    phases = {"begin": 0.0, "identity lookup": 0.0, "open-work count": 0.0, "insert": 0.0, "commit": 0.0}
    try:
        configure(conn)
        occurrences = [Occurrence(f"tg:{1000 + i % 100}:{i}", f"tg:{1000 + i % 100}", f"count vanilla {i}",
                                  destination=f"tg:{1000 + i % 100}") for i in range(n)]
        clock = SystemClock()
        tick = time.perf_counter
        start = tick()
        for o in occurrences:
            t0 = tick()
            conn.execute("BEGIN IMMEDIATE")
            t1 = tick()
            assert conn.execute("SELECT work_id, session, payload FROM work WHERE source = ?",
                                (o.source,)).fetchone() is None
            t2 = tick()
            assert inbox.open_agent_work(conn) < 10 * n
            t3 = tick()
            conn.execute("INSERT INTO work (source, session, kind, payload, destination, admitted_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (o.source, o.session, o.kind.value, o.payload, o.destination, to_text(clock.now())))
            t4 = tick()
            conn.execute("COMMIT")
            t5 = tick()
            for name, d in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                phases[name] += d
        rate = n / (tick() - start)
        return rate, {name: 1e6 * total / n for name, total in phases.items()}
    finally:
        conn.close()
        remove_db(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--admits", type=int, default=2000)
    parser.add_argument("--dir", default=None,
                        help="directory on the disk under test (default: $SHOPBOT_BENCH_DIR or /tmp)")
    args = parser.parse_args()
    scratch = scratch_dir(args.dir)
    print_machine(scratch)
    try:
        full, normal, admits, first, last, hops, direct, breakdown = [], [], [], [], [], [], [], []
        for run in range(args.runs):
            full.append(commits_per_second(scratch / "floor.db", args.commits, "FULL"))
            normal.append(commits_per_second(scratch / "floor.db", args.commits, "NORMAL"))
            total, head, tail, hop = asyncio.run(store_admits(scratch / "admit.db", args.admits))
            admits.append(total)
            first.append(head)
            last.append(tail)
            hops.append(hop)
            rate, phases = sync_admits(scratch / "direct.db", args.admits)
            direct.append(rate)
            breakdown.append(phases)
            print(f"run {run + 1}: floor {full[-1]:,.0f}/s  normal {normal[-1]:,.0f}/s  store.admit {total:,.0f}/s "
                  f""
                  f"(first 10% {head:,.0f}/s, last 10% {tail:,.0f}/s)  same SQL without aiosqlite {direct[-1]:,.0f}/s  "
                  f"aiosqlite hop {hop:,.0f}/s")
        print()
        print(f"median of {args.runs} runs [min..max]")
        print(f"disk floor, single-row commits/s, WAL + synchronous=FULL ({args.commits} commits): {spread(full)}")
        print(f"  context: same with synchronous=NORMAL (not allowed in the product): {spread(normal)}")
        print(f"  per-commit time at the floor: {1e6 / median(full):,.0f} us")
        print(f"store.admit one by one, admissions/s ({args.admits} admits, one commit each): {spread(admits)}")
        print(f"  first 10% of the run (queue nearly empty): {spread(first)}")
        print(f"  last 10% (about {args.admits * 9 // 10:,} open items counted per admission): {spread(last)}")
        print(f"  store.admit / floor: {median(admits) / median(full):.2f}")
        print(f"  the same admissions by store.inbox.admit on a plain sqlite3 connection (no aiosqlite, no asyncio): "
              f"{spread(direct)}")
        print(f"  per admission: {1e6 / median(admits):,.0f} us through Store.admit, {1e6 / median(direct):,.0f} us "
              f"of SQL + commit, {1e6 / median(full):,.0f} us is the floor's one-row commit")
        print("  SQL + commit by statement, us per admission (median of runs): " + ", ".join(
            f"{name} {median([b[name] for b in breakdown]):,.0f}" for name in breakdown[0]))
        print(f"aiosqlite round trip with no SQL (Database.raw), per second: {spread(hops)} "
              f"= {1e6 / median(hops):,.0f} us per await")
    finally:
        cleanup(scratch)


if __name__ == "__main__":
    main()
