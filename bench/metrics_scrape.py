"""What a /metrics scrape and an /ops page cost on a large history (issue 20): they read on the store's own
connection (a read snapshot, never the write lock), so their time is time the writer waits for the connection.

    python -m bench.metrics_scrape [--history 500000] [--rounds 20] [--dir PATH]

The history is bulk-loaded by `store.bulk.load_history` (finished items with confirmed parts). Timed, as the
caller sees them: `Store.metrics` (the store half of a scrape), a whole scrape (`Metrics.refresh` + render), and
the operator page's reads (`Store.ops_view`, `Store.reports(10)`, `Store.shop_items`,
`Store.day_series(24)`); median and max of --rounds.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime, timedelta

from bench.common import cleanup, median, print_machine, scratch_dir
from bot.metrics import Metrics
from store import ManualClock, SqliteStore, StateTallies
from store.sqlite.bulk import load_history


async def timed(rounds: int, fn) -> str:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - started) * 1000)
    return f"median {median(times):.1f} ms, max {max(times):.1f} ms"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--dir")
    args = parser.parse_args(argv)
    print_machine()
    directory = scratch_dir(args.dir)
    end = datetime(2028, 3, 1, tzinfo=UTC)
    start = end - timedelta(days=365)
    store = await SqliteStore.open(directory / "scrape.sqlite3", ManualClock(end), debounce_ms=0)
    try:
        step = 365 * 86400 / max(1, args.history)
        await store.db.raw(lambda conn: load_history(conn, args.history, start=start, step_seconds=step))
        metrics = Metrics(lambda: {"worker": True})

        async def scrape() -> None:
            await metrics.refresh(store)
            metrics.render()

        tallies: StateTallies = {}

        async def ops() -> None:      # what bot/ops_page.py reads for one view
            await store.ops_view(tallies)
            await store.reports(10)
            await store.shop_items()
            await store.day_series(24)
        print(f"history {args.history:,} finished items")
        print(f"Store.metrics, cold:      {await timed(args.rounds, lambda: store.metrics(3600.0))} (counts every row)")
        print(f"whole /metrics scrape:    {await timed(args.rounds, scrape)} (the first counts every row once)")
        print(f"/ops page reads:          {await timed(args.rounds, ops)}")
        return 0
    finally:
        await store.close()
        cleanup(directory)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
