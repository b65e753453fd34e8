"""Reply latency (issue 8, item 1; issue 16): from an owner message becoming visible at the local Bot API server to
the report's sendMessage arriving there, through the real product (PTB over HTTP, SQLite with synchronous=FULL,
the offline model answering without tools: zero model latency), debounce 0, at default pacing (per chat a burst of
3 then one a second, over all chats a burst of 30 then 30 a second).

The offered load stays within Telegram's limits, so pacing never has a reason to hold a reply: one message at a
time, at most `--rate` a second (default 20, under the global 30), rotating over `--chats` chats (default 100, so
each chat gets one message every 5 s, under its pace). Every `sendChatAction` (the typing indicator) is answered
`--typing-delay-ms` late by the server (default 150 ms) to show that the reply does not wait for it.

The receipt (C19: the 👀 reaction set on each owner message once it is stored) is timed the same way, from the
message becoming visible to its setMessageReaction arriving; its p50 is at most the reply's (it is committed with
the admission, before the turn can be claimed).

Printed per run: p50/p99/max latency, the receipt's p50/p99, the limits as the server saw them (most replies in any
one second, the shortest gap between two replies to one chat), typing calls, how long after its sendMessage arrived
each reply's `confirmed` was committed (before the next message is posted, so no later work can carry it), and store
commits per owner message.

    python -m bench.latency [--messages 1000] [--chats 100] [--rate 20] [--typing-delay-ms 150] [--repeats 3]
                            [--no-typing]
"""
from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import time
from pathlib import Path

from bot.sandbox.local_setup import local_product

from .common import machine

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"
WARM_UP = 20


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def most_in_one_second(times: list[float]) -> int:
    """The most replies whose arrival falls within any window of one second."""
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


