"""History scale (issue 8 item 5): admit and claim(+finish) latency with 1,000,000 finished items and reports in
the database against an empty one; target within 1.5x. Records EXPLAIN QUERY PLAN of every statement the product
runs for an admission, a claim, a finish, the worker's idle probe and one relay step.

    python -m bench.history_scale [--history 1000000] [--ops 400] [--probe-every 8] [--rounds 3]
                                  [--fix-ops 1000] [--backlog 10] [--keep PATH] [--dir PATH]

- The history is bulk-loaded by `store.bulk.load_history` (through the real triggers: pending -> running under a run
  -> finished with a linked report; each report's delivery part pending -> sending -> confirmed with a receipt),
  100 chats, in transactions of 50,000 items. Its time is printed but is not a product figure. `--keep PATH` keeps
  the loaded file (and reuses it when it already holds the history), to save the load on later runs.
- Measured with the product paths only, a real file, WAL, synchronous=FULL, ManualClock (1 ms per step),
  debounce 0. A standing backlog of --backlog pending items in their own sessions is admitted first, so every
  claim chooses among several sessions; then each operation: `Store.admit` of a new item (its own session, a
  Telegram destination) -> `Store.claim` (takes the oldest session) -> `Store.finish` (stores the report and
  queues its delivery); and the read probes the product's loops call (bot/relays/telegram.py, worker/worker.py):
  `Store.due_deliveries`, `Store.next_claim_time`, `Store.next_delivery_time`. Latency of each call as the caller
  sees it (through aiosqlite), p50 and p99 per round; the table gives the median over rounds. With the shipped
  schema the probes scan the whole history, so they are timed on every --probe-every-th operation only.
- Rounds alternate empty / full (a fresh empty database every round; the loaded one reused: it gains a few hundred
  items per round, nothing against 1,000,000, and the backlog is drained after each round). The full database was
  just written, so its pages are warm in the OS cache: these are not cold-cache figures.
- The statements are captured with sqlite3's trace callback on the store's own connection while the product
  runs them (so the SQL is exactly store/shared/inbox.py's and store/shared/outbox.py's), then each is given to
  EXPLAIN QUERY PLAN. A plan line `SCAN <table>` or `SEARCH <table>` with no index reads the whole table.
- Experiment (NOT product code): the same rounds after adding to both databases those of these indexes that the
  shipped schema does not have yet (the change proposed for store/sqlite/schema.sql as a migration, measured here before
  anyone makes it; the output lists the ones applied):
    CREATE INDEX bench_work_pending ON work (work_id) WHERE state = 'pending' AND kind = 'agent'
        (skipped when the schema has a work index WHERE state = 'pending': migration 0005's work_pending)
    CREATE INDEX bench_deliveries_pending ON deliveries (delivery_id) WHERE state = 'pending'
    CREATE INDEX bench_proposals_run ON proposals (run_id)
"""
from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from store import ManualClock, Occurrence, ReportDraft, SqliteStore
from store.sqlite.bulk import load_into

from .common import cleanup, median, pct, print_machine, remove_db, scratch_dir

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
HISTORY_START = datetime(2026, 1, 1, tzinfo=UTC)
TARGET_RATIO = 1.5
# (table, what the index serves, statement); an index is skipped when the schema already has one on the same table
# with the same partial condition (the shipped schema may have gained it meanwhile: migration 0005 added
# work_pending ON work (work_id) WHERE state = 'pending').
FIX = (
    ("work", "WHERE state = 'pending'",
     "CREATE INDEX IF NOT EXISTS bench_work_pending ON work (work_id) WHERE state = 'pending' AND kind = 'agent'"),
    # deliveries_open serves the relay's reads since migration 0022 (which dropped deliveries_pending)
    ("deliveries", "WHERE state IN ('pending'",
     "CREATE INDEX IF NOT EXISTS bench_deliveries_pending ON deliveries (delivery_id) WHERE state = 'pending'"),
    ("proposals", "(run_id)", "CREATE INDEX IF NOT EXISTS bench_proposals_run ON proposals (run_id)"),
)


