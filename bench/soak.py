"""Random-kill soak (issue 7): `python -m bench.soak --minutes M --seed N [--kills K] [--factor F]`.

Drives a realistic mixed load against `shopbot run` as a real subprocess and kills it over and over:

- the owner writes (double taps are redeliveries of the same update; now and then two identical messages), sends
  commands, presses Approve/Reject under order proposals and Resend/I have it under "may not have delivered"
  notices, sometimes twice, sometimes with the press itself redelivered; proposal decisions are held and pressed
  at a later restart (right after a start armed at K9 or K10, so approvals meet those kill points, or now and
  then after an unarmed start);
- two tills post counts over HTTP and retry each post with the same request_id until they get a 2xx, and now and
  then send an acknowledged post again;
- the clock runs accelerated (`SHOPBOT_TEST_MODE=1`, `SHOPBOT_CLOCK=accelerated:<start>:<factor>`) with a schedule
  firing every simulated minute; each restart starts from the simulated time already reached, so time never goes
  backwards;
- the process is SIGKILLed at random moments, or restarted with a random armed fault point K1-K10 (it dies there,
  or is SIGKILLed after a short bound when that point is not reached);
- the local Bot API and supplier (in this process's event loop, so they outlive every product process) inject
  random network faults: drops after accept/commit, 429, 500, slow answers, refused connections.

At the end the load stops (and the shop file loses its per-minute schedule, so nothing new arrives), injection
stops, the product is started clean, polled until nothing is open (no pending/running work, no pending/sending
delivery or action, no unconfirmed update at the server, no till post unacknowledged), stopped with SIGTERM (it
must exit 0), and audited from outside: `shopbot check`, tests/support/audit.py against the servers' records, every till
post acknowledged 202 is in the store, every owner message and button press the server holds is admitted (or the
message counted refused). Exit 0 when the audit holds, 1 when it does not.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.sandbox.bot_api import LocalBotApi  # noqa: E402
from bot.sandbox.supplier import LocalSupplier  # noqa: E402
from tests.support.audit import audit as full_audit  # noqa: E402

UTC = UTC
TOKEN = "777:soak-token"
SUPPLIER_TOKEN = "soak-supplier-token"
TILLS = {"1": "till-one-secret-token", "2": "till-two-secret-token"}
OWNER = 1001
POINTS = [f"K{i}" for i in range(1, 11)]
ITEMS = ("vanilla", "chocolate", "strawberry")
SIM_START = datetime(2026, 6, 1, 5, 0, tzinfo=UTC)     # 06:00 in London: the 08:30 brief falls inside a long run

SHOP = """\
name = "Lucy's Ice Cream (soak)"
timezone = "Europe/London"
currency = "USD"
count_tolerance = 2

[supplier]
name = "Dairy Direct"

[limits]
order_max_cents = 20000
day_max_cents = 5000000         # high: a run covers hours of one simulated day, and at the usual 50000 the day's
                                # budget is spent in minutes, after which no approval (K9, K10) can happen

[stock_watch]
cron = "{stock_cron}"

[items.vanilla]
unit = "tubs"
on_hand = 2
reorder_point = 8
target = 8
unit_cost_cents = 300
max_order = 20

[items.chocolate]
unit = "tubs"
on_hand = 12
reorder_point = 6
target = 12
unit_cost_cents = 250
max_order = 20

[items.strawberry]
unit = "tubs"
on_hand = 1
reorder_point = 5
target = 5
unit_cost_cents = 200
max_order = 20

