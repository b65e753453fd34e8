"""Burst admission through the real ingress (issue 8, item 3, second half): 10,000 owner messages waiting at the
local Bot API server (its own process), fetched by `getUpdates` in batches of 100 through python-telegram-bot over
HTTP, parsed update by update, authenticated and admitted, one commit per batch. Target >= 5,000 updates/s.

    python -m bench.burst_ingress [--updates 10000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bot.relays.sender import TelegramSender
from producers.telegram.client import make_bot
from producers.telegram.polling import Ingress
from store import SqliteStore, SystemClock

from .common import machine


async def one_run(directory: Path, updates: int) -> float:
    token = "6161:burst-bench"
    server = subprocess.Popen([sys.executable, "-m", "bot.sandbox.bot_api", "--token", token, "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        base = server.stdout.readline().strip().rsplit(" ", 1)[1]
        owners = [9000 + i for i in range(100)]
        async with httpx.AsyncClient(base_url=base) as control:
            for n in range(updates):
                chat = owners[n % len(owners)]
                await control.post("/_control/message", json={"chat_id": chat, "user_id": chat, "text": f"count {n}"})
        store = await SqliteStore.open(directory / f"burst-{time.monotonic_ns()}.sqlite3", SystemClock(),
                                 capacity=updates + 10, debounce_ms=0)
        bot = make_bot(token, base)
        await bot.initialize()
        try:
            ingress = Ingress(store, bot, TelegramSender(bot), lambda: frozenset(owners))
            start = time.perf_counter()
            await ingress.poll(drain=True)
            elapsed = time.perf_counter() - start
            admitted = (await store.status()).work.pending
            assert admitted == updates, f"admitted {admitted} of {updates}"
        finally:
            await bot.shutdown()
            await store.close()
        return updates / elapsed
    finally:
        server.kill()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    rates = []
    with tempfile.TemporaryDirectory(prefix="shopbot-burst-") as tmp:
        for repeat in range(args.repeats):
            rates.append(asyncio.run(one_run(Path(tmp), args.updates)))
            print(f"run {repeat + 1}: {args.updates} updates in batches of 100: {rates[-1]:,.0f} updates/s")
    print(f"median of {args.repeats}: {statistics.median(rates):,.0f} updates/s through the real ingress "
          "(target >= 5,000)")


if __name__ == "__main__":
    main()