async def one_run(messages: int, chats: int, rate: float, typing_delay: float, typing: bool = True) -> dict:
    owners = [5000 + i for i in range(chats)]
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(map(str, owners)), "SHOPBOT_DEBOUNCE_MS": "0",
                 "SHOPBOT_CHAT_PACE_MS": "1000", "SHOPBOT_CHAT_BURST": "3", "SHOPBOT_GLOBAL_PACE_PER_S": "30",
                 "SHOPBOT_GLOBAL_BURST": "30", "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_LOG_LEVEL": "WARNING",
                 "SHOPBOT_OWNER_CHAT_ID": str(owners[0])}
    latencies: list[float] = []
    receipts: list[float] = []
    arrivals: list[tuple[float, int]] = []
    confirm_lags: list[float] = []
    async with local_product(overrides) as run:
        api, store = run.api, run.app.parts.store
        await api.wait_for(lambda: api.offsets_requested != [], timeout=10)    # start-up (and its chat action) done
        api.inject("sendChatAction", "slow", delay=typing_delay, count=10 * (messages + WARM_UP))
        if not typing:                                   # --no-typing: the comparison without any typing call
            run.app.parts.worker.on_turn = None
        commits = 0
        write_ms: list[float] = []
        write = store.db.write

        async def counting(fn, *args):  # type: ignore[no-untyped-def]
            nonlocal commits
            commits += 1
            began = time.perf_counter()
            try:
                return await write(fn, *args)
            finally:
                write_ms.append((time.perf_counter() - began) * 1000)
        store.db.write = counting  # type: ignore[method-assign] - counting commits is the measurement
        reader = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
        gap = 1.0 / rate
        next_at = time.perf_counter()
        commits_at_start = chat_actions_at_start = 0
        for n in range(messages + WARM_UP):                  # the first WARM_UP are not counted
            if n == WARM_UP:
                commits_at_start, chat_actions_at_start = commits, api.calls.get("sendChatAction", 0)
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            chat = owners[n % chats]
            before = len(api.sent)
            start = next_at = time.perf_counter()
            next_at += gap
            message_id = api.post_message(chat, chat, "help")["message"]["message_id"]
            await api.wait_for(lambda b=before: len(api.sent) > b, timeout=10)
            arrived = time.perf_counter()
            await api.wait_for(lambda c=chat, m=message_id: api.reaction(c, m) is not None, timeout=10)
            reacted = next(r["at"] for r in reversed(api.reaction_calls)
                           if (r["chat_id"], r["message_id"]) == (chat, message_id))
            # outside the measured path: the reply's `confirmed` is committed with no later work to carry it
            while reader.execute("SELECT count(*) FROM deliveries WHERE state = 'confirmed'").fetchone()[0] <= n:
                if time.perf_counter() - arrived > 5:
                    raise RuntimeError(f"reply {n} was not confirmed within 5 s of its sendMessage")
                await asyncio.sleep(0.001)
            if n >= WARM_UP:
                latencies.append((arrived - start) * 1000)
                receipts.append((reacted - start) * 1000)
                arrivals.append((arrived, chat))
                confirm_lags.append((time.perf_counter() - arrived) * 1000)
        commits_counted = commits - commits_at_start
        typing_calls = api.calls.get("sendChatAction", 0) - chat_actions_at_start
        reader.close()
    per_chat: dict[int, list[float]] = {}
    for t, chat in arrivals:
        per_chat.setdefault(chat, []).append(t)
    shortest = min((b - a for ts in per_chat.values() for a, b in zip(ts, ts[1:], strict=False)), default=float("inf"))
    return {"latencies": latencies, "receipts": receipts, "most_per_s": most_in_one_second([t for t, _ in arrivals]),
            "shortest_chat_gap_s": shortest, "typing_calls": typing_calls, "confirm_lags": confirm_lags,
            "commits_per_message": commits_counted / messages, "messages": messages,
            "write_p50_ms": percentile(write_ms, 50)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="owner messages per second at most (default 20)")
    parser.add_argument("--typing-delay-ms", type=float, default=150.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-typing", action="store_true", help="send no typing indicator (for comparison)")
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    p50s, p99s, commit_counts, receipt_p50s, receipt_p99s = [], [], [], [], []
    for repeat in range(args.repeats):
        r = asyncio.run(one_run(args.messages, args.chats, args.rate, args.typing_delay_ms / 1000,
                                not args.no_typing))
        values = r["latencies"]
        p50, p99 = percentile(values, 50), percentile(values, 99)
        p50s.append(p50)
        p99s.append(p99)
        receipt_p50s.append(percentile(r["receipts"], 50))
        receipt_p99s.append(percentile(r["receipts"], 99))
        commit_counts.append(r["commits_per_message"])
        print(f"run {repeat + 1}: {len(values)} messages over {args.chats} chats at <= {args.rate:g}/s, typing "
              f"answered {args.typing_delay_ms:g} ms late: p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {max(values):.2f} ms"
              f" | receipt p50 {receipt_p50s[-1]:.2f} ms  p99 {receipt_p99s[-1]:.2f} ms"
              f" | limits seen by the server: at most {r['most_per_s']} replies in any second, shortest gap between "
              f"two replies to one chat {r['shortest_chat_gap_s']:.2f} s | {r['typing_calls']} sendChatAction calls"
              f" | each reply confirmed by itself, {percentile(r['confirm_lags'], 50):.1f} ms (p50) after its "
              f"sendMessage arrived | "
              f"{r['commits_per_message']:.2f} commits per owner message, each {r['write_p50_ms']:.2f} ms (p50, "
              f"queue and fsync included)")
    print(f"median of {args.repeats} runs: p50 {statistics.median(p50s):.2f} ms (target <= 10)  "
          f"p99 {statistics.median(p99s):.2f} ms (target <= 50)  {statistics.median(commit_counts):.2f} commits per "
          f"owner message | receipt p50 {statistics.median(receipt_p50s):.2f} ms  p99 "
          f"{statistics.median(receipt_p99s):.2f} ms (its p50 at most the reply's: "
          f"{'yes' if statistics.median(receipt_p50s) <= statistics.median(p50s) else 'NO'})")


if __name__ == "__main__":
    main()
