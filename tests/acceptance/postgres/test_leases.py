"""Several real `shopbot run` processes on one PostgreSQL database (C15): K11 (a worker paused past its lease before
its finish, resumed after another process took the turn over), K13 (a worker paused inside its finish transaction
past its lease while another process sweeps: exactly one of finish and expiry commits), K12 (a worker killed
holding a lease, recovered by a live process after expiry; a turn that kills every worker fails at the cap), and a
process starting up beside a live one leaves its turn alone. Waits are on the database clock and on the processes'
records, audited from outside (tests/support/audit.py and `shopbot check`)."""
from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from bot.sandbox.bot_api import LocalBotApi
from tests.support.audit import audit as full_audit
from tests.support.proc import OWNER, Product

TOKEN = "777:lease-token"
LEASE = "1.5"
NO_TELEGRAM = {"TELEGRAM_BOT_TOKEN": ""}   # a worker-only process: the first process polls and relays


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


def product(tmp_path: Path, name: str, api, pg_fresh_url: str, **settings: str) -> Product:  # type: ignore[no-untyped-def]
    folder = tmp_path / name
    folder.mkdir()
    return Product(folder, api, pg_fresh_url, **{"SHOPBOT_LEASE_S": LEASE, **settings})


def owner_texts(api) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.text for m in api.sent if m.chat_id == OWNER]


