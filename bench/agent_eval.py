"""Agent evaluation: owner questions through the whole product against a scripted OpenAI-compatible server (C13).

    .venv/bin/python -m bench.agent_eval [--seed 7] [--invent-rate 0.4] [--verbose]

The product runs as `shopbot demo` runs it (bot/sandbox/local_setup.py): the local Bot API over HTTP, the app with
its poller, worker and relays, a real SQLite file, here with `SHOPBOT_MODEL=openai:eval` pointed at
bench/eval_model_server.py (real `openai` SDK, real HTTP, no key). Before the app starts, the database gets two
weeks of till counts (so sales rates and days of cover have a basis), an approved order (on order) and a proposal
awaiting approval. Then every question is sent as the owner's Telegram message and the reply the owner got is read
back from the Bot API.

The server logs, for every reply, the exact spans it wrote: numbers it copied from tool results (in a seeded
rendering) and numbers it made up. Per question and in total this prints: tool-backed numbers kept, invented numbers
blanked ("—"), replies with a false "—" (a dash where no invented number was, or a cited number changed), and the
reply length the owner sees. Target: 100 % kept, 100 % blanked, 0 false dashes.
"""
from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.eval_model_server import EvalModel, EvalServer, Span, Turn
from bot.sandbox.local_setup import OWNER_ID, QUIET_SCHEDULES, local_product
from bot.shop_file import load_shop
from store import ManualClock, Occurrence, SqliteStore
from worker.models.base import ModelTurn, ToolCall
from worker.models.scripted import ScriptedModel
from worker.worker import Worker, WorkerSettings

DASH = "—"

SHOP_FILE = """
name = "Lucy's Ice Cream"
timezone = "Europe/London"
currency = "USD"
locale = "en_US"
count_tolerance = 1000000

[hours]
"Mon-Fri" = "11:00-19:00"
"Sat-Sun" = "10:00-20:00"

[supplier]
name = "Dairy Direct"

[limits]
order_max_cents = 20000
day_max_cents = 50000

[items.vanilla]
unit = "tubs"
on_hand = 20
reorder_point = 8
target = 12
unit_cost_cents = 300
max_order = 20

[items.chocolate]
unit = "tubs"
on_hand = 14
reorder_point = 6
target = 12
unit_cost_cents = 250
max_order = 20

[items.strawberry]
unit = "tubs"
on_hand = 9
reorder_point = 5
target = 8
unit_cost_cents = 200
max_order = 20

[items.cones]
unit = "cones"
on_hand = 3000
reorder_point = 1500
target = 2400
unit_cost_cents = 12
max_order = 5000
""" + QUIET_SCHEDULES   # no brief nor weekly review at start, whatever the hour: the questions' replies are counted

# days before now -> the till's counts
COUNTS = [(10, {"vanilla": 16, "chocolate": 12, "strawberry": 9, "cones": 2600}),
          (7, {"vanilla": 11, "chocolate": 20, "strawberry": 9, "cones": 2200}),
          (4, {"vanilla": 7, "chocolate": 17, "strawberry": 7, "cones": 1950}),
          (1, {"vanilla": 2, "chocolate": 15, "strawberry": 4, "cones": 1800})]

# (category, question, messages the owner gets: one, the reply; a turn that proposes an order answers in its card)
QUESTIONS: list[tuple[str, str, int]] = [
    ("stock", "How much vanilla do we have?", 1),
    ("stock", "stock", 1),
    ("stock", "How many cones are left?", 1),
    ("stock", "Is there any strawberry left?", 1),
    ("stock", "What do we have of chocolate?", 1),
    ("low", "What is running low?", 1),
    ("low", "Which items are below their reorder point?", 1),
    ("low", "Anything I need to reorder?", 1),
    ("cover", "Is there enough vanilla for the weekend?", 1),
    ("cover", "How long will chocolate last?", 1),
    ("cover", "Will the cones last until Monday?", 1),
    ("cover", "Is there enough strawberry for the weekend?", 1),
    ("sales", "How fast does vanilla sell?", 1),
    ("sales", "How much chocolate did we sell in the last week?", 1),
    ("sales", "What are the sales of cones?", 1),
    ("costs", "What does a tub of vanilla cost?", 1),
    ("costs", "What's the price of cones?", 1),
    ("costs", "How much does chocolate cost?", 1),
    ("briefs", "Prepare the opening brief", 1),
    ("briefs", "Give me a brief for today", 1),
    ("orders", "What is on order?", 1),
    ("orders", "Which proposals are waiting for me?", 1),
    ("orders", "Has vanilla been ordered?", 1),
    ("orders", "Order more strawberry", 1),
    ("counts", "When was the last till count?", 1),
    ("counts", "What did the till count for chocolate?", 1),
    ("greetings", "Hello!", 1),
    ("greetings", "Thanks, that's all", 1),
    ("greetings", "What's the date today?", 1),
    ("language", "Wie viel Vanille haben wir?", 1),
    ("language", "Combien de chocolat reste-t-il ?", 1),
    ("language", "¿Cuánta fresa queda?", 1),
    ("typos", "how mch vanila is lft", 1),
    ("typos", "chocolat stok?", 1),
    ("typos", "is ther enuf strawbery for the wekend", 1),
]


