"""Durable throughput (issue 8, item 2; issue 16): reports per second where every report answers exactly one
message (one message in flight per chat, so coalescing cannot inflate it), through admit -> claim -> finish with
report -> sending -> confirmed, on a real SQLite file with synchronous=FULL, with the offline model answering
without tools.

Figures:
- the anchor, when huey is installed (the `bench` extra): huey's SqliteHuey (WAL, fsync=True: synchronous=FULL) cycle
  in the same run, `items` no-op tasks enqueued (one commit each), then each `dequeue()`d (one commit) and
  `execute()`d in this process with no result stored; rate = items / total seconds, and the ratio of the pipeline's
  rate to it (issue 31's target: >= 0.5x, with every durable state of the pipeline kept);
- the pipeline, pacing off (no per-chat and no global bucket), with an in-process transport (a Transport whose send
  confirms at once: the network seam only); commits per item are counted and the disk's floor (single-row commits
  per second, WAL, synchronous=FULL) is measured in the same run;
- the pipeline, pacing off, through python-telegram-bot over HTTP against the local Bot API server running as its
  own process (with the CPU split between the bot and the server);
- Telegram's limit saturated: default pacing (per chat 1 s with a burst of 3, global 30/s with a burst of 30), one
  message in each of `--saturate` chats at once, against the local Bot API with its flood limit on (429 above a
  bucket of 30 draining at 30/s): the steady rate after the burst should equal the global rate, with no 429.

- with `--postgres [URL]`, the in-process pipeline once more on a scratch PostgreSQL database, interleaved, with its
  ratio to SQLite.
- with `--anatomy [SLOTS ...]`, the in-process pipeline once more for each worker concurrency named (default: the
  product's), printing where its time goes: each thread's CPU per item and share of the run (the event loop's and
  SQLite's connection thread, from /proc on Linux), and when the worker had finished half and all of the reports
  against when the relay had sent them.

    python -m bench.throughput [--items 2000] [--saturate 300] [--repeats 3] [--postgres [URL]] [--anatomy [N ...]]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bot.relays.sender import OutcomeKind, SendOutcome
from bot.relays.telegram import Relay, RelaySettings
from store import Occurrence, SqliteStore, SystemClock
from worker.models.offline import OfflineModel
from worker.worker import Worker, WorkerSettings

from .common import machine
from .disk_floor import commits_per_second

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"
# The fake's flood limit in the saturation run: 30/s, taking 33 at once: the bot's burst of 30 plus 100 ms of
# arrival jitter at 30/s (requests sent on the bucket's grid arrive a little early or late on a loaded machine).
# `--strict` runs once more with 30 at once: no tolerance at all.
FLOOD_BURST = 33.0


class InstantTransport:
    """The network seam only: Telegram accepts every message at once."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, chat_id, text, asks=(), *, reply_to=None) -> SendOutcome:  # type: ignore[no-untyped-def]
        self.sent += 1
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(self.sent))

    async def edit(self, chat_id, message_id, text, asks=()) -> SendOutcome:  # type: ignore[no-untyped-def]
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id))


def huey_cycle(directory: Path, items: int) -> float | None:
    """huey's SqliteHuey cycle (see the module's docstring): tasks per second, or None when huey is not installed."""
    try:
        from huey import SqliteHuey
    except ImportError:
        return None
    queue = SqliteHuey("bench", filename=str(directory / f"huey-{time.monotonic_ns()}.sqlite3"), results=False,
                       fsync=True, journal_mode="wal")
    done = 0

    @queue.task()
    def noop() -> None:
        nonlocal done
        done += 1

    start = time.perf_counter()
    for _ in range(items):
        noop()
    while (task := queue.dequeue()) is not None:
        queue.execute(task)
    elapsed = time.perf_counter() - start
    assert done == items, (done, items)
    queue.storage.close()
    return items / elapsed


def disk_floor(directory: Path, commits: int = 1000) -> float:
    """Single-row commits per second with WAL and synchronous=FULL (bench/disk_floor.py's measure)."""
    return commits_per_second(directory / f"floor-{time.monotonic_ns()}.sqlite3", commits, "FULL")


async def in_process(directory: Path, items: int, calls: list[float] | None = None, *,
                     anatomy: Anatomy | None = None) -> tuple[float, float]:
    store = await SqliteStore.open(directory / f"inproc-{time.monotonic_ns()}.sqlite3", SystemClock(),
                                   capacity=items + 10, debounce_ms=0)
    return await pipeline(store, items, calls, anatomy=anatomy)


