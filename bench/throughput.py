"""Durable throughput (issue 8, item 2): reports per second where every report answers exactly one message (one
message in flight per chat, so coalescing cannot inflate it), through admit -> claim -> finish with report ->
sending -> confirmed, on a real SQLite file with synchronous=FULL, with the offline model answering without tools.

Measured twice: with an in-process transport (a Transport whose send confirms at once: the network seam only), and
through python-telegram-bot over HTTP against the local Bot API server running as its own process (with the CPU
split between the bot and the server). Commits per item are counted; the disk's floor (single-row commits per
second, WAL, synchronous=FULL) is measured in the same run.

    python -m bench.throughput [--items 2000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bot.relays.sender import SendOutcome
from bot.relays.telegram import Relay, RelaySettings
from store import Occurrence, SqliteStore, SystemClock
from worker.models.offline import OfflineModel
from worker.worker import Worker

from .common import machine
from .disk_floor import commits_per_second

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"


class InstantTransport:
    """The network seam only: Telegram accepts every message at once."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, chat_id, text, buttons=None, *, reply_to=None) -> SendOutcome:  # type: ignore[no-untyped-def]
        self.sent += 1
        return SendOutcome("confirmed", receipt=str(self.sent))

    async def edit(self, chat_id, message_id, text, buttons=None) -> SendOutcome:  # type: ignore[no-untyped-def]
        return SendOutcome("confirmed", receipt=str(message_id))


def disk_floor(directory: Path, commits: int = 1000) -> float:
    """Single-row commits per second with WAL and synchronous=FULL (bench/disk_floor.py's measure)."""
    return commits_per_second(directory / f"floor-{time.monotonic_ns()}.sqlite3", commits, "FULL")


async def in_process(directory: Path, items: int) -> tuple[float, float]:
    store = await SqliteStore.open(directory / f"inproc-{time.monotonic_ns()}.sqlite3", SystemClock(),
                                   capacity=items + 10, debounce_ms=0)
    return await pipeline(store, items)


async def pipeline(store, items: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """admit -> claim -> finish -> sending -> confirmed for `items` one-message chats on an open store (closed at the
    end); (reports per second, commits per item)."""
    commits = 0
    write = store.db.write

    async def counting(fn, *args):  # type: ignore[no-untyped-def]
        nonlocal commits
        commits += 1
        return await write(fn, *args)
    store.db.write = counting  # type: ignore[method-assign] - counting commits is the measurement
    transport = InstantTransport()
    worker = Worker(store, OfflineModel())
    relay = Relay(store, transport, lambda chat: True, RelaySettings(chat_pace_s=0.0))
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(relay.run())]
    start = time.perf_counter()
    for batch in range(0, items, 100):                      # getUpdates batches of 100, one commit each
        await store.admit_many([Occurrence(f"tg:{n}:1", f"tg:{n}", "help", destination=f"tg:{n}")
                                for n in range(batch, min(items, batch + 100))])
    while transport.sent < items:
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - start
    worker.stop()
    relay.stop()
    await asyncio.gather(*tasks)
    await store.close()
    return items / elapsed, commits / items


async def over_http(directory: Path, items: int) -> tuple[float, float, float]:
    from bot import config as config_module
    from bot.app import App
    token = "4242:throughput-bench"
    port = 20000 + os.getpid() % 20000
    server = subprocess.Popen([sys.executable, "-m", "bot.sandbox.bot_api", "--token", token, "--port", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        owners = list(range(7000, 7000 + items))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({"SHOPBOT_DB": str(directory / f"http-{time.monotonic_ns()}.sqlite3"), "TELEGRAM_BOT_TOKEN": token,
                    "TELEGRAM_API_BASE_URL": base, "SHOPBOT_OWNER_IDS": ",".join(map(str, owners)),
                    "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "1000", "SHOPBOT_HTTP_PORT": "-1",
                    "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_CAPACITY": str(items + 10)})
        cfg = config_module.load(env)
        async with httpx.AsyncClient(base_url=base) as control, App(cfg, poll_timeout=5) as app:
            run = asyncio.create_task(app.run())
            while not (await control.get("/_control/state")).json()["offsets_requested"]:
                await asyncio.sleep(0.01)
            for n in owners:
                await control.post("/_control/message", json={"chat_id": n, "user_id": n, "text": "help"})
            cpu0, server0 = time.process_time(), _cpu_of(server.pid)
            start = time.perf_counter()
            while (await control.get("/_control/state")).json()["sent_count"] < items:
                await asyncio.sleep(0.02)
            elapsed = time.perf_counter() - start
            bot_cpu, server_cpu = time.process_time() - cpu0, _cpu_of(server.pid) - server0
            app.stop()
            await run
        return items / elapsed, bot_cpu / elapsed, server_cpu / elapsed
    finally:
        server.kill()
        server.wait()


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    with tempfile.TemporaryDirectory(prefix="shopbot-bench-") as tmp:
        directory = Path(tmp)
        floors, rates, commit_counts, http_rates, bot_cpus, server_cpus = [], [], [], [], [], []
        for repeat in range(args.repeats):
            floors.append(disk_floor(directory))
            rate, per_item = asyncio.run(in_process(directory, args.items))
            rates.append(rate)
            commit_counts.append(per_item)
            http_rate, bot_cpu, server_cpu = asyncio.run(over_http(directory, min(args.items, 1000)))
            http_rates.append(http_rate)
            bot_cpus.append(bot_cpu)
            server_cpus.append(server_cpu)
            print(f"run {repeat + 1}: floor {floors[-1]:,.0f} commits/s | in-process {rate:,.0f} reports/s, "
                  f"{per_item:.2f} commits/item | PTB over HTTP {http_rate:,.0f} reports/s, CPU bot {bot_cpu:.0%} "
                  f"server {server_cpu:.0%} of one core")
    m = statistics.median
    print(f"median of {args.repeats}: disk floor {m(floors):,.0f} single-row commits/s; in-process "
          f"{m(rates):,.0f} reports/s (target >= 500) with {m(commit_counts):.2f} commits per item "
          f"(= {m(rates) * m(commit_counts) / m(floors):.0%} of the floor's commit rate); PTB over HTTP "
          f"{m(http_rates):,.0f} reports/s, CPU: bot {m(bot_cpus):.0%}, local Bot API server {m(server_cpus):.0%}")


if __name__ == "__main__":
    main()
