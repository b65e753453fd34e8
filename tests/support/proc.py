"""Real `shopbot` processes for crash tests: started with an environment, killed by their own fault points
(SIGKILL), restarted clean. The local Bot API server runs in the test's event loop and remembers everything."""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

from tests.support import DATA

OWNER = 1001


def connect_read_only(db: Path | str):   # type: ignore[no-untyped-def]
    """An independent read-only connection: the SQLite file (mode=ro), or the PostgreSQL URL (a read-only session)."""
    if isinstance(db, str):
        import psycopg
        conn = psycopg.connect(db, autocommit=True, options="-c default_transaction_read_only=on")
        return conn
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


class Product:
    def __init__(self, tmp_path: Path, api, db: str | None = None, **settings: str) -> None:   # type: ignore[no-untyped-def]
        self.db: Path | str = db if db else tmp_path / "shop.sqlite3"     # a file path, or a postgresql:// URL
        self.cwd = tmp_path
        self.log = tmp_path / "shopbot.log"
        self.api = api
        self.settings = settings
        self.proc: asyncio.subprocess.Process | None = None

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

    async def start(self, fault: str | None = None, *args: str) -> asyncio.subprocess.Process:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", *args, env=self.env(fault), cwd=str(self.cwd),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return self.proc

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
            await self.kill()       # a process that ignored SIGTERM never outlives its test (its database is dropped)
            raise AssertionError(f"{self.cwd.name}: still running {timeout:g} s after SIGTERM; killed") from None

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    def query(self, sql: str, *args: object) -> list[tuple]:
        conn = connect_read_only(self.db)
        try:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s") if isinstance(self.db, str) else sql,
                                                   args).fetchall()]
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