async def seed(db: Path, shop_path: Path, now: datetime) -> None:
    """Two weeks of till counts, then the stock watcher's episodes answered, an approved order and an open proposal."""
    clock = ManualClock(now - timedelta(days=13))
    store = await SqliteStore.open(db, clock, debounce_ms=0)
    try:
        shop = load_shop(shop_path)
        await store.seed_shop(shop.items, str(shop_path))
        for days, counts in COUNTS:
            clock.set(now - timedelta(days=days))
            payload = json.dumps({"counts": counts, "request_id": f"d{days}"}, sort_keys=True, separators=(",", ":"))
            await store.admit(Occurrence(f"till:1:d{days}", "till:1", payload, destination="till:1"))
            await Worker(store, ScriptedModel([])).drain()
        clock.set(now - timedelta(hours=2))
        from producers.stock_watch import StockWatcher
        await StockWatcher(store, f"tg:{OWNER_ID}").check()
        settings = WorkerSettings(supplier=shop.supplier, shop_timezone=shop.timezone)
        await Worker(store, ScriptedModel([ModelTurn("Noted.", ())] * 4), settings).drain()
        await store.admit(Occurrence(f"tg:{OWNER_ID}:1", f"tg:{OWNER_ID}", "order vanilla and chocolate",
                                     destination=f"tg:{OWNER_ID}"))
        calls = (ToolCall("p1", "propose_order", '{"item": "vanilla", "quantity": 10}'),
                 ToolCall("p2", "propose_order", '{"item": "chocolate", "quantity": 3}'))
        await Worker(store, ScriptedModel([ModelTurn("", calls), ModelTurn("Proposed.", ())]), settings).drain()
        vanilla = next(p for p in await store.open_proposals() if p.item == "vanilla")
        day = now.astimezone(__import__("zoneinfo").ZoneInfo(shop.timezone)).date().isoformat()
        await store.atomic(lambda tx: tx.approve_proposal(vanilla.proposal_id, "owner", day=day,
                                                          day_max_cents=shop.day_max_cents,
                                                          destination=f"supplier:{shop.supplier}"))
    finally:
        await store.close()


def _quiet(db: Path) -> bool:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        busy = conn.execute("SELECT (SELECT count(*) FROM deliveries WHERE state IN ('pending', 'sending')) + "
                            "(SELECT count(*) FROM actions WHERE state IN ('pending', 'sending')) + "
                            "(SELECT count(*) FROM work WHERE state IN ('pending', 'running'))").fetchone()[0]
        return busy == 0
    finally:
        conn.close()


