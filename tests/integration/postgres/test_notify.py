"""LISTEN/NOTIFY as a hint (C16): migration 0014's triggers notify at commit exactly for what a waiting part looks
for; the listener sets the matching signal, survives the loss of its connection (pg_terminate_backend of its
backend, found by application_name), reconnects and scans, so nothing committed meanwhile waits for a notification
that was lost."""
from __future__ import annotations

import asyncio

import psycopg
import pytest

from store import ManualClock, Occurrence, ReportDraft, WorkKind, open_store
from store.postgres.notify import Listener, application_name
from store.signals import Signals

START = __import__("datetime").datetime(2027, 3, 1, 9, 0, tzinfo=__import__("datetime").UTC)


def heard(conn: psycopg.Connection, timeout: float = 5.0) -> list[str]:
    """The channels notified: the first notification (within `timeout`), then whatever else is already there."""
    first = [n.channel for n in conn.notifies(timeout=timeout, stop_after=1)]
    return sorted(set(first) | {n.channel for n in conn.notifies(timeout=0.05)})


async def test_the_triggers_notify_pending_work_deliveries_and_actions_only(pg_url):
    listen = psycopg.connect(pg_url, autocommit=True)
    try:
        for channel in ("shopbot_work", "shopbot_deliveries", "shopbot_actions"):
            listen.execute(f"LISTEN {channel}")
        store = await open_store(pg_url, ManualClock(START), debounce_ms=0)
        try:
            await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
            assert heard(listen) == ["shopbot_work"]
            claim = await store.claim("w1")
            assert claim is not None
            assert heard(listen, 0.1) == []                  # pending -> running wakes nobody
            await store.release(claim, delay_seconds=0, reason="test", refund=True)
            assert heard(listen) == ["shopbot_work"]         # back to pending
            claim = await store.claim("w1")
            assert claim is not None
            await store.finish(claim, ReportDraft("9 tubs", destination="tg:1"))
            assert heard(listen) == ["shopbot_deliveries"]   # the report's pending delivery
            await store.admit(Occurrence("notice:x", "notice:x", "hi", WorkKind.NOTICE, "tg:1"))
            assert heard(listen, 0.1) == []                  # a notice is not agent work (its report: answered)
        finally:
            await store.close()
    finally:
        listen.close()


async def wait_until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.02)


def terminate_listener(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
                             "AND datname = current_database()", (application_name(),)).fetchall()
    return len(rows)


async def test_a_notification_sets_its_signal_and_a_lost_connection_is_reconnected_with_a_scan(pg_url):
    signals = Signals()
    listener = Listener(pg_url, signals, scan_s=60.0)   # no periodic scan in this test's time
    store = await open_store(pg_url, ManualClock(START), debounce_ms=0)
    listener.start()
    try:
        await asyncio.wait_for(listener.listening.wait(), 10)
        assert await signals.work.wait(1) and await signals.deliveries.wait(1)   # the start's scan
        await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
        assert await signals.work.wait(5)                       # the notification
        assert not await signals.deliveries.wait(0)             # only its own channel
        scans = listener.scans
        assert terminate_listener(pg_url) == 1
        await store.admit(Occurrence("tg:1:2", "tg:1", "more", WorkKind.AGENT, "tg:1"))   # maybe while it is down
        await wait_until(lambda: listener.connects == 2)
        assert listener.scans > scans                           # the reconnect scanned: the lost hint is covered
        assert await signals.work.wait(1) and await signals.deliveries.wait(1) and await signals.actions.wait(1)
        await store.admit(Occurrence("tg:2:1", "tg:2", "again", WorkKind.AGENT, "tg:2"))
        assert await signals.work.wait(5)                       # listening again
    finally:
        await listener.close()
        await store.close()
    assert listener._task is None


async def test_a_listener_without_a_server_keeps_trying_and_never_raises():
    signals = Signals()
    listener = Listener("postgresql://postgres@127.0.0.1:1/none?connect_timeout=1", signals, scan_s=60.0)
    listener.start()
    try:
        assert await signals.work.wait(5)        # each failed attempt scans: the periodic looks carry on
        assert listener.connects == 0 and listener._task is not None and not listener._task.done()
    finally:
        await listener.close()


@pytest.fixture
async def api():
    from bot.sandbox.bot_api import LocalBotApi
    async with LocalBotApi("777:notify-token") as server:
        yield server


async def test_a_running_bot_reconnects_its_lost_listen_connection_and_answers_work_admitted_meanwhile(
        tmp_path, api, pg_fresh_url):
    from tests.support.proc import OWNER, Product
    product = Product(tmp_path, api, pg_fresh_url)
    await product.start()
    try:
        assert product.proc is not None
        name = application_name(product.proc.pid)
        await product.wait_db(f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}'", [(1,)])
        with psycopg.connect(pg_fresh_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          (name,))
        other = await open_store(pg_fresh_url, ManualClock(START), debounce_ms=0)   # another process's admission
        try:
            await other.admit(Occurrence(f"tg:{OWNER}:900", f"tg:{OWNER}", "how much vanilla", WorkKind.AGENT,
                                         f"tg:{OWNER}"))
        finally:
            await other.close()
        await api.wait_for(lambda: any("vanilla" in m.text for m in api.sent if m.chat_id == OWNER), timeout=20)
        await product.wait_db(f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}'", [(1,)])
        await wait_until(lambda: "listen connection back after a loss" in product.log.read_text())
    finally:
        assert await product.stop() == 0
    log = product.log.read_text()
    assert "listen connection lost" in log
