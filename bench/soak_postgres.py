"""The soak's PostgreSQL mode (issue 19): `python -m bench.soak --postgres [URL] --processes N --minutes M`.

The load of bench/soak.py (the owner's messages, double taps and button presses, two tills, the accelerated clock,
the network faults of the local Bot API and supplier) against N `shopbot run` processes sharing one scratch
PostgreSQL database (made on the server at URL, dropped at the end unless --keep). Each process start has its own
Bot API root (the server records who polled and who sent what), its own HTTP port (each till post goes to a live
process chosen at random) and its own output file. All clocks derive from one anchor, so every process's
simulated time agrees, and each start passes the time already reached.

Chaos, one event every `--chaos-every` seconds at most (uniform between a fifth of it and all of it): SIGKILL of a
random running process (a new one starts 0.2-2 s later), SIGSTOP of one for 1.2-2.5 leases (then SIGCONT), or
`pg_terminate_backend` of a random connection of the database. At least one process is always left running.

The end: the load and the faults stop, every stopped process is continued, every process is stopped by SIGTERM
(each must exit 0) and N clean ones start with the shop file's per-minute schedule gone; they run until nothing is
open, then SIGTERM (exit 0) and the audit: `shopbot check`, tests/support/audit.py against the servers' records
(0 items in two reports, 0 parts sent twice beyond their resend decisions, 0 supplier orders applied twice, every
item terminal), every till post answered 202 in the store, every owner message and press admitted. A part that
reached the owner more often than its decisions allow, with one copy from a process that had been SIGSTOPped, is
the documented window (a relay frozen between its lease check and the bytes leaving): counted apart, not a
violation; any other is one.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import signal
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from bench.soak import SIM_START, SUPPLIER_TOKEN, TILLS, Soak, iso, pick
from tests.support.audit import IDENTITY
from tests.support.cluster import Cluster, Member

CHAOS = [("kill", 4), ("stop", 3), ("backend", 3)]


class ClusterRunner:
    """The product of the PostgreSQL mode: N processes (tests/support/cluster.py) with the soak's settings."""

    def __init__(self, work: Path, api, supplier, url: str, args: argparse.Namespace) -> None:   # type: ignore[no-untyped-def]
        self.work = work
        self.db = url
        self.shop = work / "shop.toml"
        self.factor = args.factor
        self.sim_reached = SIM_START
        self.anchor: float | None = None
        self.cluster = Cluster(work, api, url, lease_s=args.lease or None, supplier=supplier, shop_file=self.shop,
                               SHOPBOT_SUPPLIER_TOKEN=SUPPLIER_TOKEN, SHOPBOT_TEST_MODE="1",
                               SHOPBOT_TILL_TOKENS=",".join(f"{k}:{v}" for k, v in TILLS.items()),
                               SHOPBOT_DEBOUNCE_MS="300")
        self.starts = 0

    def write_shop(self, *, pulse: bool) -> None:
        from bench.soak import PULSE, SHOP
        text = SHOP.format(stock_cron="*/15 * * * *" if pulse else "0 0 1 1 *", extra=PULSE if pulse else "")
        self.shop.write_text(text)

    def sim_now(self) -> datetime:
        if self.anchor is None:
            return self.sim_reached
        return SIM_START + timedelta(seconds=(time.monotonic() - self.anchor) * self.factor)

    async def start(self, base: str) -> Member:
        if self.anchor is None:
            self.anchor = time.monotonic()
        self.sim_reached = max(self.sim_reached, self.sim_now())
        self.starts += 1
        return await self.cluster.start(base, env={"SHOPBOT_CLOCK": f"accelerated:{iso(self.sim_now())}:"
                                                                   f"{self.factor:g}"})

    def query(self, sql: str, *args: object) -> list[tuple]:  # type: ignore[type-arg]
        return self.cluster.query(sql, *args)

    async def check(self) -> tuple[int, str]:
        return await self.cluster.check()


