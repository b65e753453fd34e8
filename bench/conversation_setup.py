"""A turn's set-up in a long conversation (issue 31): every turn reads the session's last `history_limit` rows (200:
100 exchanges once the owner has talked that long) and the worker turns them into what the model sees
(worker/history.py: each stored exchange decoded, its tokens counted, the oldest cut to SHOPBOT_HISTORY_TOKENS). This
prints, per turn, the store's read of those rows and the worker's part:
- first turn: nothing decoded yet (a new process), every exchange decoded and counted: what every turn paid before
  the exchanges were kept decoded;
- later turns: the exchanges kept (worker/history.py `DECODED_KEPT`), only the new ones decoded.

The conversation is made by the product itself: `--exchanges` owner messages of one chat, each admitted, claimed,
answered by the offline model (a stock question, so each exchange holds a tool call and its result) and finished,
on a real SQLite file (WAL, synchronous=FULL).

    python -m bench.conversation_setup [--exchanges 100] [--turns 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bot.relays.telegram import Relay, RelaySettings
from bot.shop_file import load_shop
from store import Occurrence, SqliteStore, SystemClock
from worker import history as conversation
from worker.models.offline import OfflineModel
from worker.worker import Worker, WorkerSettings

from .common import print_machine
from .throughput import CALM_SHOP, InstantTransport

SESSION = "tg:1001"


async def converse(store: SqliteStore, exchanges: int) -> None:
    """`exchanges` turns of one chat through the worker and the relay, one message at a time."""
    transport = InstantTransport()
    worker = Worker(store, OfflineModel())
    relay = Relay(store, transport, lambda chat: True, RelaySettings(chat_pace_s=0.0, global_per_s=0))
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(relay.run())]
    for n in range(exchanges):
        await store.admit_many([Occurrence(f"{SESSION}:{n}", SESSION, f"how much vanilla do we have? ({n})",
                                           destination=SESSION)])
        deadline = time.monotonic() + 30
        while transport.sent < n + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"turn {n} was not answered within 30 s")
            await asyncio.sleep(0.001)
    worker.stop()
    relay.stop()
    await asyncio.gather(*tasks)


async def measure(directory: Path, exchanges: int, turns: int) -> dict[str, float]:
    store = await SqliteStore.open(directory / f"conversation-{time.monotonic_ns()}.sqlite3", SystemClock(),
                                   debounce_ms=0)
    try:
        await store.seed_shop(load_shop(CALM_SHOP).items, str(CALM_SHOP))
        await converse(store, exchanges)
        settings = WorkerSettings()
        reads: list[float] = []
        later: list[float] = []
        first: list[float] = []
        seen = 0
        for turn in range(turns):
            started = time.perf_counter()
            rows = await store.exchanges(SESSION, settings.history_limit)
            reads.append(time.perf_counter() - started)
            if turn % 10 == 0:
                conversation._decoded.cache_clear()     # a new process: nothing decoded yet
            started = time.perf_counter()
            fitted = conversation.fit(conversation.exchanges(rows), settings.history_tokens)
            (first if turn % 10 == 0 else later).append(time.perf_counter() - started)
            seen = len(fitted)
        return {"rows": len(rows), "messages": seen, "read": statistics.median(reads) * 1e6,
                "first": statistics.median(first) * 1e6, "later": statistics.median(later) * 1e6}
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=100, help="turns of the conversation (default 100)")
    parser.add_argument("--turns", type=int, default=200, help="set-ups timed per repeat (default 200)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shopbot-conversation-") as scratch:
        print_machine(Path(scratch))
        results = []
        for run in range(1, args.repeats + 1):
            r = asyncio.run(measure(Path(scratch), args.exchanges, max(args.turns, 10)))
            results.append(r)
            print(f"run {run}: {r['rows']:.0f} history rows read in {r['read']:.0f} us; the worker's part "
                  f"({r['messages']:.0f} messages kept within the token budget): first turn {r['first']:.0f} us, "
                  f"later turns {r['later']:.0f} us")
        med = {k: statistics.median(r[k] for r in results) for k in ("read", "first", "later")}
        print(f"median of {args.repeats}: the store's read {med['read']:.0f} us per turn; the worker's part "
              f"{med['first']:.0f} us with every exchange decoded (a first turn, and every turn before they were "
              f"kept), {med['later']:.0f} us with them kept ({med['first'] / max(med['later'], 1e-9):.1f}x)")


if __name__ == "__main__":
    main()
