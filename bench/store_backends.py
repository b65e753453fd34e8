"""The store-bound pipeline on SQLite and on PostgreSQL in the same run (issue 17): reports per second and commits
per item through admit -> claim -> finish with report -> sending -> confirmed, with the worker and the relay running
concurrently and an in-process transport (bench/throughput.py's `pipeline`), alternating the two stores.

SQLite is a file with WAL and synchronous=FULL; PostgreSQL is a fresh database on the server at SHOPBOT_TEST_PG_DSN
(default postgresql://postgres@127.0.0.1:5432/postgres), dropped afterwards.

    python -m bench.store_backends [--items 1000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from store import SqliteStore, SystemClock, open_store

from .common import machine
from .throughput import pipeline

DSN = os.environ.get("SHOPBOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def on_sqlite(directory: Path, items: int) -> tuple[float, float]:
    store = await SqliteStore.open(directory / f"bench-{time.monotonic_ns()}.sqlite3", SystemClock(),
                                   capacity=items + 10, debounce_ms=0)
    return await pipeline(store, items)


async def on_postgres(items: int) -> tuple[float, float]:
    name = f"shopbot_bench_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    try:
        url = urlunsplit(urlsplit(DSN)._replace(path=f"/{name}"))
        store = await open_store(url, SystemClock(), capacity=items + 10, debounce_ms=0)
        return await pipeline(store, items)
    finally:
        with psycopg.connect(DSN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    with psycopg.connect(DSN) as conn:
        print(f"postgresql: {conn.execute('SHOW server_version').fetchone()[0]}, synchronous_commit "  # type: ignore[index]
              f"{conn.execute('SHOW synchronous_commit').fetchone()[0]}, fsync "  # type: ignore[index]
              f"{conn.execute('SHOW fsync').fetchone()[0]}")  # type: ignore[index]
    results: dict[str, list[tuple[float, float]]] = {"sqlite": [], "postgres": []}
    with tempfile.TemporaryDirectory(prefix="shopbot-bench-") as tmp:
        for repeat in range(args.repeats):
            results["sqlite"].append(asyncio.run(on_sqlite(Path(tmp), args.items)))
            results["postgres"].append(asyncio.run(on_postgres(args.items)))
            print(f"run {repeat + 1}: " + " | ".join(
                f"{kind} {runs[-1][0]:,.0f} reports/s, {runs[-1][1]:.2f} commits/item"
                for kind, runs in results.items()))
    m = statistics.median
    for kind, runs in results.items():
        print(f"median of {args.repeats}, {kind}: {m(r for r, _ in runs):,.0f} reports/s, "
              f"{m(c for _, c in runs):.2f} commits per item")


if __name__ == "__main__":
    main()