class PostgresSoak(Soak):
    def __init__(self, args: argparse.Namespace, work: Path, api, supplier, url: str) -> None:   # type: ignore[no-untyped-def]
        self.url = url
        super().__init__(args, work, api, supplier)
        self.chaos = Counter()      # type: ignore[var-annotated]
        self.exits: list[str] = []                # exits nobody asked for
        self.term_codes: list[int] = []           # exit codes of every SIGTERM (must all be 0)
        self.ever_stopped: set[str] = set()
        self.terminated: set[str] = set()         # labels stopped by SIGTERM on purpose
        self.pending_starts: set[asyncio.Task] = set()
        self.window: list[str] = []
        self.target_rng = random.Random(f"{args.seed}-targets")

    def make_runner(self, work: Path) -> ClusterRunner:   # type: ignore[override]
        return ClusterRunner(work, self.api, self.supplier, self.url, self.args)

    @property
    def cluster(self) -> Cluster:
        return self.runner.cluster   # type: ignore[attr-defined, no-any-return]

    def till_url(self) -> str:
        running = [m for m in self.cluster.live() if not m.stopped] or self.cluster.live()
        # a process not yet listening (its port unknown): port 1, where nothing listens, as with none running
        port = (self.target_rng.choice(running).port or 1) if running else 1
        return f"http://127.0.0.1:{port}/till/counts"

    # ---- chaos ----------------------------------------------------------------------------------------------
    def base_of(self, member: Member) -> str:
        return re.sub(r"\d+$", "", member.label)

    def restart_later(self, base: str, delay: float) -> None:
        async def run() -> None:
            await asyncio.sleep(delay)
            await self.runner.start(base)   # type: ignore[attr-defined]
            self.fig.restarts += 1
        task = asyncio.get_running_loop().create_task(run())
        self.pending_starts.add(task)
        task.add_done_callback(self.pending_starts.discard)

    async def lifecycle(self, deadline: float) -> None:
        rng = random.Random(f"{self.args.seed}-chaos")
        loop = asyncio.get_running_loop()
        await self.cluster.migrate()
        for n in range(self.args.processes):
            await self.runner.start(chr(ord("a") + n))   # type: ignore[attr-defined]
        if self.args.lease:
            await self.cluster.wait_leaders(timeout=60)
        else:          # the product's default lease, or code without leader leases: someone polls
            await self.api.wait_for(lambda: bool(self.api.polls), timeout=60)
        watcher = loop.create_task(self.watch())
        every = self.args.chaos_every
        try:
            while loop.time() < deadline:
                await asyncio.sleep(rng.uniform(every / 5, every))
                await self.chaos_event(rng)
                if rng.random() < 0.3:           # the owner decides the held proposals now and then
                    self.release_held(soon=False)
                if self.args.verbose:
                    print(f"[{time.strftime('%H:%M:%S')}] chaos {dict(self.chaos)} messages={self.fig.messages} "
                          f"posts={self.fig.posts} running={[m.label for m in self.cluster.live()]}", flush=True)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await asyncio.gather(*self.pending_starts, return_exceptions=True)

    async def chaos_event(self, rng: random.Random) -> None:
        running = [m for m in self.cluster.live() if not m.stopped]
        event = str(pick(rng, CHAOS))
        if event in ("kill", "stop") and len(running) <= 1:
            event = "backend"
        if event == "kill":
            victim = rng.choice(running)
            await self.cluster.kill(victim)
            self.fig.kills += 1
            self.fig.kills_random += 1
            self.chaos["SIGKILL"] += 1
            self.restart_later(self.base_of(victim), rng.uniform(0.2, 2.0))
        elif event == "stop":
            victim = rng.choice(running)
            self.cluster.pause(victim)
            self.ever_stopped.add(victim.label)
            self.chaos["SIGSTOP"] += 1
            seconds = (self.args.lease or 2.0) * rng.uniform(1.2, 2.5)

            def resume(member: Member = victim) -> None:
                if member.alive and member.stopped:
                    self.cluster.resume(member)
            self.later(seconds, resume)
        else:
            import psycopg
            try:
                with psycopg.connect(self.url, autocommit=True) as admin:
                    pids = [pid for (pid,) in admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                        "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")]
                    if pids:
                        admin.execute("SELECT pg_terminate_backend(%s)", (rng.choice(pids),))
                        self.chaos["pg_terminate_backend"] += 1
                    else:
                        self.chaos["pg_terminate_backend (no connection)"] += 1
            except psycopg.Error as exc:
                self.chaos[f"pg_terminate_backend failed ({type(exc).__name__})"] += 1

    async def watch(self) -> None:
        """A process that exits without being told to is a crash: counted with its last error, and replaced."""
        seen: set[str] = set()
        while True:
            await asyncio.sleep(0.25)
            for member in list(self.cluster.members.values()):
                rc = member.proc.returncode
                if rc is None or member.label in seen:
                    continue
                seen.add(member.label)
                if rc == -signal.SIGKILL or member.label in self.terminated:
                    continue
                from bench.soak import last_error
                self.exits.append(f"{member.label} rc={rc}: {last_error(member.output())}")
                self.fig.crashes.append(f"rc={rc}: {last_error(member.output())}")
                self.restart_later(self.base_of(member), 0.5)

    async def terminate(self, members: list[Member]) -> None:
        """SIGTERM to each once it has finished starting (Cluster.terminate)."""
        for m in members:
            self.terminated.add(m.label)
        codes = await asyncio.gather(*(self.cluster.terminate(m) for m in members))
        self.term_codes += list(codes)

    # ---- the end --------------------------------------------------------------------------------------------
    read_errors = (Exception,)     # the server busy or a connection ended by the chaos: poll again

    def product_gone(self) -> str | None:
        return None if self.cluster.live() else "no process running"

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.load = [loop.create_task(self.owner()), loop.create_task(self.buttons()),
                     loop.create_task(self.faults())]
        self.till_tasks = [loop.create_task(self.till(t)) for t in TILLS]
        try:
            return await self._run(self.load)
        finally:            # on any way out, the load ends (its loops also watch stop_load)
            self.stop_load.set()
            for task in [*self.load, *self.till_tasks, *self.background]:
                task.cancel()
            await asyncio.gather(*self.load, *self.till_tasks, *self.background, return_exceptions=True)

    async def _run(self, load: list[asyncio.Task]) -> int:   # type: ignore[type-arg]
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        self.runner.write_shop(pulse=True)
        deadline = loop.time() + self.args.minutes * 60
        await self.lifecycle(deadline)
        load_seconds = time.monotonic() - started
        await self.quiesce(load)
        self.release_held(soon=True)
        # every process stopped by SIGTERM (continued first if frozen): each must exit 0; then clean ones
        await self.terminate(self.cluster.live())
        self.runner.write_shop(pulse=False)
        for n in range(self.args.processes):
            await self.runner.start(chr(ord("a") + n))   # type: ignore[attr-defined]
            self.fig.restarts += 1
        left = await self.drain(self.args.drain_timeout)
        await self.terminate(self.cluster.live())
        rounds = 1
        while not left and rounds < 3 and any(self.open_things().values()):
            rounds += 1
            for n in range(self.args.processes):
                await self.runner.start(chr(ord("a") + n))   # type: ignore[attr-defined]
            left = await self.drain(self.args.drain_timeout)
            await self.terminate(self.cluster.live())
        for task in self.till_tasks:
            task.cancel()
        await asyncio.gather(*self.till_tasks, return_exceptions=True)
        self.runner.sim_reached = self.runner.sim_now()   # type: ignore[attr-defined]
        rc_term = 0 if all(c == 0 for c in self.term_codes) else next(c for c in self.term_codes if c != 0)
        return await self.report(left, rc_term, rounds, load_seconds, time.monotonic() - started)

    # ---- the report -----------------------------------------------------------------------------------------
    def chaos_lines(self) -> list[str]:
        fig = self.fig
        indent = "\n" + " " * 20
        two = self.api.poll_conflicts
        q = self.runner.query
        again, most = q("SELECT count(*) FILTER (WHERE attempts > 1), coalesce(max(attempts), 0) FROM work "
                        "WHERE kind = 'agent'")[0]
        outcomes = ", ".join(f"{o} {n}" for o, n in q(
            "SELECT coalesce(outcome, 'open'), count(*) FROM runs GROUP BY 1 ORDER BY 1"))
        return [
            f"re-executions     {again} agent items ran more than once (at most {most} attempts; executions may "
            f"repeat after a takeover, effects may not); runs by outcome: {outcomes}",
            f"processes         {self.args.processes} at a time, lease {self.args.lease:g} s; "
            f"{len(self.cluster.members)} process starts",
            "chaos             " + ", ".join(f"{k} {v}" for k, v in sorted(self.chaos.items()))
            + f" (one event every {self.args.chaos_every / 5:g}-{self.args.chaos_every:g} s)",
            f"restarts          {fig.restarts} (final clean drain rounds: {self.rounds})",
            f"SIGTERM           {len(self.term_codes)} processes stopped, exit codes "
            + ", ".join(f"{c} x{n}" for c, n in sorted(Counter(self.term_codes).items())),
            f"crashes           {len(self.exits)} exits nobody asked for"
            + "".join(f"{indent}{n} x {c}" for c, n in Counter(self.exits).most_common(5)),
            f"window            {len(self.window)} part(s) sent again by a process resumed after SIGSTOP "
            "(the documented window, counted apart)" + "".join(f"{indent}{w}" for w in self.window[:10]),
            f"pollers           {len(self.api.polls)} getUpdates, {len(two)} ended by a newer one while their "
            "client still listened (conflicts: " + ", ".join(
                f"{p.client}<-{p.terminated_by}" for p in two[:10]) + ")",
        ]

    def classify(self, violations: list[str], result) -> None:   # type: ignore[no-untyped-def]
        """Parts beyond their resend decisions with a copy from a process that had been SIGSTOPped: the window."""
        senders: dict[tuple[str, int], list[str]] = {}
        for m in self.api.sent:
            match = IDENTITY.search(m.text)
            if match:
                senders.setdefault((match.group(1), int(match.group(2) or 1)), []).append(m.client)
        self.window = []
        for v in list(violations):
            match = re.match(r"(r\d+\.\d+) part (\d+) reached the owner", v)
            if not match:
                continue
            clients = senders.get((match.group(1), int(match.group(2))), [])
            if len(set(clients)) > 1 and self.ever_stopped & set(clients):
                violations.remove(v)
                self.window.append(f"{v} (sent by {clients})")
        if self.api.poll_conflicts:
            violations.append(f"{len(self.api.poll_conflicts)} getUpdates ended by a newer one while their client "
                              "still listened: two pollers at once")
        if self.exits:
            violations.append(f"{len(self.exits)} process exit(s) nobody asked for: {self.exits[:3]}")


async def amain(args: argparse.Namespace) -> int:
    import tempfile

    from bench.common import scratch_pg_database
    from bench.soak import TOKEN
    from bot.sandbox.bot_api import LocalBotApi
    from bot.sandbox.supplier import LocalSupplier
    work = Path(tempfile.mkdtemp(prefix="shopbot-soak-pg-", dir=args.dir))
    dsn = None if args.postgres in (None, "", "default") else args.postgres
    with scratch_pg_database(dsn, "soak", keep=args.keep) as url:
        async with LocalBotApi(TOKEN) as api, LocalSupplier(SUPPLIER_TOKEN) as supplier:
            soak = PostgresSoak(args, work, api, supplier, url)
            try:
                return await soak.run()
            finally:
                await soak.cluster.kill_all()
