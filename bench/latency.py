"""Reply latency (issue 8, item 1): from an owner message becoming visible at the local Bot API server to the
report's sendMessage arriving there, through the real product (PTB over HTTP, SQLite with synchronous=FULL, the
offline model answering without tools: zero model latency), debounce 0, one message at a time, rotating over 100
allow-listed chats so that per-chat pacing (left on, 1 s) never delays a reply.

    python -m bench.latency [--messages 1000] [--chats 100] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from bot.sandbox.local_setup import local_product

from .common import machine

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def one_run(messages: int, chats: int) -> list[float]:
    owners = [5000 + i for i in range(chats)]
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(map(str, owners)), "SHOPBOT_DEBOUNCE_MS": "0",
                 "SHOPBOT_CHAT_PACE_MS": "1000", "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_LOG_LEVEL": "WARNING",
                 "SHOPBOT_OWNER_CHAT_ID": str(owners[0])}
    latencies: list[float] = []
    async with local_product(overrides) as run:
        api = run.api
        await api.wait_for(lambda: api.offsets_requested != [], timeout=10)
        for n in range(messages + 20):                      # the first 20 warm up and are not counted
            chat = owners[n % chats]
            before = len(api.sent)
            start = time.perf_counter()
            api.post_message(chat, chat, "help")
            await api.wait_for(lambda b=before: len(api.sent) > b, timeout=10)
            if n >= 20:
                latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    p50s, p99s = [], []
    for repeat in range(args.repeats):
        values = asyncio.run(one_run(args.messages, args.chats))
        p50, p99 = percentile(values, 50), percentile(values, 99)
        p50s.append(p50)
        p99s.append(p99)
        print(f"run {repeat + 1}: {len(values)} messages over {args.chats} chats: p50 {p50:.2f} ms  p99 {p99:.2f} ms  "
              f"max {max(values):.2f} ms")
    print(f"median of {args.repeats} runs: p50 {statistics.median(p50s):.2f} ms (target <= 10)  "
          f"p99 {statistics.median(p99s):.2f} ms (target <= 50)")


if __name__ == "__main__":
    main()
