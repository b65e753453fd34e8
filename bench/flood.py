"""Unauthenticated flood (issue 21, item 5): the owner's reply latency with and without a flood of till requests
with a bad token (500 a second by default, from a separate client process), through the real product (PTB over
HTTP against the local Bot API, SQLite with synchronous=FULL, the offline model, debounce 0, rotating over 100
chats so per-chat pacing never delays a reply). Also counts the store's durable commits during each phase: a
refused request must cost none (C1: refusals are counted in memory, flushed at most once a second).

    python -m bench.flood [--messages 300] [--rate 500] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time

import httpx

from bot.sandbox.local_setup import local_product

from .common import machine
from .latency import CALM_SHOP, percentile

TILL_TOKEN = "flood-bench-till-token-0001"


async def client(url: str, rate: float) -> None:
    """Send `rate` POST /till/counts a second with a bad token until SIGTERM; print how many and their statuses."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    statuses: dict[int, int] = {}
    sent = 0
    start = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=5, limits=httpx.Limits(max_connections=50)) as http:
        async def one(n: int) -> None:
            try:
                r = await http.post("/till/counts", json={"request_id": f"f{n}", "counts": {"vanilla": 1}},
                                    headers={"Authorization": "Bearer wrong-token-wrong-token"})
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            except httpx.HTTPError as exc:
                statuses[-1] = statuses.get(-1, 0) + 1
                del exc
        tasks: set[asyncio.Task] = set()
        while not stop.is_set():
            due = start + sent / rate
            delay = due - time.monotonic()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
                continue
            if len(tasks) >= 100:                   # the server is behind: never more than 100 in flight
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            task = asyncio.create_task(one(sent))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.monotonic() - start
    answered = sum(n for status, n in statuses.items() if status == 401)
    print(f"{answered} refused (401) in {elapsed:.1f} s: {answered / elapsed:.0f}/s; statuses {statuses}", flush=True)


async def phase(messages: int, chats: int, rate: float) -> tuple[list[float], int | None, str]:
    owners = [5000 + i for i in range(chats)]
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(map(str, owners)), "SHOPBOT_DEBOUNCE_MS": "0",
                 "SHOPBOT_CHAT_PACE_MS": "1000", "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_LOG_LEVEL": "ERROR",
                 "SHOPBOT_OWNER_CHAT_ID": str(owners[0]), "SHOPBOT_TILL_TOKENS": f"t1:{TILL_TOKEN}",
                 "SHOPBOT_HTTP_PORT": "0"}
    latencies: list[float] = []
    async with local_product(overrides) as run:
        api, http = run.api, run.app.parts.http
        await api.wait_for(lambda: api.offsets_requested != [], timeout=10)
        await asyncio.wait_for(http.started.wait(), 10)
        flood = None
        if rate > 0:
            flood = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.flood", "--client", f"http://127.0.0.1:{http.port}", "--rate", str(rate),
                stdout=asyncio.subprocess.PIPE, env={**os.environ})
            await asyncio.sleep(2.0)                      # the flood runs at full rate before measuring
        store = run.app.parts.store
        commits = getattr(store.db, "commits", None)   # None: a version without the commit counter
        try:
            for n in range(messages + 20):                # the first 20 warm up and are not counted
                chat = owners[n % chats]
                before = len(api.sent)
                start = time.perf_counter()
                api.post_message(chat, chat, "help")
                await api.wait_for(lambda b=before: len(api.sent) > b, timeout=10)
                if n >= 20:
                    latencies.append((time.perf_counter() - start) * 1000)
        finally:
            report = ""
            if flood is not None:
                flood.send_signal(signal.SIGTERM)
                report = (await asyncio.wait_for(flood.communicate(), 30))[0].decode().strip()
        owner_commits = store.db.commits - commits if commits is not None else None
    return latencies, owner_commits, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(client(args.client, args.rate))
        return
    for key, value in machine().items():
        print(f"{key}: {value}")
    summary: dict[str, list[float]] = {"quiet": [], "flood": []}
    for repeat in range(args.repeats):
        for name, rate in (("quiet", 0.0), ("flood", args.rate)):
            values, commits, report = asyncio.run(phase(args.messages, args.chats, rate))
            p50, p99 = percentile(values, 50), percentile(values, 99)
            summary[name].append(p50)
            print(f"run {repeat + 1} {name:5}: {len(values)} owner messages: p50 {p50:.2f} ms  p99 {p99:.2f} ms  "
                  + (f"durable commits while measuring {commits} ({commits / (args.messages + 20):.2f} per owner "
                     "message)" if commits is not None else "commits not counted by this version")
                  + (f"; flood client: {report}" if report else ""))
    quiet, flood = statistics.median(summary["quiet"]), statistics.median(summary["flood"])
    print(f"median p50 of {args.repeats} runs: quiet {quiet:.2f} ms, flood of {args.rate:.0f}/s refused {flood:.2f} ms")


if __name__ == "__main__":
    main()