[[schedule]]
name = "opening_brief"
cron = "30 8 * * *"
prompt = "Prepare the opening brief"
grace = "3h"
catch_up = "latest"
{extra}"""

PULSE = """
[[schedule]]
name = "pulse"
cron = "* * * * *"
prompt = "stock"
grace = "5m"
catch_up = "each"
"""

# What the owner types, with weights: agent requests, /brief (agent work too), and control commands.
TEXTS = [("stock", 5), ("how much vanilla", 4), ("how much chocolate", 3), ("count strawberry", 3), ("brief", 2),
         ("reorder", 3), ("hello, anything to do today?", 2), ("/status", 2), ("/pending", 2), ("/help", 1),
         ("/brief", 1)]

# Network faults: (server, method, fault), with weights.
NET_FAULTS = [
    (("tg", "sendMessage", "drop_after_accept"), 6), (("tg", "sendMessage", "429"), 4),
    (("tg", "sendMessage", "500"), 3), (("tg", "sendMessage", "slow"), 3),
    (("tg", "getUpdates", "500"), 2), (("tg", "getUpdates", "drop_after_accept"), 2),
    (("tg", "getUpdates", "slow"), 1), (("tg", "getUpdates", "429"), 1),
    (("tg", "answerCallbackQuery", "drop_after_accept"), 1), (("tg", "editMessageReplyMarkup", "500"), 1),
    (("tg", "*", "refuse"), 2),
    (("supplier", "POST", "drop_after_commit"), 3), (("supplier", "POST", "drop_before_commit"), 2),
    (("supplier", "POST", "500"), 2), (("supplier", "*", "refuse"), 1),
]


def pick(rng: random.Random, weighted: list) -> object:   # type: ignore[type-arg]
    values, weights = zip(*weighted)
    return rng.choices(values, weights)[0]


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def free_port() -> int:
    """A free port below the kernel's ephemeral range. The runner restarts the product on one port for the whole soak;
    a port the kernel hands out for `bind(("127.0.0.1", 0))` could be given to another process (a test started on port
    0 beside this one in the suite) while the product is down between two starts, and every later start would then
    fail to bind. Ports below the range are never handed out that way."""
    import socket
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, max(10001, low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:                     # no luck below the range: any free port
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Figures:
    messages: int = 0                 # owner messages posted (distinct occurrences)
    double_taps: int = 0              # redeliveries of an owner message
    identical_pairs: int = 0          # the same text sent twice (two occurrences)
    presses: int = 0                  # button presses posted
    double_presses: int = 0           # a second press under the same prompt
    press_redeliveries: int = 0       # the same press delivered twice
    posts: int = 0                    # till posts (distinct request ids)
    till_requests: int = 0            # HTTP requests the tills made, retries included
    till_acked: int = 0               # posts answered 202 (first acknowledgement)
    till_resent_acked: int = 0        # acknowledged posts sent again
    till_status: Counter = field(default_factory=Counter)
    kills: int = 0                    # SIGKILLs: sent by the soak, or by an armed fault point
    kills_random: int = 0
    kills_after_bound: int = 0        # armed point not reached within the bound: SIGKILLed by the soak
    restarts: int = 0
    armed: Counter = field(default_factory=Counter)
    reached: Counter = field(default_factory=Counter)
    crashes: list = field(default_factory=list)       # exits other than SIGKILL/0, with the last stderr line
    startup_hangs: list = field(default_factory=list)  # alive after a traceback when the soak killed it
    faults: Counter = field(default_factory=Counter)


class Runner:
    """`shopbot run` as a real process; its output appended to one file; simulated time carried across restarts."""

    def __init__(self, work: Path, api: LocalBotApi, supplier: LocalSupplier, http_port: int, factor: float) -> None:
        self.work = work
        self.db = work / "shop.sqlite3"
        self.log = work / "shopbot.log"
        self.out = work / "processes.out"
        self.shop = work / "shop.toml"
        self.api, self.supplier = api, supplier
        self.http_port = http_port
        self.factor = factor
        self.sim_reached = SIM_START
        self.proc: asyncio.subprocess.Process | None = None
        self._started = 0.0
        self._sim_at_start = SIM_START
        self._out_offset = 0
        self.starts = 0

    def write_shop(self, *, pulse: bool) -> None:
        text = SHOP.format(stock_cron="*/15 * * * *" if pulse else "0 0 1 1 *", extra=PULSE if pulse else "")
        self.shop.write_text(text)

    def env(self, fault: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({
            "SHOPBOT_DB": str(self.db), "TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_API_BASE_URL": self.api.base_url,
            "SHOPBOT_OWNER_IDS": str(OWNER), "SHOPBOT_HTTP_HOST": "127.0.0.1", "SHOPBOT_HTTP_PORT": str(self.http_port),
            "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SHOP_FILE": str(self.shop), "SHOPBOT_LOG_FILE": str(self.log),
            "SHOPBOT_LOG_LEVEL": "INFO", "SHOPBOT_TEST_MODE": "1",
            "SHOPBOT_CLOCK": f"accelerated:{iso(self.sim_reached)}:{self.factor:g}",
            "SHOPBOT_SUPPLIER_URL": self.supplier.base_url, "SHOPBOT_SUPPLIER_TOKEN": SUPPLIER_TOKEN,
            "SHOPBOT_TILL_TOKENS": ",".join(f"{k}:{v}" for k, v in TILLS.items()),
        })
        if fault:
            env["SHOPBOT_FAULT"] = f"{fault}:kill"
        return env

    def sim_now(self) -> datetime:
        """At least the product's own simulated time (its clock starts after the spawn, ours at the spawn)."""
        if self.proc is None:
            return self.sim_reached
        elapsed = asyncio.get_running_loop().time() - self._started
        return self._sim_at_start + timedelta(seconds=elapsed * self.factor)

    async def start(self, fault: str | None = None, *args: str) -> asyncio.subprocess.Process:
        assert self.proc is None
        self._out_offset = self.out.stat().st_size if self.out.exists() else 0
        with self.out.open("a") as out:
            out.write(f"\n===== start {self.starts + 1} fault={fault} clock={iso(self.sim_reached)} "
                      f"at {datetime.now(UTC).isoformat()}\n")
            out.flush()
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.cli", "run", *args, env=self.env(fault), cwd=str(self.work),
                stdout=out, stderr=out)
        self._started = asyncio.get_running_loop().time()
        self._sim_at_start = self.sim_reached
        self.starts += 1
        return self.proc

    def output(self) -> str:
        """What the current (or last) process wrote."""
        with self.out.open("rb") as f:
            f.seek(self._out_offset)
            return f.read().decode("utf-8", "replace")

    async def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout)
        except TimeoutError:
            return None
        return self._ended()

    def _ended(self) -> int:
        assert self.proc is not None
        self.sim_reached = max(self.sim_reached, self.sim_now())
        rc = self.proc.returncode
        self.proc = None
        assert rc is not None
        return rc

    async def kill(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        return self._ended()

    async def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout)
        except TimeoutError:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()
            self._ended()
            return -999
        return self._ended()

    def query(self, sql: str, *args: object) -> list[tuple]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    async def check(self) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "check", "--db", str(self.db), env=self.env(None), cwd=str(self.work),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode() + err.decode()