async def wait_quiet(db: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not _quiet(db):
        if time.monotonic() > deadline:
            raise TimeoutError("the product did not settle before the questions")
        await asyncio.sleep(0.05)


def owner_text(message_text: str) -> str:
    """The reply as the owner reads it: without its identity line, tags and entities; of a card (a turn that
    proposed orders), the answer under its proposals (those lines are rendered from records, not the model's)."""
    text = re.sub(r"\n\nr\d+\.\d+(?: \(\d+/\d+\))?$", "", message_text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    if text.startswith("Order proposal #") and "\n\n" in text:
        text = text.split("\n\n", 1)[1]
    return text


@dataclass
class Result:
    category: str
    question: str
    cited: int
    kept: int
    invented: int
    blanked: int
    false_dash: bool
    length: int
    figure_lines: int
    reply: str
    aligned: bool
    forms: tuple[tuple[str, bool], ...] = ()      # (rendering form, kept or blanked as it should be) per span


def score(category: str, question: str, turn: Turn | None, reply: str) -> Result:
    prose, _, block = reply.partition("\n\nFigures:\n")
    lines = len(block.splitlines()) if block else 0
    if turn is None:
        return Result(category, question, 0, 0, 0, 0, DASH in prose, len(reply), lines, reply, False)
    spans = [p for p in turn.parts if isinstance(p, Span)]
    parts = list(turn.parts)
    if parts and isinstance(parts[0], str):
        parts[0] = parts[0].lstrip()
    if parts and isinstance(parts[-1], str):
        parts[-1] = parts[-1].rstrip()
    pattern = "".join(re.escape(p) if isinstance(p, str) else "(.*?)" for p in parts)
    match = re.fullmatch(pattern, prose.strip(), re.S)
    cited = [s for s in spans if s.kind == "cited"]
    invented = [s for s in spans if s.kind == "invented"]
    if match is None:
        return Result(category, question, len(cited), 0, len(invented), 0, True, len(reply), lines, reply, False)
    got = match.groups()
    kept = sum(1 for s, g in zip(spans, got) if s.kind == "cited" and g == s.text)
    blanked = sum(1 for s, g in zip(spans, got) if s.kind == "invented" and g == re.sub(r"\d+", DASH, s.text)
                  and not re.search(r"\d", g))
    dashes_in_fixed = prose.count(DASH) - sum(g.count(DASH) for s, g in zip(spans, got) if s.kind == "invented")
    false_dash = dashes_in_fixed > 0 or kept < len(cited)
    forms = tuple((s.form, g == s.text if s.kind == "cited" else not re.search(r"\d", g)) for s, g in zip(spans, got))
    return Result(category, question, len(cited), kept, len(invented), blanked, false_dash, len(reply), lines, reply,
                  True, forms)


def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else f"{part}/{whole} (n/a)"


async def evaluate(seed_value: int, invent_rate: float, verbose: bool) -> list[Result]:
    model = EvalModel(seed=seed_value, invent_rate=invent_rate)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="shopbot-eval-") as tmp, EvalServer(model) as server:
        db, shop_path = Path(tmp) / "eval.sqlite3", Path(tmp) / "shop.toml"
        shop_path.write_text(SHOP_FILE, encoding="utf-8")
        await seed(db, shop_path, datetime.now(UTC))
        overrides = {"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(shop_path), "SHOPBOT_MODEL": "openai:eval",
                     "SHOPBOT_MODEL_BASE_URL": server.base_url, "SHOPBOT_MODEL_API_KEY": "",
                     "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_MODEL_TIMEOUT_S": "10",
                     "SHOPBOT_LOG_LEVEL": "WARNING"}
        async with local_product(overrides) as run:
            await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=20)
            await wait_quiet(db)
            run.seen = len(run.owner_messages())
            for category, question, count in QUESTIONS:
                before = len(model.turns)
                run.api.post_message(OWNER_ID, OWNER_ID, question)
                messages = await run.replies(count, timeout=30)
                turn = model.turns[before] if len(model.turns) > before else None
                reply = owner_text(messages[0].text)
                result = score(category, question, turn, reply)
                results.append(result)
                if verbose:
                    print(f"--- {question}\n{reply}\n")
    return results


def report(results: list[Result]) -> None:
    print(f"{'#':>2} {'category':<9} {'question':<46} {'kept':>7} {'blanked':>7} {'false —':>7} {'chars':>5} "
          f"{'fig':>3}")
    for n, r in enumerate(results, start=1):
        print(f"{n:>2} {r.category:<9} {r.question[:46]:<46} {r.kept:>3}/{r.cited:<3} {r.blanked:>3}/{r.invented:<3} "
              f"{'yes' if r.false_dash else 'no':>7} {r.length:>5} {r.figure_lines:>3}"
              + ("" if r.aligned else "  (reply not aligned with the model's text)"))
    cited = sum(r.cited for r in results)
    kept = sum(r.kept for r in results)
    invented = sum(r.invented for r in results)
    blanked = sum(r.blanked for r in results)
    false = sum(r.false_dash for r in results)
    lengths = sorted(r.length for r in results)
    print()
    print(f"questions              {len(results)}")
    print(f"tool-backed kept       {pct(kept, cited)}")
    print(f"invented blanked       {pct(blanked, invented)}")
    print(f"replies with false —   {pct(false, len(results))}")
    print(f"reply length (chars)   mean {sum(lengths) / len(lengths):.0f}, median {lengths[len(lengths) // 2]}, "
          f"max {lengths[-1]}")
    census: dict[str, list[int]] = {}
    for r in results:
        for form, good in r.forms:
            census.setdefault(form, [0, 0])[0] += good
            census[form][1] += 1
    print("renderings             " + ", ".join(f"{form} {good}/{total}"
                                              for form, (good, total) in sorted(census.items())))
    print(f"figure lines per reply mean {sum(r.figure_lines for r in results) / len(results):.1f}, "
          f"replies without a block {sum(1 for r in results if r.figure_lines == 0)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--invent-rate", type=float, default=0.4)
    parser.add_argument("--verbose", action="store_true", help="print every reply")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results = asyncio.run(evaluate(args.seed, args.invent_rate, args.verbose))
    report(results)
    print(f"wall time              {time.monotonic() - started:.1f} s (seed {args.seed}, invent rate "
          f"{args.invent_rate})")
    ok = all(r.kept == r.cited and r.blanked == r.invented and not r.false_dash for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