async def stopped(proc: asyncio.subprocess.Process, timeout: float = 20.0) -> None:
    """Wait until the process froze itself (state T: its fault point's SIGSTOP)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        assert proc.returncode is None, "the process ended instead of stopping"
        await asyncio.sleep(0.05)
    raise AssertionError("the process did not stop at its fault point")


async def audit(first: Product) -> None:
    rc, out = await first.check()
    assert rc == 0, out
    result = full_audit(first.db, [m.text for m in first.api.sent],
                        owner_messages=sum(1 for u in first.api._all_updates.values()
                                           if "message" in u and u["message"]["from"]["id"] == OWNER))
    assert result.ok, result.violations


async def stop_all(*products: Product) -> None:
    for p in products:
        if p.proc is not None and p.proc.returncode is None:
            p.proc.send_signal(signal.SIGCONT)
            await p.stop()


async def test_k11_a_worker_paused_past_its_lease_is_refused_after_another_took_the_turn_over(tmp_path, api,
                                                                                            pg_fresh_url):
    a = product(tmp_path, "a", api, pg_fresh_url, SHOPBOT_FAULT="K6:stop")
    b = product(tmp_path, "b", api, pg_fresh_url, **NO_TELEGRAM)
    api.post_message(OWNER, OWNER, "how much vanilla")
    try:
        await a.start()
        await stopped(a.proc)                                      # after the model call, before its finish
        (run_a,) = a.query("SELECT run_id FROM runs WHERE ended_at IS NULL")[0]
        await a.wait_db(f"SELECT clock_timestamp() > lease_expires_at FROM runs WHERE run_id = '{run_a}'",
                        [(True,)])                                 # expired by the database clock
        await b.start()
        await b.wait_db("SELECT outcome FROM runs ORDER BY started_at", [("expired",), ("finished",)])
        assert a.query("SELECT state, attempts FROM work") == [("finished", 2)]
        os.kill(a.proc.pid, signal.SIGCONT)                        # A resumes: its finish is refused
        await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=20)
        await a.wait_db("SELECT state FROM deliveries", [("confirmed",)])
        # nothing of A's run was written: no report, no operation, no history after its lease lapsed
        assert a.query(f"SELECT count(*) FROM reports WHERE run_id = '{run_a}'") == [(0,)]
        assert a.query(f"SELECT outcome, report_id FROM runs WHERE run_id = '{run_a}'") == [("expired", None)]
        assert a.query("SELECT count(*) FROM history") == [(2,)]  # B's turn: one user and one assistant row
    finally:
        await stop_all(a, b)
    assert len(owner_texts(api)) == 1 and "vanilla on hand" in owner_texts(api)[0]
    assert "lease lost" in a.log.read_text() or "turn discarded" in a.log.read_text()
    await audit(a)


async def test_k13_a_finish_in_flight_past_its_lease_and_a_sweeping_process_exactly_one_commits(tmp_path, api,
                                                                                             pg_fresh_url):
    """The owner is inside its finish transaction (the fence passed, its run row locked) when its lease lapses and
    another process sweeps: the sweep skips the locked run (SKIP LOCKED) and the finish commits; the run is never
    both finished and expired, and the turn is answered once. The other order (the sweeper first) is raced with two
    connections in tests/integration/postgres/test_leases.py."""
    a = product(tmp_path, "a", api, pg_fresh_url, SHOPBOT_FAULT="finish-writes:stop")
    b = product(tmp_path, "b", api, pg_fresh_url)
    api.post_message(OWNER, OWNER, "how much vanilla")
    try:
        await a.start()
        await stopped(a.proc)                                      # inside the finish transaction, fence passed
        (run_a,) = a.query("SELECT run_id FROM runs WHERE ended_at IS NULL")[0]
        await a.wait_db(f"SELECT clock_timestamp() > lease_expires_at FROM runs WHERE run_id = '{run_a}'",
                        [(True,)])                                 # expired by the database clock
        await b.start()                                            # sweeps at start and every half lease
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while "recovery:" not in (b.log.read_text() if b.log.exists() else ""):
            assert loop.time() < deadline, "B did not start"
            await asyncio.sleep(0.05)
        assert "recovery: 0 released, 0 failed" in b.log.read_text()   # its start-up sweep met the locked run
        await a.wait_db(f"SELECT clock_timestamp() > lease_expires_at + interval '{float(LEASE) * 2} s' "
                        f"FROM runs WHERE run_id = '{run_a}'", [(True,)])   # several more sweeps of B meanwhile
        assert a.query(f"SELECT outcome FROM runs WHERE run_id = '{run_a}'") == [(None,)]
        assert a.query("SELECT state, attempts FROM work") == [("running", 1)]
        os.kill(a.proc.pid, signal.SIGCONT)                        # the finish goes on and commits
        await a.wait_db("SELECT state FROM deliveries", [("confirmed",)])
        assert a.query("SELECT outcome FROM runs") == [("finished",)]
        assert a.query("SELECT state, attempts FROM work") == [("finished", 1)]
        assert a.query("SELECT count(*) FROM reports") == [(1,)]
    finally:
        await stop_all(a, b)
    assert len(owner_texts(api)) == 1 and "vanilla on hand" in owner_texts(api)[0]
    await audit(a)


async def test_k12_a_worker_killed_holding_a_lease_is_recovered_by_a_live_process_after_expiry(tmp_path, api,
                                                                                             pg_fresh_url):
    a = product(tmp_path, "a", api, pg_fresh_url)
    b = product(tmp_path, "b", api, pg_fresh_url, **NO_TELEGRAM)
    api.post_message(OWNER, OWNER, "how much vanilla")
    try:
        await a.start("K4")                                        # dies during the model call, holding the lease
        await a.died_at_fault()
        await b.start()
        await b.wait_db("SELECT outcome FROM runs ORDER BY started_at", [("expired",), ("finished",)])
        assert b.query("SELECT state, attempts FROM work") == [("finished", 2)]
        await a.start()                                            # the relay: delivers B's report once
        await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=20)
        await a.wait_db("SELECT state FROM deliveries", [("confirmed",)])
    finally:
        await stop_all(a, b)
    assert len(owner_texts(api)) == 1 and "vanilla on hand" in owner_texts(api)[0]
    await audit(a)


async def test_k12_a_turn_that_kills_every_worker_fails_at_the_cap(tmp_path, api, pg_fresh_url):
    cap = {"SHOPBOT_ATTEMPT_CAP": "2"}
    a = product(tmp_path, "a", api, pg_fresh_url, **cap)
    b = product(tmp_path, "b", api, pg_fresh_url, **NO_TELEGRAM, **cap)
    c = product(tmp_path, "c", api, pg_fresh_url, **NO_TELEGRAM, **cap)
    api.post_message(OWNER, OWNER, "how much vanilla")
    try:
        await a.start("K4")
        await a.died_at_fault()
        await b.start("K4")                                        # takes the turn over after expiry, and dies too
        await b.died_at_fault()
        await c.start()                                            # attempt 2 of 2 expired: failed, visibly
        await c.wait_db("SELECT state, attempts FROM work", [("failed", 2)])
        assert c.query("SELECT outcome FROM runs ORDER BY started_at") == [("expired",), ("expired",)]
        await a.start()
        await api.wait_for(lambda: any("could not do this after 2 attempts" in t for t in owner_texts(api)),
                           timeout=20)
    finally:
        await stop_all(a, b, c)
    assert len(owner_texts(api)) == 1
    await audit(a)


async def test_a_process_starting_up_never_touches_a_live_process_turn(tmp_path, api, pg_fresh_url):
    long_lease = {"SHOPBOT_LEASE_S": "20"}      # A is paused far inside its lease while B starts
    a = product(tmp_path, "a", api, pg_fresh_url, SHOPBOT_FAULT="K3:stop", **long_lease)
    b = product(tmp_path, "b", api, pg_fresh_url, **NO_TELEGRAM, **long_lease)
    api.post_message(OWNER, OWNER, "how much vanilla")
    try:
        await a.start()
        await stopped(a.proc)                                      # holds its claim, before the model call
        await b.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while "recovery:" not in (b.log.read_text() if b.log.exists() else ""):
            assert loop.time() < deadline, "B did not start"
            await asyncio.sleep(0.05)
        assert "recovery: 0 released, 0 failed, 0 deliveries now unknown" in b.log.read_text()
        assert a.query("SELECT state, attempts FROM work") == [("running", 1)]
        assert a.query("SELECT outcome FROM runs") == [(None,)]
        os.kill(a.proc.pid, signal.SIGCONT)
        await a.wait_db("SELECT state FROM deliveries", [("confirmed",)])
        assert a.query("SELECT state, attempts FROM work") == [("finished", 1)]
        assert a.query("SELECT outcome FROM runs") == [("finished",)]
    finally:
        await stop_all(a, b)
    assert len(owner_texts(api)) == 1
    await audit(a)
