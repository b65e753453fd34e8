"""Model efficiency (issue 8, item 6): model calls per owner message, counted from the journal (the `runs` table),
for double taps (a redelivered update must cost 0 extra calls) and for bursts inside the debounce window (one run
per turn), through the real product against the local Bot API server.

    python -m bench.model_efficiency [--messages 50]
"""
from __future__ import annotations

import argparse
import asyncio
import sqlite3
from pathlib import Path

from bot.sandbox.local_setup import local_product

from .common import machine

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"


def journal(db: Path) -> tuple[int, int, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        runs, calls = conn.execute("SELECT count(*), coalesce(sum(model_calls), 0) FROM runs").fetchone()
        items = conn.execute("SELECT count(*) FROM work WHERE kind = 'agent'").fetchone()[0]
        return runs, calls, items
    finally:
        conn.close()


async def double_taps(messages: int) -> tuple[int, int, int, int]:
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(str(6000 + i) for i in range(messages)), "SHOPBOT_DEBOUNCE_MS": "0",
                 "SHOPBOT_SHOP_FILE": str(CALM_SHOP)}
    async with local_product(overrides) as run:
        for n in range(messages):
            chat = 6000 + n
            before = len(run.api.sent)
            update = run.api.post_message(chat, chat, "how much vanilla")
            run.api.redeliver(update["update_id"])                       # the same update, delivered twice
            await run.api.wait_for(lambda b=before: len(run.api.sent) > b, timeout=10)
            await run.admitted(max(run.api._all_updates))
        return (*journal(run.app.cfg.db), messages * 2)


async def bursts(turns: int, burst: int) -> tuple[int, int, int, int]:
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(str(8000 + i) for i in range(turns)), "SHOPBOT_DEBOUNCE_MS": "300",
                 "SHOPBOT_SHOP_FILE": str(CALM_SHOP)}
    async with local_product(overrides) as run:
        for n in range(turns):
            chat = 8000 + n
            before = len(run.api.sent)
            for text in ["stock vanilla", "stock chocolate", "stock strawberry"][:burst]:
                run.api.post_message(chat, chat, text)                  # typed in a row, inside the window
            await run.api.wait_for(lambda b=before: len(run.api.sent) > b, timeout=10)
        return (*journal(run.app.cfg.db), turns * burst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    runs, calls, items, deliveries = asyncio.run(double_taps(args.messages))
    print(f"double taps: {deliveries} deliveries of {args.messages} messages -> {items} work items, {runs} runs, "
          f"{calls} model calls = {calls / args.messages:.2f} per message ({calls / runs:.2f} per run); "
          f"extra calls for the repeats: {calls - runs * (calls // runs)}")
    runs, calls, items, sent = asyncio.run(bursts(args.messages, 3))
    print(f"bursts of 3 inside the 300 ms window: {sent} messages -> {items} work items, {runs} runs "
          f"({runs / args.messages:.2f} per burst), {calls} model calls = {calls / sent:.2f} per message")


if __name__ == "__main__":
    main()
