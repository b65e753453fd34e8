"""A real `shopbot run` on a real PostgreSQL whose connection the server ends while it starts (a server restart,
`pg_terminate_backend`, a network drop): the start runs that step again on a fresh connection, says so in one line,
and comes up; it never exits on it (the PostgreSQL soak saw processes exit at start on exactly this).

The process freezes itself inside its start's seeding transaction (`SHOPBOT_FAULT=seed:stop`, after the items,
before the seeded mark), the test ends that transaction's connection from the server's side, then continues it."""
from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psycopg
import pytest

from bot.sandbox.bot_api import LocalBotApi
from tests.support import DATA
from tests.support.proc import OWNER, Product

TOKEN = "779:start-token"
ITEMS = DATA.joinpath("shop_calm.toml").read_text().count("[items.")


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


def frozen(proc: asyncio.subprocess.Process) -> bool:
    try:
        return Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except FileNotFoundError:         # it ended (and was reaped)
        return False


async def until(predicate, what: str, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def end_its_transaction(db: str, pid: int) -> int:
    """pg_terminate_backend of the process's connection that is inside a transaction (its frozen seeding), waited
    out until the server process has gone (the termination is asynchronous)."""
    with psycopg.connect(db, autocommit=True) as admin:
        frozen_in = admin.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE application_name LIKE %s AND state = 'idle in transaction'",
            (f"shopbot {pid}.%",)).fetchall()
        # frozen exactly at its fault point: the seeding's last statement is its items' last stock event (the stop
        # is taken by the database thread that reached the point, store/faults.py, not a statement later)
        assert all(query.startswith("INSERT INTO stock_events") for _, query in frozen_in), frozen_in
        ended = [backend for backend, _ in frozen_in]
        for backend in ended:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        await until(lambda: not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                              (ended,)).fetchone()[0], "the ended connection's server process to go")
    return len(ended)


async def started_after_its_connection_was_ended(p: Product) -> str:
    """The process froze in its seeding, its connection was ended, it was continued: it must come up and stay up,
    having said why it repeated the step in one line and printed no traceback. Returns its log."""
    assert p.proc is not None
    await until(lambda: frozen(p.proc) or p.proc.returncode is not None, "the process to freeze in its seeding")
    if p.proc.returncode is not None:
        _, err = await p.proc.communicate()
        raise AssertionError(f"the start exited {p.proc.returncode} in its seeding: {err.decode()[-1500:]}")
    assert await end_its_transaction(str(p.db), p.proc.pid) == 1
    p.proc.send_signal(signal.SIGCONT)
    await until(lambda: p.proc.returncode is not None or (
        p.log.exists() and "shopbot running" in p.log.read_text()), "shopbot running (or its exit)")
    if p.proc.returncode is not None:
        _, err = await p.proc.communicate()
        raise AssertionError(f"the start exited {p.proc.returncode} after its connection was ended: "
                             f"{err.decode()[-1500:]}")
    return p.log.read_text()


async def test_a_connection_ended_while_the_process_starts_is_said_once_and_the_step_runs_again(tmp_path, api,
                                                                                                 pg_fresh_url):
    p = Product(tmp_path, api, pg_fresh_url, SHOPBOT_FAULT="seed:stop")
    await p.start()
    try:
        log = await started_after_its_connection_was_ended(p)
        said = [line for line in log.splitlines() if "database connection lost while seeding the shop" in line]
        assert len(said) == 1 and "terminating connection due to administrator command" in said[0], said
        assert "Traceback" not in log
        # the shop was seeded once, by the step run again (the first one's items were rolled back with it)
        assert p.query("SELECT count(*) FROM stock_events WHERE kind = 'seed'") == [(ITEMS,)]
        assert p.query("SELECT count(*) FROM shop_meta WHERE key = 'seeded_from'") == [(1,)]
        api.post_message(OWNER, OWNER, "how much vanilla")          # and it works
        await api.wait_for(lambda: any("vanilla" in m.text for m in api.sent if m.chat_id == OWNER), timeout=20)
    finally:
        rc = await p.stop()
    assert rc == 0
    assert "Traceback" not in (await p.proc.stderr.read()).decode()   # type: ignore[union-attr]


async def test_negative_control_a_start_that_dies_in_the_same_place_is_caught(tmp_path, api, pg_fresh_url):
    """The check above fails for a start that does not survive: here the seeding raises an error of its own at the
    same line (not a lost connection, so nothing runs it again) and the process exits."""
    p = Product(tmp_path, api, pg_fresh_url, SHOPBOT_FAULT="seed:raise")
    await p.start()
    try:
        with pytest.raises(AssertionError, match="(?s)the start exited 1 in its seeding: .*FaultInjected"):
            await started_after_its_connection_was_ended(p)
    finally:
        await p.kill()