async def on_postgres(server: str | None, items: int) -> tuple[float, float]:
    """The same pipeline on a fresh scratch PostgreSQL database (the server's own durability settings)."""
    from store.postgres.store import PostgresStore

    from .common import scratch_pg_database
    with scratch_pg_database(server, "throughput") as url:
        store = await PostgresStore.open(url, SystemClock(), capacity=items + 10, debounce_ms=0)
        return await pipeline(store, items)


class Anatomy:
    """Where one in-process run's time goes (`--anatomy`): the worker's concurrency, when each report was finished
    and sent, and each thread's CPU over the run."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.finished: list[float] = []
        self.sent: list[float] = []
        self.start = 0.0
        self.elapsed = 0.0
        self.cpu: dict[str, float] = {}       # thread -> CPU seconds during the run

    def watch(self, store, transport: InstantTransport) -> None:  # type: ignore[no-untyped-def]
        finish, send = store.finish, transport.send

        async def finishing(*args, **kwargs):  # type: ignore[no-untyped-def]
            outcome = await finish(*args, **kwargs)
            self.finished.append(time.perf_counter())
            return outcome

        async def sending(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.sent.append(time.perf_counter())
            return await send(*args, **kwargs)
        store.finish = finishing            # recording the times is the measurement
        transport.send = sending            # type: ignore[method-assign]

    @staticmethod
    def threads() -> dict[str, float]:
        """CPU seconds of each of this process's threads, by name (empty where /proc is not there)."""
        cpu: dict[str, float] = {}
        names = {t.native_id: t.name for t in threading.enumerate()}
        names[threading.main_thread().native_id] = "event loop"
        try:
            tids = [int(tid) for tid in os.listdir("/proc/self/task")]
        except OSError:
            return cpu
        for tid in tids:
            try:
                seconds = _cpu_seconds(Path(f"/proc/self/task/{tid}/stat"))
            except OSError:
                continue
            name = names.get(tid, f"thread {tid}")
            name = "SQLite connection" if "connection_worker" in name else name
            cpu[name] = cpu.get(name, 0.0) + seconds
        return cpu

    def lines(self, items: int) -> list[str]:
        def at(times: list[float], share: float) -> str:
            return f"{times[max(0, int(len(times) * share) - 1)] - self.start:.2f}" if times else "-"
        cpu = ", ".join(f"{name} {seconds / items * 1000:.2f} ms ({seconds / self.elapsed:.0%} of the run)"
                        for name, seconds in sorted(self.cpu.items(), key=lambda kv: -kv[1]) if seconds > 0)
        return [f"  CPU per item: {cpu or 'not available (no /proc)'}",
                f"  reports finished by the worker: half at {at(self.finished, 0.5)} s, all at "
                f"{at(self.finished, 1.0)} s; sent by the relay: half at {at(self.sent, 0.5)} s, all at "
                f"{at(self.sent, 1.0)} s (run {self.elapsed:.2f} s)"]


async def pipeline(store, items: int, calls: list[float] | None = None, *,  # type: ignore[no-untyped-def]
                   anatomy: Anatomy | None = None) -> tuple[float, float]:
    """admit -> claim -> finish -> sending -> confirmed for `items` one-message chats on an open store (closed at the
    end); (reports per second, commits per item). SQLite's commits are its durable ones (`Database.commits`: one
    per group commit that changed anything, store/sqlite/connection.py); a store without that count (PostgreSQL:
    one transaction per call) counts its write calls. The write calls per item are appended to `calls`; with
    `anatomy`, its worker concurrency is used and its times and threads' CPU recorded."""
    writes = 0
    write = store.db.write

    async def counting(fn, *args):  # type: ignore[no-untyped-def]
        nonlocal writes
        writes += 1
        return await write(fn, *args)
    store.db.write = counting  # type: ignore[method-assign] - counting write calls is part of the measurement
    transport = InstantTransport()
    if anatomy is not None:
        anatomy.watch(store, transport)
    worker = Worker(store, OfflineModel(), WorkerSettings(concurrency=anatomy.slots) if anatomy else None)
    relay = Relay(store, transport, lambda chat: True, RelaySettings(chat_pace_s=0.0, global_per_s=0))  # pacing off
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(relay.run())]
    durable_at_start = getattr(store.db, "commits", None)
    cpu_at_start = Anatomy.threads() if anatomy is not None else {}
    start = time.perf_counter()
    for batch in range(0, items, 100):                      # getUpdates batches of 100, one commit each
        await store.admit_many([Occurrence(f"tg:{n}:1", f"tg:{n}", "help", destination=f"tg:{n}")
                                for n in range(batch, min(items, batch + 100))])
    while transport.sent < items:
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - start
    if anatomy is not None:
        anatomy.start, anatomy.elapsed = start, elapsed
        anatomy.cpu = {name: seconds - cpu_at_start.get(name, 0.0) for name, seconds in Anatomy.threads().items()}
    durable = None if durable_at_start is None else store.db.commits - durable_at_start
    worker.stop()
    relay.stop()
    await asyncio.gather(*tasks)
    await store.close()
    if calls is not None:
        calls.append(writes / items)
    return items / elapsed, (writes if durable is None else durable) / items


