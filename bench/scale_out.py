"""Several `shopbot run` processes on one PostgreSQL database (issue 18): turns per second against the number of
processes with a fixed 200 ms model; the re-execution rate under SIGSTOP alone; the wake-up latency of a turn
admitted by another process, with and without NOTIFY.

Every process is a real `shopbot run` (this checkout's interpreter, `python -m bot.cli run`) with no Telegram (the
items have no destination: a turn is claim -> model -> finish with its report), talking to a bench-local
OpenAI-compatible server that answers every request after `--model-ms` (200 ms) with a plain text reply and
records which item each request was for. Items are pre-admitted through the store, one per session, across many
sessions. The database is a fresh one on the server at SHOPBOT_TEST_PG_DSN (default
postgresql://postgres@127.0.0.1:5432/postgres), dropped afterwards.

- throughput: for each N in `--processes` (1 2 4 8): start N processes, wait until all run, count finished turns
  over `--window` seconds (after `--warmup`), stop them. Target: 4 processes >= 3.5x one.
- sigstop (`--chaos`): N=4 processes with SHOPBOT_LEASE_S=`--chaos-lease` (2); every 0.5-1.5 s a random process is
  SIGSTOPped for 1.5-2x the lease (past it), then SIGCONTed, for `--chaos-s` seconds; then everything drains.
  Counted from the records and the model server: turns run more than once (items the model saw more than once)
  against turns, and items covered by more than one report (must be 0).
- wake: one idle process; an item admitted every 0.25-0.5 s by the bench (another process): the time from its
  admission commit to the model request for it, with the NOTIFY triggers in place and with them dropped (then the
  worker finds it at its once-a-second look).

    python -m bench.scale_out [--processes 1 2 4 8] [--window 10] [--chaos] [--wake]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from store import Occurrence, SystemClock, WorkKind, open_store

from .common import machine

DSN = os.environ.get("SHOPBOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "tests" / "support" / "data" / "shop_calm.toml"


# ---- a model that takes 200 ms ---------------------------------------------------------------------------------
class SlowModel:
    """OpenAI-compatible `POST /v1/chat/completions`, answered after `delay_s` with a text reply; records the
    arrival time of each request and the item it was for (the `item <n>` in its last user message)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.seen: Counter[str] = Counter()
        self.arrivals: dict[str, float] = {}      # item -> first arrival (monotonic)
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> SlowModel:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                now = time.monotonic()
                text = ""
                for message in body.get("messages", []):
                    if message.get("role") == "user" and isinstance(message.get("content"), str):
                        text = message["content"]
                item = text.rsplit("item ", 1)[-1].strip() if "item " in text else "?"
                self.seen[item] += 1
                self.arrivals.setdefault(item, now)
                await asyncio.sleep(self.delay_s)
                payload = json.dumps({
                    "id": "bench", "object": "chat.completion", "created": int(time.time()), "model": "bench",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": f"done {item}"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


# ---- the database and the processes --------------------------------------------------------------------------
def url_of(name: str) -> str:
    return urlunsplit(urlsplit(DSN)._replace(path=f"/{name}"))


def admin(sql: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


async def fresh_database(items: int, first: int = 0) -> tuple[str, str]:
    name = f"shopbot_scale_{os.getpid()}_{time.monotonic_ns()}"
    admin(f"CREATE DATABASE {name}")
    url = url_of(name)
    store = await open_store(url, SystemClock(), capacity=items + 10, debounce_ms=0)
    try:
        await admit(store, items, first)
    finally:
        await store.close()
    return name, url


async def admit(store: Any, items: int, first: int = 0) -> None:
    for start in range(first, first + items, 200):
        await store.admit_many([Occurrence(f"bench:{n}", f"tg:{n}", f"how much vanilla item {n}", WorkKind.AGENT,
                                           None) for n in range(start, min(first + items, start + 200))])


class Fleet:
    def __init__(self, url: str, model_port: int, scratch: Path, **settings: str) -> None:
        self.url, self.model_port, self.scratch, self.settings = url, model_port, scratch, settings
        self.procs: list[asyncio.subprocess.Process] = []
        self.logs: list[Path] = []

    def env(self, index: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        log = self.scratch / f"p{index}-{time.monotonic_ns()}.log"
        self.logs.append(log)
        env.update({"SHOPBOT_DB": self.url, "SHOPBOT_MODEL": "openai:bench",
                    "SHOPBOT_MODEL_BASE_URL": f"http://127.0.0.1:{self.model_port}/v1",
                    "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_SHOP_FILE": str(SHOP),
                    "SHOPBOT_LOG_FILE": str(log), "SHOPBOT_LOG_LEVEL": "WARNING", **self.settings})
        return env

    async def start(self, n: int) -> None:
        for i in range(n):
            self.procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.cli", "run", env=self.env(i), cwd=str(ROOT),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while not all(self.listening(p) for p in self.procs):   # each process has its LISTEN connection up
            if time.monotonic() > deadline:
                raise RuntimeError("the processes did not start within 60 s")
            await asyncio.sleep(0.1)

    def listening(self, proc: asyncio.subprocess.Process) -> bool:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                     (f"shopbot listen pid={proc.pid}",)).fetchone()[0])  # type: ignore[index]

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def finished(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM work WHERE state = 'finished'").fetchone()[0])  # type: ignore[index]


# ---- the three measurements --------------------------------------------------------------------------------
async def throughput(n: int, args: argparse.Namespace, scratch: Path) -> float:
    rate_guess = 1000 / (args.model_ms + 20) * n * args.concurrency
    items = int(rate_guess * (args.warmup + args.window + 10) * 1.5) + 50
    name, url = await fresh_database(items)
    try:
        async with SlowModel(args.model_ms / 1000) as model:
            fleet = Fleet(url, model.port, scratch, SHOPBOT_WORKER_CONCURRENCY=str(args.concurrency),
                          **lease_setting(args))
            try:
                await fleet.start(n)
                await asyncio.sleep(args.warmup)
                before, t0 = finished(url), time.monotonic()
                await asyncio.sleep(args.window)
                after, t1 = finished(url), time.monotonic()
            finally:
                await fleet.stop()
        if after >= items:
            raise RuntimeError(f"N={n}: the queue ran dry ({items} items); the figure would be low")
        return (after - before) / (t1 - t0)
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def lease_setting(args: argparse.Namespace) -> dict[str, str]:
    return {"SHOPBOT_LEASE_S": str(args.lease)} if args.lease else {}


async def sigstop(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    n, lease = 4, args.chaos_lease
    items = int(1000 / (args.model_ms + 80) * n * args.chaos_s * 0.9)     # about what N=4 does in the chaos time
    name, url = await fresh_database(items)
    rng = random.Random(args.seed)
    stops = 0
    try:
        async with SlowModel(args.model_ms / 1000) as model:
            fleet = Fleet(url, model.port, scratch, SHOPBOT_LEASE_S=str(lease))
            try:
                await fleet.start(n)
                end = time.monotonic() + args.chaos_s
                while time.monotonic() < end:
                    await asyncio.sleep(rng.uniform(0.5, 1.5))
                    proc = rng.choice(fleet.procs)
                    proc.send_signal(signal.SIGSTOP)
                    stops += 1
                    await asyncio.sleep(rng.uniform(1.5, 2.0) * lease)
                    proc.send_signal(signal.SIGCONT)
                deadline = time.monotonic() + 120
                while finished(url) < items and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
            finally:
                await fleet.stop()
        with psycopg.connect(url) as conn:
            open_left = conn.execute("SELECT count(*) FROM work WHERE state IN ('pending', 'running')").fetchone()[0]  # type: ignore[index]
            doubles = conn.execute("SELECT count(*) FROM (SELECT work_id FROM report_items GROUP BY work_id "
                                   "HAVING count(*) > 1) x").fetchone()[0]  # type: ignore[index]
            runs = conn.execute("SELECT outcome, count(*) FROM runs GROUP BY outcome").fetchall()
            unreported = conn.execute("SELECT count(*) FROM work w WHERE state = 'finished' AND NOT EXISTS "
                                      "(SELECT 1 FROM report_items i WHERE i.work_id = w.work_id)").fetchone()[0]  # type: ignore[index]
        again = sum(1 for c in model.seen.values() if c > 1)
        return {"processes": n, "lease_s": lease, "sigstops": stops, "turns": items, "left_open": open_left,
                "rerun_turns": again, "rerun_rate": again / items, "model_calls": sum(model.seen.values()),
                "items_in_2_reports": doubles, "finished_without_report": unreported,
                "runs": {o or "open": c for o, c in runs}}
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def wake(args: argparse.Namespace, scratch: Path, notify: bool) -> list[float]:
    name, url = await fresh_database(0)
    if not notify:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER notify_work ON work")
    latencies = []
    rng = random.Random(args.seed)
    try:
        async with SlowModel(0.0) as model:
            fleet = Fleet(url, model.port, scratch, **lease_setting(args))
            store = await open_store(url, SystemClock(), capacity=1000, debounce_ms=0)
            try:
                await fleet.start(1)
                await asyncio.sleep(1.0)
                for i in range(args.wake_samples):
                    await asyncio.sleep(rng.uniform(0.25, 0.5))
                    await admit(store, 1, 10_000 + i)
                    committed = time.monotonic()
                    key = str(10_000 + i)
                    deadline = committed + 10
                    while key not in model.arrivals and time.monotonic() < deadline:
                        await asyncio.sleep(0.001)
                    latencies.append((model.arrivals.get(key, float("nan")) - committed) * 1000)
            finally:
                await store.close()
                await fleet.stop()
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return latencies


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return (f"p50 {statistics.median(ordered):.1f} ms, p90 {p(0.9):.1f} ms, max {ordered[-1]:.1f} ms "
            f"(n={len(ordered)})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--model-ms", type=float, default=200.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=1, help="SHOPBOT_WORKER_CONCURRENCY of each process")
    parser.add_argument("--lease", type=float, default=0.0, help="SHOPBOT_LEASE_S (0: the default)")
    parser.add_argument("--chaos", action="store_true", help="also the re-execution rate under SIGSTOP")
    parser.add_argument("--chaos-s", type=float, default=30.0)
    parser.add_argument("--chaos-lease", type=float, default=2.0, help="SHOPBOT_LEASE_S during the chaos")
    parser.add_argument("--wake", action="store_true", help="also the wake-up latency with and without NOTIFY")
    parser.add_argument("--wake-samples", type=int, default=30)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    print(json.dumps(machine(), indent=1))
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = args.logs or Path(scratch_dir)
        scratch.mkdir(parents=True, exist_ok=True)
        rates = {}
        for n in args.processes:
            rates[n] = await throughput(n, args, scratch)
            base = rates.get(1)
            print(f"N={n}: {rates[n]:.1f} turns/s" + (f" ({rates[n] / base:.2f}x one)" if base else ""), flush=True)
        if args.wake:
            for notify in (True, False):
                print(f"wake-up, {'with' if notify else 'without'} NOTIFY: "
                      f"{summary(await wake(args, scratch, notify))}", flush=True)
        if args.chaos:
            print("SIGSTOP alone:", json.dumps(await sigstop(args, scratch)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