class Soak:
    def __init__(self, args: argparse.Namespace, work: Path, api: LocalBotApi, supplier: LocalSupplier) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.api, self.supplier = api, supplier
        self.runner = self.make_runner(work)
        self.fig = Figures()
        self.stop_load = asyncio.Event()
        self.background: set[asyncio.Task] = set()
        self.acked: dict[str, str] = {}          # till source identity -> request id, answered 202
        self.conflicts: list[str] = []
        self.held: list[tuple[int, str, list]] = []   # proposal decisions the owner has not pressed yet
        self.till_rejected: list[str] = []
        self.runner_port = self.runner.http_port if isinstance(self.runner, Runner) else 0

    def till_url(self) -> str:
        """Where a till post goes (the PostgreSQL mode spreads them over the live processes)."""
        return f"http://127.0.0.1:{self.runner_port}/till/counts"

    def make_runner(self, work: Path):   # type: ignore[no-untyped-def]
        return Runner(work, self.api, self.supplier, free_port(), self.args.factor)

    def later(self, delay: float, fn, *args) -> None:   # type: ignore[no-untyped-def]
        async def run() -> None:
            await asyncio.sleep(delay)
            fn(*args)
        task = asyncio.get_running_loop().create_task(run())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # ---- the owner ------------------------------------------------------------------------------------------
    async def owner(self) -> None:
        rng = self.rng
        while not self.stop_load.is_set():
            await asyncio.sleep(rng.expovariate(1 / self.args.message_every))
            text = str(pick(rng, TEXTS))
            update = self.api.post_message(OWNER, OWNER, text)
            self.fig.messages += 1
            if rng.random() < 0.2:                                   # a double tap: the same update again
                self.fig.double_taps += 1
                self.later(rng.uniform(0.0, 3.0), self.api.redeliver, update["update_id"])
            if rng.random() < 0.04:                                  # two identical messages: two occurrences
                self.fig.identical_pairs += 1
                self.fig.messages += 1
                self.api.post_message(OWNER, OWNER, text)

    async def buttons(self) -> None:
        """Press the buttons under what the bot sent: proposals and unknown notices (and /pending lists)."""
        seen = 0
        while not self.stop_load.is_set():
            with contextlib.suppress(TimeoutError):
                await self.api.wait_for(lambda s=seen: len(self.api.sent) > s, timeout=0.5)
            new, seen = self.api.sent[seen:], len(self.api.sent)
            for message in new:
                rows = (message.reply_markup or {}).get("inline_keyboard") if message.chat_id == OWNER else None
                if rows:
                    self.decide(message, rows)

    def decide(self, message, rows: list) -> None:   # type: ignore[no-untyped-def]
        rng = self.rng
        buttons = [b for row in rows for b in row if b.get("callback_data")]
        if not buttons:
            return
        text = message.text
        if text.startswith("Order proposal"):        # [Approve, Reject]
            button = buttons[0] if rng.random() < 0.8 else buttons[-1]
            # The owner decides later: held until a restart armed at K9 or K10 (or now and then an unarmed one)
            # releases it, so approvals meet the action relay's kill points (pressed at once they rarely would).
            # Never left undecided: an open proposal blocks further proposals for its item (C11).
            self.held.append((message.message_id, button["callback_data"], buttons))
            return
        elif "may not have delivered" in text or text.startswith("These replies may not have arrived"):
            if rng.random() < 0.15:
                return
            row = rng.choice([r for r in rows if r])
            button = row[0] if rng.random() < 0.55 else row[-1]      # Resend / I have it
        else:
            button = rng.choice(buttons)
        delay = rng.uniform(0.2, 3.0)
        self.later(delay, self.press, message.message_id, button["callback_data"], True)
        if rng.random() < 0.15:                                      # pressed twice (or the other button)
            self.fig.double_presses += 1
            other = rng.choice(buttons)
            self.later(delay + rng.uniform(0.0, 1.5), self.press, message.message_id, other["callback_data"], False)

    def release_held(self, soon: bool) -> None:
        """Press the held proposal decisions: at once (a process armed at K9/K10 just started) or spread out."""
        rng = self.rng
        held, self.held = self.held, []
        for message_id, data, buttons in held:
            delay = rng.uniform(0.3, 1.0) if soon else rng.uniform(0.2, 3.0)
            self.later(delay, self.press, message_id, data, True)
            if rng.random() < 0.15:
                self.fig.double_presses += 1
                other = rng.choice(buttons)
                self.later(delay + rng.uniform(0.0, 1.5), self.press, message_id, other["callback_data"], False)

    def press(self, message_id: int, data: str, may_redeliver: bool) -> None:
        update = self.api.post_callback(OWNER, OWNER, data, message_id)
        self.fig.presses += 1
        if may_redeliver and self.rng.random() < 0.1:               # the same press delivered twice
            self.fig.press_redeliveries += 1
            self.later(self.rng.uniform(0.0, 2.0), self.api.redeliver, update["update_id"])

    # ---- the tills ------------------------------------------------------------------------------------------
    async def till(self, till_id: str) -> None:
        rng = random.Random(f"{self.args.seed}-till-{till_id}")
        headers = {"Authorization": f"Bearer {TILLS[till_id]}", "Content-Type": "application/json"}
        seq = 0
        async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, connect=1.0)) as client:
            while not self.stop_load.is_set():
                await asyncio.sleep(rng.expovariate(1 / self.args.post_every))
                seq += 1
                request_id = f"s{self.args.seed}-t{till_id}-{seq}"
                counted = rng.sample(ITEMS, rng.randint(1, len(ITEMS)))
                body = {"request_id": request_id, "counts": {item: rng.randint(0, 16) for item in counted}}
                if rng.random() < 0.2:
                    body["note"] = "end of shift"
                self.fig.posts += 1
                await self.post_until_acked(client, headers, till_id, body, rng)
                self.acked[f"till:{till_id}:{request_id}"] = request_id
                self.fig.till_acked += 1
                if rng.random() < 0.1:                               # an acknowledged post sent again
                    self.fig.till_resent_acked += 1
                    await asyncio.sleep(rng.uniform(0.0, 2.0))
                    await self.post_until_acked(client, headers, till_id, body, rng)

    async def post_until_acked(self, client: httpx.AsyncClient, headers: dict, till_id: str, body: dict,
                               rng: random.Random) -> None:
        raw = json.dumps(body)
        while True:
            self.fig.till_requests += 1
            try:
                response = await client.post(self.till_url(), content=raw, headers=headers)
                status = response.status_code
            except httpx.HTTPError as exc:
                self.fig.till_status[type(exc).__name__] += 1
                await asyncio.sleep(rng.uniform(0.2, 0.5))
                continue
            self.fig.till_status[str(status)] += 1
            if 200 <= status < 300:
                return
            if status == 409:                 # the same content under the same id can never conflict
                self.conflicts.append(f"till {till_id} {body['request_id']}: {response.text[:200]}")
                return
            if 400 <= status < 500:           # the soak's own body is wrong: nothing to retry
                self.till_rejected.append(f"till {till_id} {body['request_id']}: {status} {response.text[:200]}")
                return
            # 500 not stored, 503 busy: the till sends the same request again (Retry-After capped to keep moving)
            retry = response.headers.get("retry-after", "")
            await asyncio.sleep(min(float(retry), 1.0) if retry.isdigit() else rng.uniform(0.2, 0.5))

    # ---- network faults -------------------------------------------------------------------------------------
    async def faults(self) -> None:
        rng = random.Random(f"{self.args.seed}-faults")
        while not self.stop_load.is_set():
            await asyncio.sleep(rng.uniform(0.4, 2.0))
            server, method, fault = pick(rng, NET_FAULTS)   # type: ignore[misc]
            if fault == "refuse":
                self.fig.faults[f"{server} refuse"] += 1
                target = self.api if server == "tg" else self.supplier
                await target.refuse()
                await asyncio.sleep(rng.uniform(0.2, 1.5))
                await target.accept()
                continue
            if server == "tg":
                queued = sum(f.count for f in self.api._faults if f.method == method.lower())
                if queued >= 2:
                    continue
                kwargs = {}
                if fault == "429":
                    kwargs["retry_after"] = rng.randint(1, 2)
                if fault == "slow":
                    kwargs["delay"] = rng.uniform(0.2, 2.0)
                self.api.inject(method, fault, **kwargs)
            else:
                if len(self.supplier._faults) >= 2:
                    continue
                self.supplier.inject(fault)
            self.fig.faults[f"{server} {method} {fault}"] += 1

    # ---- kills and restarts ---------------------------------------------------------------------------------
    async def lifecycle(self, deadline: float) -> None:
        rng = random.Random(f"{self.args.seed}-kills")
        loop = asyncio.get_running_loop()
        fig, runner = self.fig, self.runner
        while loop.time() < deadline and (self.args.kills is None or fig.kills < self.args.kills):
            fault = rng.choice(POINTS) if rng.random() < self.args.arm else None
            if runner.starts:
                fig.restarts += 1
            await runner.start(fault)
            if fault:
                fig.armed[fault] += 1
            if fault in ("K9", "K10") or (fault is None and rng.random() < 0.1):
                self.release_held(soon=fault in ("K9", "K10"))
            bound = self.args.fault_bound if fault else rng.uniform(*self.args.kill_window)
            rc = await runner.wait(bound)
            output = ""
            if rc is None:                                  # still running: SIGKILL it now
                rc = await runner.kill()
                output = runner.output()
                fig.kills += 1
                if fault:
                    fig.kills_after_bound += 1
                else:
                    fig.kills_random += 1
                if "Traceback" in output and "shopbot running" not in output:
                    fig.startup_hangs.append(last_error(output))
            else:
                output = runner.output()
                if rc == -signal.SIGKILL and fault and f"fault point {fault} reached" in output:
                    fig.kills += 1
                    fig.reached[fault] += 1
                else:
                    fig.crashes.append(f"rc={rc} fault={fault}: {last_error(output)}")
            if self.args.verbose:
                print(f"[{time.strftime('%H:%M:%S')}] start {runner.starts} fault={fault} rc={rc} kills={fig.kills} "
                      f"messages={fig.messages} posts={fig.posts} sim={iso(runner.sim_reached)}", flush=True)
            await asyncio.sleep(rng.uniform(0.0, 0.3))

    # ---- the end: quiesce, drain, stop, audit ---------------------------------------------------------------
    def open_things(self) -> dict[str, int]:
        q = self.runner.query
        return {
            "work open": q("SELECT count(*) FROM work WHERE state IN ('pending', 'running')")[0][0],
            "deliveries pending/sending": q("SELECT count(*) FROM deliveries "
                                            "WHERE state IN ('pending', 'sending')")[0][0],
            "actions open": q("SELECT count(*) FROM actions WHERE state IN ('pending', 'sending', 'unknown')")[0][0],
            "updates unconfirmed": len(self.api.pending_updates),
            "till posts in flight": sum(1 for t in self.till_tasks if not t.done()),
            "presses scheduled": len(self.background),
        }

    read_errors: tuple[type[Exception], ...] = (sqlite3.OperationalError,)   # a read that may fail while it runs

    def product_gone(self) -> str | None:
        """Why nothing can drain any more (the product exited), or None."""
        if self.runner.proc is None or self.runner.proc.returncode is not None:
            return "product exited"
        return None

    async def drain(self, timeout: float) -> dict[str, int]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        settled = 0
        left: dict[str, int] = {}
        while loop.time() < deadline:
            with contextlib.suppress(*self.read_errors):
                left = self.open_things()
                settled = settled + 1 if not any(left.values()) else 0
                if settled >= 3:                          # three polls in a row, 0.5 s apart
                    return {}
            gone = self.product_gone()
            if gone:
                left[gone] = 1
                return left
            await asyncio.sleep(0.5)
        return left

    async def quiesce(self, load: list[asyncio.Task]) -> None:   # type: ignore[type-arg]
        """No new load, no more faults; the servers answer again."""
        self.stop_load.set()
        for task in load:
            task.cancel()
        await asyncio.gather(*load, return_exceptions=True)
        self.api._faults.clear()
        self.supplier._faults.clear()
        await self.api.accept()
        await self.supplier.accept()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        self.runner.write_shop(pulse=True)
        deadline = loop.time() + self.args.minutes * 60
        load = [loop.create_task(self.owner()), loop.create_task(self.buttons()), loop.create_task(self.faults())]
        self.till_tasks = [loop.create_task(self.till(t)) for t in TILLS]
        await self.lifecycle(deadline)
        load_seconds = time.monotonic() - started

        # Quiesce: no new load, no more faults, no per-minute schedule; the servers answer again.
        await self.quiesce(load)
        self.runner.write_shop(pulse=False)
        await self.runner.start(None)
        self.fig.restarts += 1
        left = await self.drain(self.args.drain_timeout)
        rc_term = await self.runner.terminate()
        # a clean stop leaves nothing open: if something arrived between the last poll and the stop, drain again
        rounds = 1
        while not left and rc_term == 0 and rounds < 3 and any(self.open_things().values()):
            rounds += 1
            await self.runner.start(None)
            self.fig.restarts += 1
            left = await self.drain(self.args.drain_timeout)
            rc_term = await self.runner.terminate()
        for task in self.till_tasks:
            task.cancel()
        await asyncio.gather(*self.till_tasks, return_exceptions=True)
        return await self.report(left, rc_term, rounds, load_seconds, time.monotonic() - started)

    def chaos_lines(self) -> list[str]:
        """What was done to the product: kills, fault points, restarts, crashes (one line each)."""
        fig = self.fig
        indent = "\n" + " " * 20
        return [
            f"kills             {fig.kills} ({fig.kills_random} at random moments, "
            f"{sum(fig.reached.values())} at armed fault points, {fig.kills_after_bound} armed but not reached "
            f"within {self.args.fault_bound:g} s)",
            "fault points      " + ", ".join(f"{k} {fig.reached[k]}/{fig.armed[k]}" for k in POINTS)
            + "  (reached/armed)",
            f"restarts          {fig.restarts} (final clean drain rounds: {self.rounds})",
            f"crashes           {len(fig.crashes)} exits other than SIGKILL"
            + "".join(f"{indent}{n} x {c}" for c, n in Counter(fig.crashes).most_common(5)),
            f"startup hangs     {len(fig.startup_hangs)} (alive after a traceback when killed)"
            + "".join(f"{indent}{n} x {c}" for c, n in Counter(fig.startup_hangs).most_common(5)),
        ]

    def classify(self, violations: list[str], result) -> None:   # type: ignore[no-untyped-def]
        """Hook: the PostgreSQL mode counts the documented window's duplicates apart."""

    async def report(self, left: dict, rc_term: int, rounds: int, load_seconds: float, total_seconds: float) -> int:
        fig, runner, q = self.fig, self.runner, self.runner.query
        self.rounds = rounds
        violations: list[str] = []
        if left:
            violations.append(f"not drained after {self.args.drain_timeout:.0f} s: {left}")
        if rc_term != 0:
            violations.append(f"SIGTERM: the product exited {rc_term}, not 0")
        rc, out = await runner.check()
        if rc != 0:
            violations.append(f"shopbot check exited {rc}: {out.strip()[-1000:]}")
        try:
            q("SELECT count(*) FROM actions")
        except self.read_errors:                    # no start ever created the schema: say why, not a traceback
            print("\n".join(["FAIL: the product never created its database; its last error: "
                              + last_error(runner.output()), *violations]))
            return 1

        # the owner messages and presses the server holds (a redelivery is the same message)
        updates = list(self.api._all_updates.values())
        messages = {u["message"]["message_id"] for u in updates
                    if "message" in u and u["message"]["from"]["id"] == OWNER}
        presses = {u["callback_query"]["id"] for u in updates if "callback_query" in u}
        result = full_audit(runner.db, [m.text for m in self.api.sent], self.supplier.orders,
                            owner_messages=len(messages))
        violations += result.violations
        self.classify(violations, result)

        sources = {s for (s,) in q("SELECT source FROM work")}
        refused = q("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = 'refused_capacity'")[0][0]
        missing_messages = sorted(m for m in messages if f"tg:{OWNER}:{m}" not in sources)
        lost_messages = max(0, len(missing_messages) - refused)
        if lost_messages:
            violations.append(f"{lost_messages} owner message(s) neither admitted nor counted refused "
                              f"(missing: {missing_messages[:10]}, refused counted: {refused})")
        lost_posts = sorted(s for s in self.acked if s not in sources)
        if lost_posts:
            violations.append(f"{len(lost_posts)} till post(s) acknowledged 202 but not in the store: "
                              f"{lost_posts[:10]}")
        lost_presses = sorted(p for p in presses if f"cb:{p}" not in sources)
        if lost_presses:
            violations.append(f"{len(lost_presses)} button press(es) the server holds were never admitted")
        if self.conflicts:
            violations.append(f"{len(self.conflicts)} till post(s) answered 409 for their own content: "
                              f"{self.conflicts[:3]}")
        if self.till_rejected:
            violations.append(f"{len(self.till_rejected)} till post(s) refused 4xx: {self.till_rejected[:3]}")
        lost = lost_messages + len(lost_posts) + len(lost_presses)

        def by_state(table: str, where: str = "") -> str:
            rows = q(f"SELECT state, count(*) FROM {table} {where} GROUP BY state ORDER BY state")
            return ", ".join(f"{s} {n}" for s, n in rows) or "none"

        work_sources = Counter(s.split(":", 1)[0] for s in sources)
        figures = result.figures
        unknown = figures.get("unknown", 0)
        failed_work = figures.get("failed", 0)
        failed_deliveries = q("SELECT count(*) FROM deliveries WHERE state = 'failed'")[0][0]
        verdict = "PASS" if not violations else "FAIL"
        agent_states = by_state("work", "WHERE kind = 'agent'")
        decisions = dict(q("SELECT decision, count(*) FROM resolutions GROUP BY decision"))
        print(f"soak seed={self.args.seed} minutes={self.args.minutes:g} factor={self.args.factor:g} "
              f"work dir={runner.work}")
        print(f"duration          {load_seconds:.0f} s of load, {total_seconds:.0f} s in all; simulated clock "
              f"{iso(SIM_START)} -> {iso(runner.sim_reached)}")
        print(f"messages          {fig.messages} owner messages ({len(messages)} distinct at the server), "
              f"{fig.double_taps} double taps, {fig.identical_pairs} identical pairs")
        print(f"presses           {fig.presses} ({fig.double_presses} second presses, {fig.press_redeliveries} "
              f"redelivered presses)")
        print(f"posts             {fig.posts} till posts, {fig.till_acked} acknowledged 202, {fig.till_requests} "
              f"HTTP requests, {fig.till_resent_acked} acknowledged posts sent again; answers: "
              + ", ".join(f"{k} {v}" for k, v in sorted(fig.till_status.items())))
        for line in self.chaos_lines():
            print(line)
        print("network faults    " + ", ".join(f"{k} {v}" for k, v in sorted(fig.faults.items())))
        print(f"work              {sum(work_sources.values())} items: " +
              ", ".join(f"{k} {v}" for k, v in sorted(work_sources.items())) +
              f"; agent work {agent_states}")
        print(f"deliveries        {by_state('deliveries')}; resend decisions {decisions.get('resend', 0)}, "
              f"delivered decisions {decisions.get('delivered', 0)}")
        print(f"proposals         {by_state('proposals')}")
        action_decisions = ", ".join(f"{d} {n}" for d, n in q(
            "SELECT decision, count(*) FROM action_decisions GROUP BY decision ORDER BY decision")) or "none"
        print(f"actions           {by_state('actions')}; supplier orders {len(self.supplier.orders)}, "
              f"POSTs {sum(1 for m, _ in self.supplier.requests if m == 'POST')}, lookups "
              f"{sum(1 for m, _ in self.supplier.requests if m == 'GET')}; decisions: {action_decisions}")
        print(f"lost              {lost}")
        print(f"duplicated        {figures.get('duplicated', 0)} (silent: delivered twice without a resend decision)")
        print(f"unknown           {unknown} (deliveries awaiting a decision)")
        print(f"failed            {failed_work} work items (visible, with an error report), "
              f"{failed_deliveries} deliveries")
        print(f"refused           {refused} (capacity)")
        for v in violations:
            print(f"VIOLATION         {v}")
        print(f"audit             {verdict}")
        return 0 if not violations else 1


