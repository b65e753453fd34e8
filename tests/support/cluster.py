"""Several real `shopbot run` processes on one PostgreSQL database behind one local Bot API (and supplier), for the
multi-process tests (tests/acceptance/postgres), the failover benchmark and the PostgreSQL soak.

Each process start is a `Member` with its own label: the Bot API root it is given is `api.url_for(label)`, so every
`getUpdates` and `sendMessage` the server records names the process start that made it; its HTTP server listens on
its own port (tills may post to any process); its output goes to its own file. A restarted process is a new member
with a new label (a new holder in the database, as every process start is).

Everything is judged from outside: the server's records, the database on an independent read-only connection, the
processes' exit codes. Waits poll with a deadline; a lease is waited out on the database clock, never by sleeping.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import DATA
from tests.support.proc import OWNER, connect_read_only, listening_port, wait_listening

LEASES = ("poller", "relay", "producers", "actions")   # the leader leases (C16)


@dataclass
class Member:
    label: str
    proc: asyncio.subprocess.Process
    log: Path                        # its own log file (one per label, so one per process start)
    out: Path
    fault: str | None
    started: float = field(default_factory=time.monotonic)
    stopped: bool = False            # SIGSTOPped and not yet continued
    _port: int | None = None

    @property
    def port(self) -> int | None:
        """The port its HTTP server bound (each start binds a free one, SHOPBOT_HTTP_PORT=0, and logs it), None
        until it listens. `Cluster.wait_port` waits for it."""
        if self._port is None:
            self._port = listening_port(self.log)
        return self._port

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def output(self) -> str:
        try:
            return self.out.read_text(errors="replace")
        except OSError:
            return ""


class Cluster:
    """`shopbot run` processes sharing `db` (a postgresql:// URL) and the servers `api` (and `supplier`)."""

    def __init__(self, work: Path, api: Any, db: str, *, lease_s: float | None = 2.0, supplier: Any = None,
                 shop_file: Path | None = None, **settings: str) -> None:
        self.work = work
        self.api = api
        self.db = db
        self.lease_s = lease_s
        self.supplier = supplier
        self.shop_file = shop_file or DATA / "shop_calm.toml"
        self.settings = settings
        self.members: dict[str, Member] = {}
        self._numbers: dict[str, int] = {}

    # ---- processes -------------------------------------------------------------------------------------------
    def env(self, label: str, port: int, fault: str | None) -> dict[str, str]:
        """A process's environment; `port` 0 binds a free one (no port picked here can be taken by a parallel test
        before the process binds it), -1 runs no HTTP server."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({
            "SHOPBOT_DB": self.db, "TELEGRAM_BOT_TOKEN": self.api._token,
            "TELEGRAM_API_BASE_URL": self.api.url_for(label), "SHOPBOT_OWNER_IDS": str(OWNER),
            "SHOPBOT_HTTP_HOST": "127.0.0.1", "SHOPBOT_HTTP_PORT": str(port), "SHOPBOT_DEBOUNCE_MS": "0",
            "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SHOP_FILE": str(self.shop_file),
            "SHOPBOT_LOG_FILE": str(self.work / f"{label}.log"), "SHOPBOT_LOG_LEVEL": "INFO",
        })
        if self.lease_s is not None:             # None: the product's default
            env["SHOPBOT_LEASE_S"] = f"{self.lease_s:g}"
        if self.supplier is not None:
            env.update({"SHOPBOT_SUPPLIER_URL": self.supplier.base_url,
                        "SHOPBOT_SUPPLIER_TOKEN": self.supplier_token})
        env.update(self.settings)
        if fault:
            env["SHOPBOT_FAULT"] = fault
        return env

    supplier_token = "cluster-supplier-token"

    def next_label(self, base: str) -> str:
        """"a", then "a2", "a3" ... for each restart of the process named `base`."""
        n = self._numbers.get(base, 0) + 1
        self._numbers[base] = n
        return base if n == 1 else f"{base}{n}"

    async def start(self, base: str, fault: str | None = None, env: dict[str, str] | None = None) -> Member:
        """Start a process named after `base` (its n-th start is labelled `base` + n); `fault` is SHOPBOT_FAULT
        (e.g. "K3:stop"); `env` adds settings for this start only."""
        label = self.next_label(base)
        out = self.work / f"{label}.out"
        environment = self.env(label, 0, fault)
        environment.update(env or {})
        with out.open("ab") as sink:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.cli", "run", env=environment, cwd=str(self.work),
                stdout=sink, stderr=sink)
        member = Member(label, proc, self.work / f"{label}.log", out, fault)
        self.members[label] = member
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive]

    def by_pid(self, pid: int) -> Member | None:
        return next((m for m in self.members.values() if m.pid == pid), None)

    async def wait_port(self, member: Member, timeout: float = 30.0) -> int:
        """The port `member`'s HTTP server listens on, once it does."""
        return await wait_listening(member.log, 0, lambda: member.alive, timeout, self.describe)

    def running(self, member: Member) -> bool:
        """The process finished starting: its log says `shopbot running`."""
        try:
            return "shopbot running" in member.log.read_text(errors="replace")
        except OSError:
            return False

    async def wait_running(self, member: Member, timeout: float = 30.0) -> None:
        await self.wait_until(lambda: self.running(member) or not member.alive, timeout, f"{member.label} running")

    async def kill(self, member: Member) -> int:
        if member.alive:
            member.proc.send_signal(signal.SIGKILL)
        return await member.proc.wait()

    def pause(self, member: Member) -> None:
        member.proc.send_signal(signal.SIGSTOP)
        member.stopped = True

    def resume(self, member: Member) -> None:
        member.proc.send_signal(signal.SIGCONT)
        member.stopped = False

    async def terminate(self, member: Member, timeout: float = 20.0) -> int:
        """SIGTERM (a stopped process is continued first) once it has finished starting: a signal during the
        interpreter's own start-up, before the product installed its handler, ends it with -15 whatever the product
        does. The exit code, or -999 if it had to be killed."""
        if not member.alive:
            return member.proc.returncode or 0
        if member.stopped:
            self.resume(member)
        with contextlib.suppress(AssertionError):
            await self.wait_running(member, timeout)
        member.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(member.proc.wait(), timeout)
        except TimeoutError:
            await self.kill(member)
            return -999

    async def terminate_all(self, timeout: float = 20.0) -> dict[str, int]:
        live = self.live()
        codes = await asyncio.gather(*(self.terminate(m, timeout) for m in live))
        return {m.label: rc for m, rc in zip(live, codes, strict=True)}

    async def kill_all(self) -> None:
        for member in self.live():
            with contextlib.suppress(ProcessLookupError):
                if member.stopped:
                    self.resume(member)
                await self.kill(member)

    # ---- the database, from outside --------------------------------------------------------------------------
    def query(self, sql: str, *args: object) -> list[tuple]:  # type: ignore[type-arg]
        """`sql` with `$1 .. $n` marks for `args`."""
        conn = connect_read_only(self.db)
        try:
            # `$1 .. $n` marks bound by the server (connect_read_only's RawCursor): a literal % needs no escaping
            return [tuple(r) for r in conn.execute(sql, args or None).fetchall()]
        finally:
            conn.close()

    def leaders(self) -> dict[str, tuple[str, int, Member | None]]:
        """The unexpired leader leases (database clock): name -> (holder, generation, the member holding it)."""
        rows = self.query(
            "SELECT l.name, l.holder, l.generation, p.pid FROM leader_leases l LEFT JOIN processes p USING (holder) "
            "WHERE l.expires_at > clock_timestamp()")
        return {name: (holder, int(gen), self.by_pid(pid) if pid is not None else None)
                for name, holder, gen, pid in rows}

    def holder_of(self, member: Member) -> str | None:
        rows = self.query("SELECT holder FROM processes WHERE pid = $1 ORDER BY started_at DESC LIMIT 1", member.pid)
        return rows[0][0] if rows else None

    async def wait_until(self, predicate: Callable[[], Any], timeout: float, what: str,
                         every: float = 0.05) -> Any:
        """Poll `predicate` (a database read may fail while a schema is being made) until it is truthy."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: object = None
        while loop.time() < deadline:
            try:
                last = predicate()
                if last:
                    return last
            except Exception as exc:   # not migrated yet, a connection refused while the server is busy
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(every)
        raise AssertionError(f"{what}: not true after {timeout} s (last: {last}); {self.describe()}")

    async def wait_leaders(self, names: Iterable[str] | None = None, *, among: Iterable[Member] | None = None,
                           timeout: float = 20.0) -> dict[str, Member]:
        """Every lease in `names` (default: every singleton these processes run; the action relay only with a
        supplier) held, unexpired, by a live member (of `among`, when given)."""
        names = tuple(names) if names is not None else LEASES if self.supplier is not None else LEASES[:3]
        allowed = {m.label for m in among} if among is not None else None

        def held() -> dict[str, Member] | None:
            leaders = self.leaders()
            found = {}
            for name in names:
                entry = leaders.get(name)
                if entry is None or entry[2] is None or not entry[2].alive:
                    return None
                if allowed is not None and entry[2].label not in allowed:
                    return None
                found[name] = entry[2]
            return found

        return await self.wait_until(held, timeout, f"leases {names} held")  # type: ignore[no-any-return]

    async def wait_expired(self, sql: str, *args: object, timeout: float = 20.0) -> None:
        """Until `sql` (selecting one timestamptz) is in the past on the database clock."""
        await self.wait_until(lambda: self.query(f"SELECT ({sql}) <= clock_timestamp()", *args)[0][0] is True,
                              timeout, f"expired: {sql}")

    async def migrate(self) -> None:
        """`shopbot migrate` as a process: an empty database made ready before the processes start (K18, several
        processes starting on an empty database at once, is its own test)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "migrate", "--db", self.db, env=self.env("migrate", -1, None),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, (out + err).decode()[-2000:]

    async def check(self) -> tuple[int, str]:
        """`shopbot check` as a process."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "check", "--db", self.db, env=self.env("check", -1, None),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode() + err.decode()

    async def status_json(self) -> Any:
        import json
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "status", "--json", "--db", self.db, env=self.env("status", -1, None),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()[-2000:]
        return json.loads(out)

    def describe(self) -> str:
        parts = []
        for m in self.members.values():
            state = "alive" if m.alive else f"exited {m.proc.returncode}"
            tail = m.output().strip().splitlines()[-3:]
            parts.append(f"{m.label}(pid {m.pid}, {state}{', stopped' if m.stopped else ''}): {tail}")
        return "; ".join(parts)


# ---- what the Bot API server saw -------------------------------------------------------------------------------
@dataclass
class Takeover:
    """One poller failover as the server saw it: the old leader's last poll, the new leader's first."""
    old: str
    new: str
    event_at: float          # monotonic time of the SIGKILL / SIGTERM
    old_last_ended: float    # when the server saw the old leader's last poll end (answered, or its client gone)
    new_first: float         # arrival of the new leader's first poll

    @property
    def gap(self) -> float:
        """The old leader's last poll to the new leader's first: no poller in between."""
        return self.new_first - self.old_last_ended

    @property
    def since_event(self) -> float:
        return self.new_first - self.event_at


async def takeover(api: Any, old: Member, event_at: float, timeout: float) -> Takeover:
    """Wait for the first poll after `event_at` from a client other than `old`; the failover it ends."""
    def first_new() -> Any:
        return next((p for p in api.polls if p.client != old.label and p.arrived >= event_at), None)

    await api.wait_for(lambda: first_new() is not None, timeout=timeout)
    new = first_new()
    mine = api.polls_by(old.label)
    # the old leader's last poll has ended by now (killed: its connection closed; stopped: it resigned first)
    await api.wait_for(lambda: all(p.ended is not None for p in mine), timeout=5)
    last_end = max((p.ended for p in mine if p.ended is not None), default=event_at)
    return Takeover(old.label, new.client, event_at, last_end, new.arrived)


def overlaps(api: Any, since: float = 0.0) -> list[Any]:
    """Polls ended with 409 by a newer poll while their own client still listened (two pollers at once)."""
    return [p for p in api.poll_conflicts if p.arrived >= since]
