"""Reply latency (issue 8, item 1; issue 16; issue 31): from an owner message becoming visible at the local Bot API
server to the report's sendMessage arriving there, through the real product (PTB over HTTP, SQLite with
synchronous=FULL, the offline model answering without tools: zero model latency), debounce 0, at default pacing (per
chat a burst of 3 then one a second, over all chats a burst of 30 then 30 a second).

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
commits per owner message and every database call (reads included) per owner message.

Where the time goes (issue 31): each reply's path is cut into stages by timestamps the benchmark takes around the
product's own calls (methods of this run's ingress, store, worker and relay instances wrapped here, and the
ingress's parser and the relay's renderer; nothing changed in the product): the message posted -> getUpdates
returned -> parsed -> admission committed -> the worker woke (its claim call began) -> claimed (a claim that rode in
the admission's commit, an idle worker's offer, has no call of its own: the worker woke and claimed as the turn
started, so its wake-up is the hand-over from that commit to the turn and its claim stage is 0) -> model started
(prompt built; before issue 31's second step also history and shop read) -> model answered -> finished (its commit)
-> the relay woke (its due-deliveries read, or since issue 31 its `take_due`, began) -> due read (none when it rides
in `take_due`'s transaction) -> `sending` committed -> rendered -> the sendMessage arrived at the server. Each
stage's p50 is printed (the p50s need not add up to the total's).

The anchor (issue 31): the python-telegram-bot default, an `Application` polling with its defaults and one handler
answering from memory, against the same kind of local Bot API server, with the same chats, the same message
schedule and the same typing delay (it sends no typing). Product and anchor alternate run by run (ABBA), and the
ratios of the p50s and p99s are printed (target p50 <= 2x, p99 <= 3x the anchor's).

    python -m bench.latency [--messages 1000] [--chats 100] [--rate 20] [--typing-delay-ms 150] [--repeats 3]
                            [--no-typing] [--no-anchor] [--postgres [URL]]
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import statistics
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.relays import telegram as relay_module
from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.local_setup import DEMO_TOKEN, local_product
from producers.telegram import polling as polling_module

from .common import machine, scratch_pg_database

CALM_SHOP = Path(__file__).resolve().parent.parent / "tests" / "support" / "data" / "shop_calm.toml"
WARM_UP = 20
ANSWER = "Ask me about stock, sales or orders."      # the anchor's reply, from memory

# the stages of one reply, in path order: (name, the event that ends it)
STAGES = (("getUpdates return", "polled"), ("parse", "parsed"), ("admission commit", "admitted"),
          ("wake-up", "woke"), ("claim", "claimed"), ("turn set-up", "model_start"), ("model", "model_end"),
          ("finish", "finished"), ("relay wake-up", "relay_woke"), ("due read", "due_read"),
          ("sending commit", "sending"), ("render", "rendered"), ("send", "arrived"))


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


class Stages:
    """Timestamps of one reply's path, taken around the product's own calls on this run's instances only."""

    def __init__(self) -> None:
        self.events: dict[str, float] = {}

    def mark(self, event: str, at: float | None = None) -> None:
        self.events.setdefault(event, time.perf_counter() if at is None else at)   # the first after the post

    def around(self, obj: Any, name: str, before: str | None, after: str,
               counts: Callable[[Any, tuple[Any, ...]], bool] = lambda result, args: True) -> None:
        """Wrap `obj.name` (a coroutine method, on this instance): `before` at the call's start and `after` at its
        end, for a call that `counts` (e.g. a claim that found a turn)."""
        original = getattr(obj, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            result = await original(*args, **kwargs)
            if counts(result, args):
                if before is not None:
                    self.mark(before, began)
                self.mark(after)
            return result
        setattr(obj, name, timed)

    def durations(self, posted: float) -> dict[str, float] | None:
        """Each stage's duration (ms) when every event was seen, in path order; else None."""
        if "due_read" not in self.events and "relay_woke" in self.events:   # read in the `sending` transaction
            self.events["due_read"] = self.events["relay_woke"]
        times = [posted] + [self.events.get(event, float("nan")) for _, event in STAGES]
        if any(t != t for t in times) or any(b < a for a, b in zip(times, times[1:], strict=False)):
            return None
        cut = {stage: (b - a) * 1000 for (stage, _), a, b in zip(STAGES, times, times[1:], strict=False)}
        return {**cut, "total": (times[-1] - posted) * 1000, "rode": 1.0 if "rode" in self.events else 0.0}


@contextlib.contextmanager
def traced(app: Any, stages: Stages) -> Any:
    """Wrap this app's ingress, store, worker and relay instances, and the ingress's parser and the relay's renderer
    (module attributes, restored on exit), so that `stages` sees each step of a reply."""
    parts = app.parts
    ingress, store, worker = parts.ingress, parts.store, parts.worker
    stages.around(ingress, "fetch", None, "parsed", lambda result, args: bool(result))
    stages.around(ingress, "admit_parsed", None, "admitted")
    if hasattr(store, "claim_or_wake"):   # the worker's claim (issue 31: its empty answer carries the next wake)
        stages.around(store, "claim_or_wake", "woke", "claimed", lambda result, args: result.claim is not None)
    else:
        stages.around(store, "claim", "woke", "claimed", lambda result, args: result is not None)
    turn = worker.run_turn

    async def turn_started(claim: Any, *args: Any, **kwargs: Any) -> Any:
        if "claimed" not in stages.events:   # claimed in the admission's commit (an idle worker's offer): no claim
            at = time.perf_counter()          # call of its own, so its wake-up ends as the turn starts, its claim is 0
            stages.mark("woke", at)
            stages.mark("claimed", at)
            stages.mark("rode", at)
        return await turn(claim, *args, **kwargs)
    worker.run_turn = turn_started
    stages.around(worker.model, "complete", "model_start", "model_end")
    stages.around(store, "finish", None, "finished")
    if hasattr(store, "take_due"):        # the due read rides in the `sending` transaction: that stage is empty
        stages.around(store, "take_due", "relay_woke", "sending", lambda result, args: result.delivery is not None)
    else:                                 # the code before issue 31's second step (measured as "before")
        stages.around(store, "due_deliveries", "relay_woke", "due_read", lambda result, args: bool(result))
        stages.around(store, "mark_sending", None, "sending")
    render, parse = relay_module.render_part, polling_module.parse

    def rendered(*args: Any, **kwargs: Any) -> str:
        html = render(*args, **kwargs)
        stages.mark("rendered")
        return html

    def parsing(*args: Any, **kwargs: Any) -> Any:     # the first update's parse begins: getUpdates has returned
        stages.mark("polled")
        return parse(*args, **kwargs)
    relay_module.render_part, polling_module.parse = rendered, parsing
    try:
        yield
    finally:
        relay_module.render_part, polling_module.parse = render, parse


@contextlib.asynccontextmanager
async def _database(postgres: str | None) -> AsyncIterator[dict[str, str]]:
    """SQLite (local_product's temporary file) or, with `postgres`, a fresh scratch database on that server."""
    if not postgres:
        yield {}
        return
    with scratch_pg_database(None if postgres == "default" else postgres, "latency") as url:
        yield {"SHOPBOT_DB": url}


class WalFrames:
    """SQLite only: the WAL frames (pages) each durable commit wrote, by transaction function. Read from the WAL
    index's header (the `-shm` file: its frame count and salt) around the COMMIT, through the commit hooks that
    `Database.write` already calls in its connection thread (wrapped here, the product's own hooks still called);
    nothing in the product changes, not even its checkpoints. A group commit (writes issued together share one
    COMMIT, store/sqlite/connection.py) is counted once, under the name of its last write."""

    def __init__(self, db: Any) -> None:
        self.hooks = db.hooks
        self.fd = os.open(f"{db.path}-shm", os.O_RDONLY)
        self.current = ""                  # the transaction function running now (set by `Calls`, same thread)
        self.before: tuple[int, bytes] = (0, b"")
        self.frames: dict[str, list[int]] = {}
        self.counting = False

    def header(self) -> tuple[int, bytes]:
        """(mxFrame, salt) of the WAL index header: a restarted WAL has a new salt and counts from 0 again."""
        raw = os.pread(self.fd, 48, 0)
        return struct.unpack_from("=I", raw, 16)[0], raw[32:40]

    def before_commit(self, conn: Any) -> None:
        self.hooks.before_commit(conn)          # the product's own rows first: they are part of this commit
        self.before = self.header()

    def committed(self) -> None:
        self.hooks.committed()
        if self.counting:
            frames, salt = self.header()
            written = frames if salt != self.before[1] else frames - self.before[0]
            self.frames.setdefault(self.current, []).append(written)

    def rolled_back(self) -> None:
        self.hooks.rolled_back()

    def close(self) -> None:
        os.close(self.fd)


class Calls:
    """A store's `db.write` or `db.read`, counted: every call, its time, and (while `named`) calls by function.
    With `frames`, the transaction's name is handed to it in the connection thread (its commit's pages)."""

    def __init__(self, call: Callable[..., Awaitable[Any]], frames: WalFrames | None = None) -> None:
        self.call = call
        self.total = 0
        self.ms: list[float] = []
        self.named = False
        self.by_name: dict[str, int] = {}
        self.frames = frames

    async def __call__(self, fn: Any, *args: Any) -> Any:
        self.total += 1
        name = getattr(fn, "__qualname__", type(fn).__name__).replace(".<locals>", "")
        if self.named:
            self.by_name[name] = self.by_name.get(name, 0) + 1
        began = time.perf_counter()
        try:
            if self.frames is None:
                return await self.call(fn, *args)
            frames = self.frames

            def named(conn: Any, *inner: Any) -> Any:
                frames.current = name
                return fn(conn, *inner)
            return await self.call(named, *args)
        finally:
            self.ms.append((time.perf_counter() - began) * 1000)


def _confirmed_counter(store: Any) -> Callable[[], Awaitable[int]]:
    """Confirmed deliveries, outside the measured path: SQLite on a read-only connection of its own, PostgreSQL
    through the store's read path."""
    path = getattr(store, "path", None)
    query = "SELECT count(*) FROM deliveries WHERE state = 'confirmed'"
    if path is not None:
        reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

        async def sqlite_count() -> int:
            return int(reader.execute(query).fetchone()[0])
        return sqlite_count

    async def pg_count() -> int:
        return int(await store.db.read(lambda conn: conn.execute(query).fetchone()[0]))
    return pg_count


async def one_run(messages: int, chats: int, rate: float, typing_delay: float, typing: bool = True,
                  postgres: str | None = None) -> dict[str, Any]:
    owners = [5000 + i for i in range(chats)]
    overrides = {"SHOPBOT_OWNER_IDS": ",".join(map(str, owners)), "SHOPBOT_DEBOUNCE_MS": "0",
                 "SHOPBOT_CHAT_PACE_MS": "1000", "SHOPBOT_CHAT_BURST": "3", "SHOPBOT_GLOBAL_PACE_PER_S": "30",
                 "SHOPBOT_GLOBAL_BURST": "30", "SHOPBOT_SHOP_FILE": str(CALM_SHOP), "SHOPBOT_LOG_LEVEL": "WARNING",
                 "SHOPBOT_OWNER_CHAT_ID": str(owners[0])}
    latencies: list[float] = []
    receipts: list[float] = []
    arrivals: list[tuple[float, int]] = []
    confirm_lags: list[float] = []
    breakdowns: list[dict[str, float]] = []
    async with _database(postgres) as database, local_product({**overrides, **database}) as run:
        api, store = run.api, run.app.parts.store
        await api.wait_for(lambda: api.offsets_requested != [], timeout=10)    # start-up (and its chat action) done
        api.inject("sendChatAction", "slow", delay=typing_delay, count=10 * (messages + WARM_UP))
        if not typing:                                   # --no-typing: the comparison without any typing call
            run.app.parts.worker.on_turn = None
        frames = WalFrames(store.db) if getattr(store.db, "path", None) is not None else None
        if frames is not None:
            store.db.hooks = frames
        writes, reads = Calls(store.db.write, frames), Calls(store.db.read)
        store.db.write = writes  # type: ignore[method-assign] - counting commits is the measurement
        store.db.read = reads  # type: ignore[method-assign] - every database call counts, reads included
        confirmed = _confirmed_counter(store)
        stages = Stages()
        gap = 1.0 / rate
        next_at = time.perf_counter()
        commits_at_start = chat_actions_at_start = durable_at_start = reads_at_start = 0
        with traced(run.app, stages):
            for n in range(messages + WARM_UP):                  # the first WARM_UP are not counted
                if n == WARM_UP:
                    commits_at_start, chat_actions_at_start = writes.total, api.calls.get("sendChatAction", 0)
                    reads_at_start = reads.total
                    durable_at_start = getattr(store.db, "commits", 0)
                    writes.named = reads.named = True
                    if frames is not None:
                        frames.counting = True
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                chat = owners[n % chats]
                before = len(api.sent)
                stages.events.clear()
                start = next_at = time.perf_counter()
                next_at += gap
                message_id = api.post_message(chat, chat, "help")["message"]["message_id"]
                await api.wait_for(lambda b=before: len(api.sent) > b, timeout=10)
                arrived = time.perf_counter()
                stages.mark("arrived", arrived)
                await api.wait_for(lambda c=chat, m=message_id: api.reaction(c, m) is not None, timeout=10)
                reacted = next(r["at"] for r in reversed(api.reaction_calls)
                               if (r["chat_id"], r["message_id"]) == (chat, message_id))
                # outside the measured path: the reply's `confirmed` is committed with no later work to carry it
                while await confirmed() <= n:
                    if time.perf_counter() - arrived > 5:
                        raise RuntimeError(f"reply {n} was not confirmed within 5 s of its sendMessage")
                    await asyncio.sleep(0.001)
                if n >= WARM_UP:
                    latencies.append((arrived - start) * 1000)
                    receipts.append((reacted - start) * 1000)
                    arrivals.append((arrived, chat))
                    confirm_lags.append((time.perf_counter() - arrived) * 1000)
                    cut = stages.durations(start)
                    if cut is not None:
                        breakdowns.append(cut)
        commits_counted = writes.total - commits_at_start
        reads_counted = reads.total - reads_at_start
        writes.named = reads.named = False               # the shutdown's writes are not the replies'
        if frames is not None:
            frames.counting = False
            store.db.hooks = frames.hooks
            frames.close()
        durable = getattr(store.db, "commits", None)      # SQLite counts the writes that changed something
        durable_counted = None if durable is None else durable - durable_at_start
        typing_calls = api.calls.get("sendChatAction", 0) - chat_actions_at_start
    per_chat: dict[int, list[float]] = {}
    for t, chat in arrivals:
        per_chat.setdefault(chat, []).append(t)
    shortest = min((b - a for ts in per_chat.values() for a, b in zip(ts, ts[1:], strict=False)), default=float("inf"))
    return {"latencies": latencies, "receipts": receipts, "most_per_s": most_in_one_second([t for t, _ in arrivals]),
            "shortest_chat_gap_s": shortest, "typing_calls": typing_calls, "confirm_lags": confirm_lags,
            "commits_per_message": commits_counted / messages, "messages": messages,
            "durable_per_message": None if durable_counted is None else durable_counted / messages,
            "write_p50_ms": percentile(writes.ms, 50), "breakdowns": breakdowns,
            "writes": {name: n / messages for name, n in sorted(writes.by_name.items(), key=lambda kv: -kv[1])},
            "reads_per_message": reads_counted / messages,
            "frames": {} if frames is None else frames.frames,
            "reads": {name: n / messages for name, n in sorted(reads.by_name.items(), key=lambda kv: -kv[1])}}


async def anchor_run(messages: int, chats: int, rate: float, typing_delay: float) -> dict[str, Any]:
    """The python-telegram-bot default: an Application polling with its defaults, one handler answering from
    memory, against a local Bot API server; the same chats, schedule and typing delay as the product's run."""
    from telegram import Update
    from telegram.ext import Application, ContextTypes, MessageHandler, filters

    owners = [5000 + i for i in range(chats)]
    latencies: list[float] = []

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text(ANSWER)

    async with LocalBotApi(DEMO_TOKEN) as api:
        api.inject("sendChatAction", "slow", delay=typing_delay, count=10 * (messages + WARM_UP))
        app = Application.builder().token(DEMO_TOKEN).base_url(f"{api.base_url}/bot").build()
        app.add_handler(MessageHandler(filters.TEXT, answer))
        async with app:
            assert app.updater is not None
            await app.updater.start_polling()
            await app.start()
            try:
                gap = 1.0 / rate
                next_at = time.perf_counter()
                for n in range(messages + WARM_UP):
                    delay = next_at - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    chat = owners[n % chats]
                    before = len(api.sent)
                    start = next_at = time.perf_counter()
                    next_at += gap
                    api.post_message(chat, chat, "help")
                    await api.wait_for(lambda b=before: len(api.sent) > b, timeout=10)
                    if n >= WARM_UP:
                        latencies.append((time.perf_counter() - start) * 1000)
            finally:
                await app.updater.stop()
                await app.stop()
    return {"latencies": latencies}


def _durable(r: dict[str, Any]) -> str:
    return "?" if r.get("durable_per_message") is None else f"{r['durable_per_message']:.2f}"


def breakdown_line(breakdowns: list[dict[str, float]]) -> str:
    if not breakdowns:
        return "no reply had every stage"
    p50s = {stage: percentile([b[stage] for b in breakdowns], 50) for stage, _ in STAGES}
    rode = sum(1 for b in breakdowns if b.get("rode"))
    return ", ".join(f"{stage} {value:.2f}" for stage, value in p50s.items()) + \
        f" (ms, p50 of {len(breakdowns)} replies; the stages' p50s add up to {sum(p50s.values()):.2f}, these " \
        f"replies' total p50 is {percentile([b['total'] for b in breakdowns], 50):.2f}; {rode} of them claimed in " \
        "the admission's commit: their claim is inside the admission commit's stage, their wake-up runs from that " \
        "commit to the turn's start and their claim stage is 0)"


def frames_line(runs: list[dict[str, Any]]) -> str:
    """WAL frames (4 KiB pages) per durable commit, by transaction, over `runs` (SQLite only)."""
    by_name: dict[str, list[int]] = {}
    for r in runs:
        for name, values in r.get("frames", {}).items():
            by_name.setdefault(name.replace("BaseStore.", ""), []).extend(values)
    if not by_name:
        return "none counted (SQLite only)"
    ordered = sorted(by_name.items(), key=lambda kv: -len(kv[1]))
    return ", ".join(f"{name} {statistics.median(v):g} (mean {statistics.mean(v):.1f}, {len(v)} commits)"
                     for name, v in ordered) + \
        f"; all: {sum(map(sum, by_name.values())) / max(1, sum(r['messages'] for r in runs)):.1f} per owner message"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="owner messages per second at most (default 20)")
    parser.add_argument("--typing-delay-ms", type=float, default=150.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-typing", action="store_true", help="send no typing indicator (for comparison)")
    parser.add_argument("--no-anchor", action="store_true", help="skip the python-telegram-bot default's runs")
    parser.add_argument("--postgres", nargs="?", const="default", default=None, metavar="URL",
                        help="also the product on a scratch PostgreSQL database (default: $SHOPBOT_TEST_PG_DSN or "
                        "the local server), interleaved with SQLite, and the ratio")
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    sides = ["sqlite"] + (["anchor"] if not args.no_anchor else []) + (["postgres"] if args.postgres else [])
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for repeat in range(args.repeats):
        order = sides if repeat % 2 == 0 else sides[::-1]     # ABBA: neither side always runs first
        for side in order:
            if side == "anchor":
                r = asyncio.run(anchor_run(args.messages, args.chats, args.rate, args.typing_delay_ms / 1000))
            else:
                r = asyncio.run(one_run(args.messages, args.chats, args.rate, args.typing_delay_ms / 1000,
                                        not args.no_typing, args.postgres if side == "postgres" else None))
            results[side].append(r)
            values = r["latencies"]
            line = (f"run {repeat + 1} {side}: {len(values)} messages over {args.chats} chats at <= {args.rate:g}/s: "
                    f"p50 {percentile(values, 50):.2f} ms  p99 {percentile(values, 99):.2f} ms  "
                    f"max {max(values):.2f} ms  (load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
            if side != "anchor":
                line += (f" | receipt p50 {percentile(r['receipts'], 50):.2f} ms  p99 "
                         f"{percentile(r['receipts'], 99):.2f} ms"
                         f" | typing answered {args.typing_delay_ms:g} ms late, {r['typing_calls']} sendChatAction "
                         f"calls | limits seen by the server: at most {r['most_per_s']} replies in any second, "
                         f"shortest gap between two replies to one chat {r['shortest_chat_gap_s']:.2f} s | each "
                         f"reply confirmed by itself, {percentile(r['confirm_lags'], 50):.1f} ms (p50) after its "
                         f"sendMessage arrived | {r['commits_per_message']:.2f} write transactions per owner "
                         f"message, each {r['write_p50_ms']:.2f} ms (p50, queue and fsync included), of which "
                         f"{_durable(r)} changed the database (durable commits); "
                         f"{r['reads_per_message']:.2f} reads, so "
                         f"{r['commits_per_message'] + r['reads_per_message']:.2f} database calls per owner message"
                         f"\n  write transactions per owner message: "
                         f"{', '.join(f'{k} {v:.2f}' for k, v in r['writes'].items())}\n  reads per owner message: "
                         f"{', '.join(f'{k} {v:.2f}' for k, v in r['reads'].items())}\n  stages: "
                         f"{breakdown_line(r['breakdowns'])}"
                         f"{'' if side != 'sqlite' else chr(10) + '  WAL pages per commit (p50): ' + frames_line([r])}")
            print(line, flush=True)
    m = statistics.median

    def p(side: str, q: float) -> list[float]:
        return [percentile(r["latencies"], q) for r in results[side]]

    def ratio(side: str, anchor: str, q: float) -> float:
        """The median of the runs' ratios (each pair measured back to back)."""
        return m([a / b for a, b in zip(p(side, q), p(anchor, q), strict=True)])
    print(f"median of {args.repeats} runs, sqlite: p50 {m(p('sqlite', 50)):.2f} ms (target <= 10)  p99 "
          f"{m(p('sqlite', 99)):.2f} ms (target <= 50)  "
          f"{m([r['commits_per_message'] for r in results['sqlite']]):.2f} write transactions per owner message, "
          f"{m([r['durable_per_message'] for r in results['sqlite']]):.2f} durable commits, "
          f"{m([r['commits_per_message'] + r['reads_per_message'] for r in results['sqlite']]):.2f} database calls "
          "(reads included) | receipt p50 "
          f"{m([percentile(r['receipts'], 50) for r in results['sqlite']]):.2f} ms  p99 "
          f"{m([percentile(r['receipts'], 99) for r in results['sqlite']]):.2f} ms (its p50 at most the reply's: "
          f"{'yes' if m([percentile(r['receipts'], 50) for r in results['sqlite']]) <= m(p('sqlite', 50)) else 'NO'})")
    print(f"stages, all sqlite runs: {breakdown_line([b for r in results['sqlite'] for b in r['breakdowns']])}")
    print(f"WAL pages per commit, all sqlite runs (p50): {frames_line(results['sqlite'])}")
    if "anchor" in results:
        print(f"median of {args.repeats} runs, python-telegram-bot default: p50 {m(p('anchor', 50)):.2f} ms  p99 "
              f"{m(p('anchor', 99)):.2f} ms | product / anchor, median of the runs' ratios: p50 "
              f"{ratio('sqlite', 'anchor', 50):.2f}x (target <= 2x)  p99 {ratio('sqlite', 'anchor', 99):.2f}x "
              "(target <= 3x)")
    if "postgres" in results:
        print(f"median of {args.repeats} runs, postgres: p50 {m(p('postgres', 50)):.2f} ms  p99 "
              f"{m(p('postgres', 99)):.2f} ms  "
              f"{m([r['commits_per_message'] for r in results['postgres']]):.2f} write transactions per owner "
              f"message, {m([r['commits_per_message'] + r['reads_per_message'] for r in results['postgres']]):.2f} "
              "database calls | "
              f"postgres / sqlite: p50 {ratio('postgres', 'sqlite', 50):.2f}x  "
              f"p99 {ratio('postgres', 'sqlite', 99):.2f}x")
        print(f"stages, all postgres runs: "
              f"{breakdown_line([b for r in results['postgres'] for b in r['breakdowns']])}")


if __name__ == "__main__":
    main()