def last_error(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "Exception" in line or "error" in line]
    return (errors[-1] if errors else (lines[-1] if lines else "(no output)")).strip()[:300]
async def amain(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="shopbot-soak-", dir=args.dir))
    async with LocalBotApi(TOKEN) as api, LocalSupplier(SUPPLIER_TOKEN) as supplier:
        soak = Soak(args, work, api, supplier)
        try:
            return await soak.run()
        finally:
            if soak.runner.proc is not None and soak.runner.proc.returncode is None:
                soak.runner.proc.kill()
                await soak.runner.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load and the kills go on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=None, help="stop the load earlier, once this many kills happened")
    parser.add_argument("--factor", type=float, default=20.0, help="simulated seconds per real second")
    parser.add_argument("--arm", type=float, default=0.5, help="share of restarts with an armed fault point")
    parser.add_argument("--fault-bound", type=float, default=3.0,
                        help="seconds an armed process may live before it is SIGKILLed anyway")
    parser.add_argument("--kill-window", type=float, nargs=2, default=(0.8, 3.0), metavar=("MIN", "MAX"),
                        help="an unarmed process is SIGKILLed this many seconds after its start (uniform)")
    parser.add_argument("--message-every", type=float, default=0.6, help="mean seconds between owner messages")
    parser.add_argument("--post-every", type=float, default=1.2, help="mean seconds between posts of each till")
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument("--dir", default=None, help="where the work directory goes (default: the temp dir)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per process")
    pg = parser.add_argument_group("PostgreSQL mode (bench/soak_postgres.py)")
    pg.add_argument("--postgres", nargs="?", const="default", default=None, metavar="URL",
                    help="N processes on a scratch database made on this server (default: $SHOPBOT_TEST_PG_DSN or "
                         "postgresql://postgres@127.0.0.1:5432/postgres), with SIGKILL, SIGSTOP past the lease and "
                         "pg_terminate_backend as the chaos")
    pg.add_argument("--processes", type=int, default=3, help="how many shopbot run processes at a time")
    pg.add_argument("--lease", type=float, default=2.0,
                    help="SHOPBOT_LEASE_S of every process (0: unset, the product's default)")
    pg.add_argument("--chaos-every", type=float, default=5.0,
                    help="at most this many seconds between two chaos events (uniform from a fifth of it)")
    pg.add_argument("--keep", action="store_true", help="keep the scratch database for a look afterwards")
    args = parser.parse_args(argv)
    if args.postgres is not None:
        from bench.soak_postgres import amain as postgres_main
        return asyncio.run(postgres_main(args))
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
