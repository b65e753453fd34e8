"""K14, K15, K18 (C16) with real `shopbot run` processes on a real PostgreSQL behind one fake Bot API, audited from
outside: the database (leases, processes, deliveries), the fake's record of which process made each Bot API call
(each process's base URL ends in its own `/<caller>`), and the processes' own exit codes.

A process is paused with `SHOPBOT_FAULT=<point>:stop` (it SIGSTOPs itself there) and resumed with SIGCONT once its
lease has lapsed on the database clock; nothing here sleeps and hopes: every wait polls a condition with a deadline."""
from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from bot.sandbox.bot_api import LocalBotApi
from tests.support.audit import audit as full_audit
from tests.support.proc import OWNER, Product

TOKEN = "778:leader-token"
LEASE = "2"


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


def product(tmp_path: Path, api: LocalBotApi, db: str, caller: str, **settings: str) -> Product:
    where = tmp_path / caller
    where.mkdir()
    return Product(where, api, db, TELEGRAM_API_BASE_URL=f"{api.base_url}/{caller}", SHOPBOT_LEASE_S=LEASE,
                   **settings)


async def until(predicate, what: str, timeout: float = 20.0, *products: Product) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        for p in products:
            if p.proc is not None and p.proc.returncode is not None:
                _, err = await p.proc.communicate()
                raise AssertionError(f"{p.cwd.name} exited {p.proc.returncode} while waiting for {what}: "
                                     f"{err.decode()[-2000:]}")
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def holder_of(p: Product) -> str | None:
    assert p.proc is not None
    try:
        rows = p.query("SELECT holder FROM processes WHERE pid = $1", p.proc.pid)
    except Exception:        # the tables do not exist yet (still migrating)
        return None
    return rows[0][0] if rows else None


def leases(p: Product) -> dict[str, tuple[str, int, bool]]:
    """name -> (holder, generation, current on the database clock)."""
    return {name: (holder, generation, current) for name, holder, generation, current in p.query(
        "SELECT name, holder, generation, expires_at > clock_timestamp() FROM leader_leases")}


def leads(p: Product, *names: str) -> bool:
    try:
        mine, held = holder_of(p), leases(p)
    except Exception:        # the tables do not exist yet (still migrating)
        return False
    return mine is not None and all(held.get(n, ("", 0, False))[0] == mine and held[n][2] for n in names)


