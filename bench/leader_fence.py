"""What the leader fence (C16) costs a singleton's write on SQLite, where the one process always leads: the same
one-row write transaction (`Store.atomic`, as a producer's or the poller's admission) with and without `fence=`,
interleaved so that machine load falls on both alike. Printed: median and p90 per commit of each, and the
difference. Renewals (one small commit per lease name every third of the lease, 4 every 10 s at the default) and the
process heartbeat (one every 10 s) come on top and are not measured here: 0.5 commits a second in all.

    python -m bench.leader_fence [--commits 2000] [--db PATH_OR_URL]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from store import Fence, SystemClock, open_store

from .common import machine


async def measure(where: str | Path, commits: int) -> dict[str, list[float]]:
    store = await open_store(where, SystemClock())
    try:
        generation = await store.acquire_leader("producers", "bench-leader-fence", 3600)
        assert generation is not None, "another process holds the producers lease"
        fence = Fence("producers", "bench-leader-fence", generation)
        times: dict[str, list[float]] = {"unfenced": [], "fenced": []}
        for _ in range(commits):
            for name, options in (("unfenced", {}), ("fenced", {"fence": fence})):
                start = time.perf_counter()
                await store.atomic(lambda tx: tx.count("bench_leader_fence"), **options)
                times[name].append(time.perf_counter() - start)
        await store.resign_leader("producers", "bench-leader-fence", generation)
        return times
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--db", default="", help="a SQLite path or postgresql:// URL (default: a new SQLite file)")
    args = parser.parse_args()
    where: str | Path = args.db or Path(tempfile.mkdtemp()) / "leader_fence.sqlite3"
    times = asyncio.run(measure(where, args.commits))
    print(machine())
    medians = {}
    for name, xs in times.items():
        xs.sort()
        medians[name] = statistics.median(xs)
        print(f"{name:>9}: median {medians[name] * 1000:.3f} ms, p90 {xs[int(len(xs) * 0.9)] * 1000:.3f} ms "
              f"over {len(xs)} commits")
    print(f"fence cost: {(medians['fenced'] - medians['unfenced']) * 1000:+.3f} ms per commit (median)")


if __name__ == "__main__":
    main()
