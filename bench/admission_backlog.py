"""Admission against the backlog (issue 31): `Store.admit` one at a time (one commit each) with 0 and with 2,000
agent items already open, against the disk's floor (single-row commits, WAL, synchronous=FULL), interleaved.

    python -m bench.admission_backlog [--backlog 2000] [--admits 1000] [--rounds 5] [--dir PATH]

Each round measures the floor, then both backlogs in alternating order (ABBA), each on a fresh SQLite file whose
capacity (`SHOPBOT_CAPACITY`'s setting) is raised to backlog + admits + 10 so nothing is refused: the backlog is
admitted first in batches of 100 (`admit_many`, untimed), then `--admits` distinct occurrences are admitted one by
one and timed. Targets: the rate at 2,000 open within 10 % of the rate at 0, and >= 0.5x the floor.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from store import Occurrence, SqliteStore, SystemClock

from .common import cleanup, median, print_machine, remove_db, scratch_dir, spread
from .disk_floor import commits_per_second


def occurrences(first: int, n: int) -> list[Occurrence]:
    return [Occurrence(f"tg:{1000 + i % 100}:{i}", f"tg:{1000 + i % 100}", f"count vanilla {i}",
                       destination=f"tg:{1000 + i % 100}") for i in range(first, first + n)]


async def admit_rate(path: Path, backlog: int, admits: int) -> float:
    """Admissions per second, one by one, with `backlog` agent items open before the first."""
    remove_db(path)
    store = await SqliteStore.open(path, SystemClock(), capacity=backlog + admits + 10, debounce_ms=0)
    try:
        waiting = occurrences(0, backlog)
        for b in range(0, backlog, 100):
            results = await store.admit_many(waiting[b:b + 100])
            assert all(r.outcome.value == "accepted" for r in results)
        start = time.perf_counter()
        for occurrence in occurrences(backlog, admits):
            result = await store.admit(occurrence)
            assert result.outcome.value == "accepted", result
        rate = admits / (time.perf_counter() - start)
        assert (await store.status()).agent_work.pending == backlog + admits
        return rate
    finally:
        await store.close()
        remove_db(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=2000)
    parser.add_argument("--admits", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=None, help="directory on the disk under test (default: $SHOPBOT_BENCH_DIR "
                        "or /tmp)")
    args = parser.parse_args()
    scratch = scratch_dir(args.dir)
    print_machine(scratch)
    floors: list[float] = []
    rates: dict[int, list[float]] = {0: [], args.backlog: []}
    try:
        for round_ in range(args.rounds):
            floors.append(commits_per_second(scratch / "floor.db", args.admits, "FULL"))
            order = [0, args.backlog] if round_ % 2 == 0 else [args.backlog, 0]
            for backlog in order:
                rates[backlog].append(asyncio.run(admit_rate(scratch / "admit.db", backlog, args.admits)))
            empty, full = rates[0][-1], rates[args.backlog][-1]
            print(f"round {round_ + 1}: floor {floors[-1]:,.0f} commits/s | Store.admit with 0 open {empty:,.0f}/s "
                  f"({empty / floors[-1]:.2f}x the floor), with {args.backlog:,} open {full:,.0f}/s "
                  f"({full / floors[-1]:.2f}x the floor) | {args.backlog:,} open / 0 open: {full / empty:.2f}",
                  flush=True)
        print()
        print(f"median of {args.rounds} rounds [min..max]: floor {spread(floors)} commits/s; Store.admit one by one "
              f"({args.admits} each) with 0 open {spread(rates[0])}/s, with {args.backlog:,} open "
              f"{spread(rates[args.backlog])}/s")
        ratios = [f / e for f, e in zip(rates[args.backlog], rates[0], strict=True)]
        print(f"  {args.backlog:,} open / 0 open: {median(ratios):.2f} (median of the rounds' ratios; target within "
              f"10 %: 0.90-1.10); 0 open / floor {median([e / f for e, f in zip(rates[0], floors, strict=True)]):.2f}"
              f"; {args.backlog:,} open / floor "
              f"{median([b / f for b, f in zip(rates[args.backlog], floors, strict=True)]):.2f} (target >= 0.5)")
    finally:
        cleanup(scratch)


if __name__ == "__main__":
    main()