def missing_fixes(conn: sqlite3.Connection) -> list[str]:
    have = conn.execute("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                        "AND name NOT LIKE 'bench_%'").fetchall()
    return [statement for table, marker, statement in FIX
            if not any(t == table and marker in " ".join(sql.split()) for t, sql in have)]
OPS = ("admit", "claim", "finish", "claim+finish", "due_deliveries", "next_claim_time", "next_delivery_time")
PROBES = OPS[4:]
STEPS = ("admit", "claim", "finish", "relay: due_deliveries", "worker: next_claim_time", "relay: next_delivery_time",
         "relay: mark_sending", "relay: mark_confirmed")


class Counter:
    def __init__(self, start: int) -> None:
        self.n = start

    def next(self) -> int:
        self.n += 1
        return self.n


async def measure(path: Path, ops: int, backlog: int, ids: Counter, *, trace: bool = False, probe_every: int = 1
                  ) -> tuple[dict[str, list[float]], list[tuple[str, str]]]:
    """Latencies in ms per operation kind; with `trace`, the distinct statements of one admit/claim/finish/relay."""
    clock = ManualClock(START)
    store = await SqliteStore.open(path, clock, capacity=10_000, debounce_ms=0)
    lat: dict[str, list[float]] = {name: [] for name in OPS}
    captured: list[tuple[str, str]] = []
    try:
        latest = await store.db.raw(lambda conn: conn.execute("SELECT max(admitted_at) FROM work").fetchone()[0])
        if latest and latest >= START.strftime("%Y-%m-%dT%H:%M:%S"):
            clock.set(datetime.strptime(latest, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
                      + timedelta(seconds=1))

        def occurrence() -> Occurrence:
            i = ids.next()
            chat = 2000 + i % 100
            return Occurrence(f"tg:{chat}:{i}", f"bench:{i}", f"count vanilla {i}", destination=f"tg:{chat}")

        for _ in range(backlog):
            clock.advance(0.001)
            await store.admit(occurrence())
        tick = time.perf_counter
        for k in range(ops + 1):
            statements: list[str] = []
            tracing = trace and k == 0
            probing = tracing or k % probe_every == 0
            if tracing:
                await store.db.raw(lambda conn, s=statements: conn.set_trace_callback(s.append))
            clock.advance(0.001)
            t0 = tick()
            result = await store.admit(occurrence())
            t1 = tick()
            claim = await store.claim("worker-1")
            t2 = tick()
            assert result.outcome.value == "accepted" and claim is not None and len(claim.items) == 1
            await store.finish(claim, ReportDraft("Opening brief: vanilla 6 tubs.", destination=claim.destination))
            t3 = tick()
            probes = []
            if probing:
                due = await store.due_deliveries(limit=20)
                t4 = tick()
                assert due
                await store.next_claim_time()
                t5 = tick()
                await store.next_delivery_time()
                t6 = tick()
                probes = [t4 - t3, t5 - t4, t6 - t5]
                # the relay sends what is due (untimed), so pending deliveries stay few, as in a running bot
                for j, delivery in enumerate(due):
                    await store.mark_sending(delivery.delivery_id)
                    await store.mark_confirmed(delivery.delivery_id, f"bench-{delivery.delivery_id}")
                    if tracing and j == 0:
                        await store.db.raw(lambda conn: conn.set_trace_callback(None))
                        captured = label_statements(statements)
            if tracing:
                continue   # the traced operation is not timed
            for name, value in zip(OPS, [t1 - t0, t2 - t1, t3 - t2, t3 - t1, *probes]):
                lat[name].append(1e3 * value)
        while (claim := await store.claim("worker-1")) is not None:     # drain the backlog (not timed)
            await store.finish(claim, ReportDraft("drained", destination=claim.destination))
        while due := await store.due_deliveries(limit=100):
            for delivery in due:
                await store.mark_sending(delivery.delivery_id)
                await store.mark_confirmed(delivery.delivery_id, f"bench-{delivery.delivery_id}")
        return lat, captured
    finally:
        await store.close()


def label_statements(statements: list[str]) -> list[tuple[str, str]]:
    """(step, SQL) for each distinct statement, in order; trigger sub-statements repeat their parent, dropped."""
    out: list[tuple[str, str]] = []
    step = "admit"
    seen: set[str] = set()
    order = iter(STEPS)
    for sql in statements:
        text = " ".join(sql.split())
        if text.startswith("--"):
            continue
        if text == "BEGIN IMMEDIATE" or text == "BEGIN":
            step = next(order)
            continue
        if text in ("COMMIT", "ROLLBACK"):
            continue
        if (step, text) in seen:
            continue
        seen.add((step, text))
        out.append((step, text))
    return out


def plans(path: Path, statements: list[tuple[str, str]]) -> list[tuple[str, str, list[str]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        result = []
        for step, sql in statements:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
            result.append((step, sql, [row[3] for row in rows]))
        return result
    finally:
        conn.close()


def scans(plan: list[str]) -> list[str]:
    """Plan lines that read a whole table: `SCAN t` or `SEARCH t` (SQLite's min/max form) with no index."""
    return [line for line in plan if re.fullmatch(r"(SCAN|SEARCH) \w+", line.strip())]


def normal(sql: str) -> str:
    return re.sub(r"\b\d+\b", "N", re.sub(r"'[^']*'", "'?'", sql))


def summarize(rounds: list[dict[str, list[float]]]) -> dict[str, tuple[float, float]]:
    return {name: (median([pct(r[name], 50) for r in rounds]), median([pct(r[name], 99) for r in rounds]))
            for name in OPS}


def print_table(title: str, empty: dict[str, tuple[float, float]], full: dict[str, tuple[float, float]],
                history: int) -> None:
    print(title)
    print(f"  {'operation':18} {'empty p50':>10} {'p99':>8} {'full p50':>10} {'p99':>8} {'ratio p50':>9} "
          f"{'ratio p99':>9}  target <= {TARGET_RATIO}x")
    for name in OPS:
        e50, e99 = empty[name]
        f50, f99 = full[name]
        r50, r99 = f50 / e50, f99 / e99
        verdict = "meets" if max(r50, r99) <= TARGET_RATIO else "SHORT"
        print(f"  {name:18} {e50:8.3f}ms {e99:6.3f}ms {f50:8.3f}ms {f99:6.3f}ms {r50:8.2f}x {r99:8.2f}x  {verdict}")
    print(f"  (full = {history:,} finished items with reports and confirmed deliveries)")


async def prepare_history(path: Path, history: int) -> float:
    # a kept file may be older
    store = await SqliteStore.open(path, ManualClock(HISTORY_START), debounce_ms=0, migrate=True)
    try:
        have = await store.db.raw(lambda conn: conn.execute(
            "SELECT count(*) FROM work WHERE worker_id = 'bulk'").fetchone()[0])
        if have == history:
            return 0.0
        if have:
            raise SystemExit(f"{path} holds {have:,} bulk items, not {history:,}: give another --keep path")
        began = time.perf_counter()
        await load_into(store, history, start=HISTORY_START)
        return time.perf_counter() - began
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--ops", type=int, default=400, help="timed operations per round, product schema")
    parser.add_argument("--probe-every", type=int, default=8,
                        help="product schema: time the three read probes on every n-th operation only (they scan)")
    parser.add_argument("--fix-ops", type=int, default=1000, help="timed operations per round, with the fix index")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=10)
    parser.add_argument("--keep", default=None, help="keep (and reuse) the loaded history at this path")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    scratch = scratch_dir(args.dir)
    print_machine(scratch)
    began = time.perf_counter()
    try:
        full_path = Path(args.keep) if args.keep else scratch / "full.db"
        work_path = scratch / "full-measured.db" if args.keep else full_path
        load_seconds = asyncio.run(prepare_history(full_path, args.history))
        if args.keep:
            shutil.copyfile(full_path, work_path)    # the kept file stays as loaded
        size = work_path.stat().st_size
        print(f"history: {args.history:,} finished items, reports, confirmed deliveries; "
              f"{size / 1e6:,.0f} MB; bulk load {load_seconds:.0f} s "
              f"({'reused' if not load_seconds else 'not a product figure'})")
        ids = Counter(10 ** 8)
        results: dict[str, dict[str, list]] = {}
        captured: dict[str, list[tuple[str, str]]] = {}
        for variant, ops in (("product", args.ops), ("fix", args.fix_ops)):
            results[variant] = {"empty": [], "full": []}
            if variant == "fix":
                conn = sqlite3.connect(str(work_path), isolation_level=None)
                fixes = missing_fixes(conn)

                def add_fix(conn: sqlite3.Connection, fixes: list[str] = fixes) -> None:
                    for statement in fixes:
                        conn.execute(statement)
                t = time.perf_counter()
                add_fix(conn)
                conn.close()
                print(f"experiment indexes created on the full database in {time.perf_counter() - t:.1f} s:")
                for statement in fixes:
                    print(f"    {statement}")
            for r in range(args.rounds):
                order = ("empty", "full") if r % 2 == 0 else ("full", "empty")
                for which in order:
                    if which == "empty":
                        path = scratch / "empty.db"
                        remove_db(path)
                        if variant == "fix":
                            async def create(p: Path = path) -> None:
                                await (await SqliteStore.open(p, ManualClock(START), debounce_ms=0)).close()
                            asyncio.run(create())
                            conn = sqlite3.connect(str(path), isolation_level=None)
                            add_fix(conn)
                            conn.close()
                    else:
                        path = work_path
                    want_trace = r == 0
                    lat, stm = asyncio.run(measure(path, ops, args.backlog, ids, trace=want_trace,
                                                   probe_every=args.probe_every if variant == "product" else 1))
                    if want_trace:
                        captured[f"{variant}-{which}"] = stm
                    results[variant][which].append(lat)
                    print(f"  {variant:7} round {r + 1} {which:5}: " + "  ".join(
                        f"{name} {pct(lat[name], 50):.2f}/{pct(lat[name], 99):.2f}" for name in OPS
                        if name != "claim+finish") + "  (ms p50/p99)", flush=True)
            if variant == "product":
                product_plans = plans(work_path, captured["product-full"])
                empty_plans = plans(scratch / "empty.db", captured["product-empty"])
        fix_plans = plans(work_path, captured["fix-full"])
        print()
        print(f"latency in ms as the caller sees it (through aiosqlite), median over {args.rounds} rounds of the "
              f"per-round p50 / p99; {args.ops} operations per round (product; the read probes on every "
              f"{args.probe_every}th), {args.fix_ops} (with the fix, every probe)")
        print_table("product schema (as shipped):", summarize(results["product"]["empty"]),
                    summarize(results["product"]["full"]), args.history)
        print_table("experiment: product + the proposed indexes listed above (NOT in store/):",
                    summarize(results["fix"]["empty"]), summarize(results["fix"]["full"]), args.history)
        print()
        print("EXPLAIN QUERY PLAN, product schema, full database (statements captured from the product's own "
              "calls; literal values as bound):")
        for step, sql, plan in product_plans:
            flag = "   <-- FULL TABLE SCAN" if scans(plan) else ""
            print(f"[{step}] {sql[:220]}{' ...' if len(sql) > 220 else ''}")
            for line in plan or ["(no plan rows: a plain insert)"]:
                print(f"      {line}")
            if flag:
                print(f"     {flag}")
        empty_by = {(step, normal(sql)): plan for step, sql, plan in empty_plans}
        same = [empty_by.get((step, normal(sql))) == plan for step, sql, plan in product_plans]
        print(f"plans on the empty database: {'identical' if all(same) else 'DIFFERENT for some statements'} "
              f"({sum(same)}/{len(same)} the same)")
        print()
        print("EXPLAIN QUERY PLAN with the proposed indexes (statements whose plan changed):")
        before = {(step, normal(sql)): plan for step, sql, plan in product_plans}
        for step, sql, plan in fix_plans:
            old = before.get((step, normal(sql)))
            if old is not None and old != plan:
                print(f"[{step}] {sql[:220]}{' ...' if len(sql) > 220 else ''}")
                print(f"      before: {' | '.join(old)}")
                print(f"      after:  {' | '.join(plan)}")
        remaining = [(step, sql, plan) for step, sql, plan in fix_plans if scans(plan)]
        print("full table scans left with the proposed indexes: " +
              ("none" if not remaining else "; ".join(f"[{s}] {' | '.join(scans(p))}" for s, _, p in remaining)))
        print(f"total {time.perf_counter() - began:.0f} s")
    finally:
        cleanup(scratch)


if __name__ == "__main__":
    main()