async def over_http(directory: Path, items: int, *, paced: bool, flood_burst: float = FLOOD_BURST) -> dict:
    """`items` owner messages in `items` chats through the whole product over HTTP. paced=False: pacing off, the
    fake without a flood limit; paced=True: default pacing against the fake's flood limit of 30/s, taking
    `flood_burst` calls at once."""
    from bot import config as config_module
    from bot.app import App
    token = "4242:throughput-bench"
    port = 20000 + os.getpid() % 20000
    flood = ["--flood-per-s", "30", "--flood-burst", str(flood_burst)] if paced else []
    server = subprocess.Popen([sys.executable, "-m", "bot.sandbox.bot_api", "--token", token, "--port", str(port),
                               *flood], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        owners = list(range(7000, 7000 + items))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({"SHOPBOT_DB": str(directory / f"http-{time.monotonic_ns()}.sqlite3"), "TELEGRAM_BOT_TOKEN": token,
                    "TELEGRAM_API_BASE_URL": base, "SHOPBOT_OWNER_IDS": ",".join(map(str, owners)),
                    "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_LOG_LEVEL": "ERROR",
                    "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_CAPACITY": str(items + 10)})
        if not paced:
            env.update({"SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_GLOBAL_PACE_PER_S": "0"})
        cfg = config_module.load(env)
        samples: list[tuple[float, int]] = []
        async with httpx.AsyncClient(base_url=base) as control, App(cfg, poll_timeout=5) as app:
            run = asyncio.create_task(app.run())
            while not (await control.get("/_control/state")).json()["offsets_requested"]:
                await asyncio.sleep(0.01)
            for n in owners:
                await control.post("/_control/message", json={"chat_id": n, "user_id": n, "text": "help"})
            cpu0, server0 = time.process_time(), _cpu_of(server.pid)
            start = time.perf_counter()
            while True:
                state = (await control.get("/_control/state")).json()
                samples.append((time.perf_counter() - start, state["sent_count"]))
                if state["sent_count"] >= items:
                    break
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - start
            bot_cpu, server_cpu = time.process_time() - cpu0, _cpu_of(server.pid) - server0
            app.stop()
            await run
        result = {"rate": items / elapsed, "bot_cpu": bot_cpu / elapsed, "server_cpu": server_cpu / elapsed,
                  "refused": state.get("flood_refused", 0), "calls": state["calls"].get("sendMessage", 0)}
        # the steady rate once the global burst is spent: from the first sample at 60 sent (past the first second:
        # 30 at once, 30 more as the bucket refills) to the end
        after = next(((t, n) for t, n in samples if n >= 60), None)
        if paced and after is not None and elapsed > after[0]:
            result["steady"] = (items - after[1]) / (elapsed - after[0])
        return result
    finally:
        server.kill()
        server.wait()


def _cpu_of(pid: int) -> float:
    return _cpu_seconds(Path(f"/proc/{pid}/stat"))


def _cpu_seconds(stat: Path) -> float:
    """User and system CPU seconds from a /proc `stat` file (a process's or a thread's)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--saturate", type=int, default=300, help="chats in the saturation run (default 300)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="also one saturation run against a fake taking 30 "
                        "at once (no jitter tolerance)")
    parser.add_argument("--postgres", nargs="?", const="default", default=None, metavar="URL",
                        help="also the in-process pipeline on a scratch PostgreSQL database (default: "
                        "$SHOPBOT_TEST_PG_DSN or the local server)")
    parser.add_argument("--anatomy", nargs="*", type=int, default=None, metavar="SLOTS",
                        help="also one in-process run per worker concurrency named (default: the product's), with "
                        "each thread's CPU per item and when the reports were finished and sent")
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    with tempfile.TemporaryDirectory(prefix="shopbot-bench-") as tmp:
        directory = Path(tmp)
        floors, rates, commit_counts, http, saturated = [], [], [], [], []
        calls: list[float] = []
        hueys: list[float] = []
        pg: list[tuple[float, float]] = []
        for repeat in range(args.repeats):
            floors.append(disk_floor(directory))
            anchor = huey_cycle(directory, args.items)        # interleaved with the pipeline, same disk, same minute
            rate, per_item = asyncio.run(in_process(directory, args.items, calls))
            rates.append(rate)
            commit_counts.append(per_item)
            if args.postgres:
                pg.append(asyncio.run(on_postgres(None if args.postgres == "default" else args.postgres, args.items)))
                print(f"run {repeat + 1}: postgres in-process {pg[-1][0]:,.0f} reports/s, {pg[-1][1]:.2f} commits/item"
                      f" = {pg[-1][0] / rate:.2f}x sqlite's run just before")
            if anchor is None:
                print("huey is not installed (pip install -e '.[bench]'): no SqliteHuey anchor in this run")
            else:
                hueys.append(anchor)
                print(f"run {repeat + 1}: huey SqliteHuey cycle (WAL, fsync=True) {anchor:,.0f} tasks/s; the "
                      f"pipeline in-process {rate:,.0f} reports/s = {rate / anchor:.2f}x huey (target >= 0.5x)")
            http.append(asyncio.run(over_http(directory, min(args.items, 1000), paced=False)))
            if args.saturate > 0:     # --saturate 0: no saturation run
                saturated.append(asyncio.run(over_http(directory, args.saturate, paced=True)))
            h, p = http[-1], (saturated[-1] if saturated else {"rate": float("nan"), "refused": 0, "calls": 0})
            print(f"run {repeat + 1}: floor {floors[-1]:,.0f} commits/s | pacing off: in-process {rate:,.0f} "
                  f"reports/s, {per_item:.2f} commits/item ({calls[-1]:.2f} write calls); PTB over HTTP "
                  f"{h['rate']:,.0f} reports/s, CPU bot "
                  f"{h['bot_cpu']:.0%} server {h['server_cpu']:.0%} of one core | default pacing, {args.saturate} "
                  f"chats: {p['rate']:.1f} reports/s overall, {p.get('steady', float('nan')):.2f}/s after the burst, "
                  f"{p['refused']} refused 429 by the fake's flood limit ({p['calls']} sendMessage calls)")
    m = statistics.median
    if rates:           # --repeats 0: only the anatomy runs
        print(f"median of {args.repeats}: disk floor {m(floors):,.0f} single-row commits/s; pacing off: in-process "
              f"{m(rates):,.0f} reports/s (target >= 500) with {m(commit_counts):.2f} commits per item "
              f"({m(calls):.2f} write calls) "
              f"(= {m(rates) * m(commit_counts) / m(floors):.0%} of the floor's commit rate); PTB over HTTP "
              f"{m([h['rate'] for h in http]):,.0f} reports/s, CPU: bot {m([h['bot_cpu'] for h in http]):.0%}, local "
              f"Bot API server {m([h['server_cpu'] for h in http]):.0%}")
    if pg:
        print(f"median of {args.repeats}: postgres in-process {m([r for r, _ in pg]):,.0f} reports/s, "
              f"{m([c for _, c in pg]):.2f} commits per item; postgres / sqlite "
              f"{m([r / s for (r, _), s in zip(pg, rates, strict=True)]):.2f}x (median of the runs' ratios)")
    if hueys:
        ratios = [r / h for r, h in zip(rates, hueys, strict=True)]
        print(f"median of {args.repeats}: huey SqliteHuey cycle {m(hueys):,.0f} tasks/s; pipeline / huey "
              f"{m(ratios):.2f}x (median of the runs' ratios; target >= 0.5x)")
    if saturated:
        print(f"median of {args.repeats}: Telegram's limit saturated (default pacing, {args.saturate} chats, the "
              f"fake refusing above 30/s with {FLOOD_BURST:g} at once): {m([p['rate'] for p in saturated]):.1f} "
              f"reports/s overall, {m([p.get('steady', float('nan')) for p in saturated]):.2f} reports/s after the "
              f"burst (global rate 30), 429s: {sum(p['refused'] for p in saturated)} in all runs")
    if args.anatomy is not None:
        with tempfile.TemporaryDirectory(prefix="shopbot-bench-") as tmp:
            for slots in args.anatomy or [WorkerSettings().concurrency]:
                anatomy = Anatomy(slots)
                cpu0 = time.process_time()
                rate, per_item = asyncio.run(in_process(Path(tmp), args.items, anatomy=anatomy))
                print(f"anatomy, {slots} worker slots: in-process {rate:,.0f} reports/s, {per_item:.2f} commits per "
                      f"item, process CPU {(time.process_time() - cpu0) / args.items * 1000:.2f} ms per item")
                for line in anatomy.lines(args.items):
                    print(line)
    if args.strict and args.saturate > 0:
        with tempfile.TemporaryDirectory(prefix="shopbot-bench-") as tmp:
            p = asyncio.run(over_http(Path(tmp), args.saturate, paced=True, flood_burst=30.0))
        print(f"strict fake (30 at once, no jitter tolerance): {p['rate']:.1f} reports/s overall, "
              f"{p.get('steady', float('nan')):.2f}/s after the burst, {p['refused']} refused 429 (each waited out)")


if __name__ == "__main__":
    main()