def stopped(p: Product) -> bool:
    assert p.proc is not None
    return Path(f"/proc/{p.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def calls(api: LocalBotApi, caller: str, method: str, upto: int | None = None) -> list[dict]:
    """The parameters of every `method` call `caller` made (among the first `upto` calls the fake recorded)."""
    return [params for who, name, params, _ in api.by_caller[:upto] if who == caller and name == method]


def owner_texts(api: LocalBotApi) -> list[str]:
    return [m.text for m in api.sent if m.chat_id == OWNER]


async def audit(p: Product, owner_messages: int) -> None:
    rc, out = await p.check()
    assert rc == 0, out
    result = full_audit(p.db, [m.text for m in p.api.sent], owner_messages=owner_messages)
    assert result.ok, result.violations


async def stop_all(*products: Product) -> list[int]:
    for p in products:
        if p.proc is not None and p.proc.returncode is None:
            p.proc.send_signal(signal.SIGCONT)
    return [await p.stop() for p in products]


async def cli(p: Product, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.cli", *args, "--db", str(p.db),
                                                env=p.env(None), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def leader_and_standby(tmp_path: Path, api: LocalBotApi, db: str, fault: str) -> tuple[Product, Product]:
    """`a` (armed with `fault`) started first and leading every singleton, then `b` running as its standby."""
    a = product(tmp_path, api, db, "a", SHOPBOT_FAULT=fault)
    b = product(tmp_path, api, db, "b")
    await a.start()
    await until(lambda: leads(a, "poller", "relay", "producers"), "a to lead", 20, a)
    await b.start()
    await until(lambda: holder_of(b) is not None, "b to run as a standby", 20, b)
    return a, b


async def test_k14_a_poller_paused_past_its_lease_has_its_admission_refused(tmp_path, api, pg_fresh_url):
    a, b = await leader_and_standby(tmp_path, api, pg_fresh_url, "K1:stop")
    try:
        api.post_message(OWNER, OWNER, "how much vanilla")
        await until(lambda: stopped(a), "a frozen after getUpdates returned, before its admission (K1)")
        assert a.query("SELECT count(*) FROM work") == [(0,)]
        # the standby takes the lapsed lease over (database clock), polls, gets the unconfirmed update again
        await until(lambda: leads(b, "poller"), "b to take the poller lease over")
        await api.wait_for(lambda: len(owner_texts(api)) == 1, timeout=20)
        a.proc.send_signal(signal.SIGCONT)   # type: ignore[union-attr]
        # the stale poller stops: its fenced admission refused, or its task cancelled by the demotion while that
        # admission (refused by the database either way) was in flight
        await until(lambda: any(line in a.log.read_text() for line in (
            "admission refused by the poller lease fence", "leader demoted name=poller")), "a's poller to stop")
        await api.wait_for(lambda: len(calls(api, "b", "getUpdates")) > 0, timeout=5)
        seen = len(api.by_caller)
        await until(lambda: len([c for c in api.by_caller[seen:] if c[0] == "b" and c[1] == "getUpdates"]) >= 3,
                    "b to keep polling")
    finally:
        codes = await stop_all(a, b)
    assert codes == [0, 0]
    a_polls = calls(api, "a", "getUpdates")
    assert a_polls and all("offset" not in c for c in a_polls)      # a never passed an offset: it confirmed nothing
    assert len(owner_texts(api)) == 1 and "vanilla" in owner_texts(api)[0]   # one reply, from b
    assert calls(api, "a", "sendMessage") == []
    assert "batch admitted" not in a.log.read_text()                  # a's admission never committed
    assert a.query("SELECT source, state FROM work") == [(f"tg:{OWNER}:1", "finished")]
    assert a.query("SELECT count(*) FROM reports") == [(1,)]
    await audit(a, owner_messages=1)


async def test_a_leader_frozen_inside_its_relays_fenced_look_loses_the_relay_to_the_standby(tmp_path, api,
                                                                                             pg_fresh_url):
    """K14's flake made exact. Every look of the relay is a fenced write (`take_due`: the lease row FOR SHARE), so a
    leader frozen at a random moment (K14 freezes it at K1) is often frozen inside one; the standby then waited for
    that row lock on every acquire, and no reply went out until the frozen process was continued. Here the leader
    freezes inside its relay's first look (`take-due:stop`): the server ends that transaction after FROZEN_MS
    (store/postgres/leadership.py), the standby takes the relay over and answers; the resumed leader sends
    nothing."""
    a = product(tmp_path, api, pg_fresh_url, "a", SHOPBOT_FAULT="take-due:stop")
    b = product(tmp_path, api, pg_fresh_url, "b")
    await a.start()
    try:
        await until(lambda: stopped(a), "a frozen inside its relay's fenced look", 30, a)
        assert leases(a)["relay"][0] == holder_of(a)
        await b.start()
        api.post_message(OWNER, OWNER, "how much vanilla")
        await until(lambda: leads(b, "relay"), "b to take the relay lease over while a stays frozen", 30, b)
        await api.wait_for(lambda: len(owner_texts(api)) == 1, timeout=20)
        a.proc.send_signal(signal.SIGCONT)   # type: ignore[union-attr]
        await until(lambda: "leader demoted name=relay" in a.log.read_text(), "a's relay to stop")
    finally:
        codes = await stop_all(a, b)
    assert codes == [0, 0]
    assert len(owner_texts(api)) == 1 and "vanilla" in owner_texts(api)[0]
    assert calls(api, "a", "sendMessage") == []
    await audit(a, owner_messages=1)


async def test_k15_a_relay_paused_after_sending_is_left_alone_until_its_lease_lapsed_then_unknown(
        tmp_path, api, pg_fresh_url):
    a, b = await leader_and_standby(tmp_path, api, pg_fresh_url, "K7:stop")
    try:
        a_holder = holder_of(a)
        api.post_message(OWNER, OWNER, "stock")
        await until(lambda: stopped(a), "a frozen after `sending` committed (K7)")
        [(sender,)] = a.query("SELECT sender FROM deliveries WHERE state = 'sending'")
        assert sender.startswith(f"{a_holder}/")
        # While a's relay lease is current nobody touches its part; sampled on the database clock until it lapses.
        samples = []
        while True:
            [(state, current)] = a.query(
                "SELECT d.state, l.holder = $1 AND l.expires_at > clock_timestamp() FROM deliveries d "
                "JOIN leader_leases l ON l.name = 'relay'", a_holder)
            samples.append((state, current))
            if not current:
                break
            await asyncio.sleep(0.02)
        assert all(state == "sending" for state, current in samples if current), samples
        await a.wait_db("SELECT state FROM deliveries WHERE report_id = 'r1.1'", [("unknown",)])
        await until(lambda: leads(b, "relay"), "b to take the relay lease over")
        await api.wait_for(lambda: any("may not have delivered" in t for t in owner_texts(api)), timeout=20)
        a.proc.send_signal(signal.SIGCONT)   # type: ignore[union-attr]
        # the resumed relay's in-process lease check refuses the send it was about to make
        await until(lambda: "leader demoted name=relay" in a.log.read_text(), "a's relay to stop")
        assert sum(t.endswith("r1.1") for t in owner_texts(api)) == 0      # never sent without a decision
        notice = next(m for m in api.sent if "may not have delivered" in m.text)
        api.post_callback(OWNER, OWNER, notice.reply_markup["inline_keyboard"][0][0]["callback_data"],
                          notice.message_id)
        await a.wait_db("SELECT state FROM deliveries WHERE report_id = 'r1.1'", [("confirmed",)])
    finally:
        codes = await stop_all(a, b)
    assert codes == [0, 0]
    assert sum(t.endswith("r1.1") for t in owner_texts(api)) == 1          # once, after the recorded Resend
    assert [c for c in calls(api, "a", "sendMessage") if "r1.1" in str(c.get("text"))] == []
    assert a.query("SELECT decision FROM resolutions") == [("resend",)]
    await audit(a, owner_messages=1)


async def test_k18_two_processes_started_at_once_on_an_empty_database(tmp_path, api, pg_empty_url):
    from bot.sandbox.supplier import LocalSupplier
    async with LocalSupplier("supplier-token") as supplier:
        supplier_env = {"SHOPBOT_SUPPLIER_URL": supplier.base_url, "SHOPBOT_SUPPLIER_TOKEN": "supplier-token"}
        a = product(tmp_path, api, pg_empty_url, "a", **supplier_env)
        b = product(tmp_path, api, pg_empty_url, "b", **supplier_env)
        await asyncio.gather(a.start(), b.start())
        names = ("poller", "relay", "producers", "actions")
        try:
            await until(lambda: holder_of(a) is not None and holder_of(b) is not None, "both processes up", 30,
                        a, b)
            await until(lambda: set(leases(a)) == set(names) and all(c for _, _, c in leases(a).values()),
                        "every lease held")
            holders = {holder_of(a): "a", holder_of(b): "b"}
            first = leases(a)
            assert {h for h, _, _ in first.values()} <= set(holders)
            for i in range(3):      # one at a time: messages of one chat waiting together make one turn (C5)
                api.post_message(OWNER, OWNER, f"how much vanilla {i}")
                await api.wait_for(lambda n=i + 1: len(owner_texts(api)) == n, timeout=30)
            await a.wait_db("SELECT count(*) FROM deliveries WHERE state = 'confirmed'", [(3,)])
            assert leases(a) == first                 # one leader per lease the whole time: no takeover
            shown = json.loads(await cli(a, "status", "--json"))
            assert {r["holder"] for r in shown["processes"]} == set(holders)
            assert {r["pid"] for r in shown["processes"]} == {a.proc.pid, b.proc.pid}   # type: ignore[union-attr]
            assert {(r["name"], r["holder"], r["generation"]) for r in shown["leases"]} == \
                {(n, h, g) for n, (h, g, _) in first.items()} and all(r["expires_in_s"] > 0 for r in shown["leases"])
            text = await cli(a, "status")
            assert all(f"leader     {n}" in text for n in names) and text.count("process    ") == 2
            running = len(api.by_caller)            # after this the first to stop hands its leases to the other
        finally:
            codes = await stop_all(a, b)
        assert codes == [0, 0]
        versions = a.query("SELECT version FROM schema_migrations ORDER BY version")
        assert len(versions) == len(set(versions))          # each migration applied once
        poller = holders[first["poller"][0]]
        relay = holders[first["relay"][0]]
        other_poller = "b" if poller == "a" else "a"
        other_relay = "b" if relay == "a" else "a"
        assert calls(api, poller, "getUpdates", running)                                          # one poller
        assert calls(api, other_poller, "getUpdates", running) == []
        assert calls(api, other_relay, "sendMessage", running) == []                              # one sender
        assert a.query("SELECT count(*) FROM deliveries WHERE state = 'unknown'") == [(0,)]     # nothing recovered
        assert sorted(a.query("SELECT state FROM work")) == [("finished",)] * 3
        await audit(a, owner_messages=3)
