"""Real `shopbot` processes for crash tests: started with an environment, killed by their own fault points
(SIGKILL), restarted clean. The local Bot API server runs in the test's event loop and remembers everything."""
from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from store.sqlite.connection import numbered
from tests.support import DATA

OWNER = 1001


def connect_read_only(db: Path | str):   # type: ignore[no-untyped-def]
    """An independent read-only connection: the SQLite file (mode=ro), or the PostgreSQL URL (a read-only session)."""
    if isinstance(db, str):
        import psycopg
        # the server binds the `$1` marks itself, as store/ has it (RawCursor: no `%s`, `%` an ordinary character)
        return psycopg.connect(db, autocommit=True, options="-c default_transaction_read_only=on",
                               cursor_factory=psycopg.RawCursor)
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


# The product's own line once its HTTP server listens (`http.listening`, docs/operations.md), naming the port it bound:
# a test starts it with SHOPBOT_HTTP_PORT=0 and reads the port here. A port picked by the test and handed over
# raced the parallel tests: another process could bind it first, and the product exited with uvicorn's code 3.
LISTENING = re.compile(r"http server listening on \S+?:(\d+)")


def listening_port(log: Path, since: int = 0) -> int | None:
    """The port in the first `http server listening on HOST:PORT` line of `log` past byte `since`, if written yet."""
    try:
        with log.open("rb") as f:
            f.seek(since)
            found = LISTENING.search(f.read().decode(errors="replace"))
    except OSError:
        return None
    return int(found.group(1)) if found else None


def log_size(log: Path) -> int:
    """Where the next start's lines begin in an appended log file."""
    try:
        return log.stat().st_size
    except OSError:
        return 0


async def wait_listening(log: Path, since: int, alive: Callable[[], bool], timeout: float = 30.0,
                         context: Callable[[], str] = lambda: "") -> int:
    """Poll `log` until the process says which port it listens on; fails at once when the process has exited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (port := listening_port(log, since)) is None:
        if not alive():
            raise AssertionError(f"the process exited before its HTTP server listened: {context()}")
        if loop.time() > deadline:
            raise AssertionError(f"no `http server listening` line in {log} after {timeout:g} s: {context()}")
        await asyncio.sleep(0.05)
    return port


class Product:
    def __init__(self, tmp_path: Path, api, db: str | None = None, **settings: str) -> None:   # type: ignore[no-untyped-def]
        self.db: Path | str = db if db else tmp_path / "shop.sqlite3"     # a file path, or a postgresql:// URL
        self.cwd = tmp_path
        self.log = tmp_path / "shopbot.log"
        self.api = api
        self.settings = settings
        self.proc: asyncio.subprocess.Process | None = None
        self.log_mark = 0                  # where the current start's lines begin in `log`

    def env(self, fault: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({
            "SHOPBOT_DB": str(self.db), "TELEGRAM_BOT_TOKEN": self.api._token,
            "TELEGRAM_API_BASE_URL": self.api.base_url, "SHOPBOT_OWNER_IDS": str(OWNER),
            "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0",
            "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml"), "SHOPBOT_LOG_FILE": str(self.log),
            "SHOPBOT_LOG_LEVEL": "INFO",
            # a restart after a kill on PostgreSQL waits out the dead process's leases (C15, C16): short ones here
            "SHOPBOT_LEASE_S": "2",
        })
        env.update(self.settings)   # the calm shop has nothing below its reorder point: no stock checks
        if fault:
            env["SHOPBOT_FAULT"] = f"{fault}:kill"
        return env

    async def start(self, fault: str | None = None, *args: str, **popen: object) -> asyncio.subprocess.Process:
        """`shopbot run`; `popen` overrides the subprocess options (stdout and stderr are pipes by default)."""
        self.log_mark = log_size(self.log)
        options: dict[str, object] = {"stdout": asyncio.subprocess.PIPE, "stderr": asyncio.subprocess.PIPE, **popen}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", *args, env=self.env(fault), cwd=str(self.cwd),
            **options)  # type: ignore[arg-type]
        return self.proc

    async def http_port(self, timeout: float = 30.0) -> int:
        """The port this start's HTTP server bound (started with SHOPBOT_HTTP_PORT=0), once it listens."""
        assert self.proc is not None
        proc = self.proc

        def context() -> str:
            tail = self.log.read_bytes()[self.log_mark:].decode(errors="replace") if self.log.exists() else ""
            return f"exit code {proc.returncode}; its log: {tail[-2000:]}"

        return await wait_listening(self.log, self.log_mark, lambda: proc.returncode is None, timeout, context)

    async def died_at_fault(self, timeout: float = 30.0) -> None:
        assert self.proc is not None
        await asyncio.wait_for(self.proc.wait(), timeout)
        if self.proc.returncode != -signal.SIGKILL:
            out, err = await self.proc.communicate()
            raise AssertionError(f"expected SIGKILL, got {self.proc.returncode}: {err.decode()[-2000:]}")

    async def stop(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            stacks = await self.stacks()    # where it hangs, for the failure's message
            await self.kill()       # a process that ignored SIGTERM never outlives its test (its database is dropped)
            raise AssertionError(f"{self.cwd.name}: still running {timeout:g} s after SIGTERM; killed. Its threads "
                                 f"then:\n{stacks}") from None

    async def stacks(self, timeout: float = 5.0) -> str:
        """Every thread's stack of the running process: SIGUSR1 makes `shopbot run` print them on stderr
        (bot/cli/commands.py `dump_stacks_on_request`); read from its stderr pipe, from the dump's first line. The
        process goes on running."""
        assert self.proc is not None
        if self.proc.stderr is None:
            return "(no stack dump: this process's stderr is not a pipe)"
        try:
            self.proc.send_signal(signal.SIGUSR1)
        except ProcessLookupError:
            return "(no stack dump: the process has just exited)"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = b""
        while b"Current thread 0x" not in seen and loop.time() < deadline:
            try:
                seen += await asyncio.wait_for(self.proc.stderr.read(65536), max(0.0, deadline - loop.time()))
            except TimeoutError:
                break
            if self.proc.stderr.at_eof():
                break
        with contextlib.suppress(TimeoutError):    # the rest of the dump, written in the same signal handler
            while chunk := await asyncio.wait_for(self.proc.stderr.read(65536), 0.2):
                seen += chunk
        text = seen.decode(errors="replace")
        start = text.find("Thread 0x") if "Thread 0x" in text else text.find("Current thread 0x")
        return text[start:] if start >= 0 else f"(no stack dump on stderr; its end: {text[-2000:]})"

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    def query(self, sql: str, *args: object) -> list[tuple]:
        """`sql` with `$1 .. $n` marks for `args` on either store (SQLite binds them as named marks, as store/ does)."""
        conn = connect_read_only(self.db)
        try:
            bound = args if isinstance(self.db, str) else numbered(args)
            return [tuple(r) for r in conn.execute(sql, bound).fetchall()]
        finally:
            conn.close()

    async def wait_db(self, sql: str, expected: list[tuple], timeout: float = 20.0, context=lambda: None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last = None
        while loop.time() < deadline:
            try:
                last = self.query(sql)
                if last == expected:
                    return
            except Exception as exc:   # not created yet (sqlite3 or psycopg: no table, no database file)
                last = str(exc)
            await asyncio.sleep(0.05)
        raise AssertionError(f"{sql!r}: expected {expected}, last saw {last}; context: {context()}")

    async def check(self) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "check", "--db", str(self.db), env=self.env(None),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode() + err.decode()
