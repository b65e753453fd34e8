"""LISTEN/NOTIFY as a wake-up hint (C16, last sentence): a commit in any process wakes the waiting parts of every
other process at once, instead of at their next periodic look.

Migration 0014's triggers notify `shopbot_work` (agent work pending: an admission, a release), `shopbot_deliveries`
(a delivery pending) and `shopbot_actions` (an action pending) at commit, and 0017's `shopbot_receipts` (a receipt
pending, C19). Each process keeps ONE dedicated
autocommit connection for LISTEN (a running `notifies()` generator blocks every other statement on its connection,
psycopg#340, so it is never a pooled one) and on every notification sets the matching in-process signal
(store/signals.py), the same pulses an in-process admission sets.

A notification is only a hint, never the way work is found:
- it carries nothing, and the woken part looks at the records as it always does;
- notifications sent while the listener is disconnected are lost, so after every (re)connect, once LISTEN is in
  place, every signal is set (a full scan); and every `scan_s` without a notification too (the periodic scan,
  besides each part's own look once a second and `poll_changes`);
- a lost connection is reconnected with backoff (0.1 s doubling to 5 s), logged, and never stops the process;
- each idle period ends with a `SELECT 1` under a timeout, so a connection that died silently is noticed.

The listener's session is named `shopbot listen pid=<pid>` (application_name), so an operator (and the tests) can
find it in pg_stat_activity.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import psycopg

from ..signals import Signals

log = logging.getLogger("shopbot.listen")

CHANNELS = {"shopbot_work": "work", "shopbot_deliveries": "deliveries", "shopbot_actions": "actions",
            "shopbot_receipts": "receipts"}   # 0017: receipts (C19)
SCAN_S = 5.0                 # a full scan at least this often, notification or not
PROBE_TIMEOUT_S = 5.0        # the idle probe (SELECT 1) of the listen connection
BACKOFF_S = (0.1, 5.0)       # first and longest wait before a reconnect
CONNECT_TIMEOUT_S = 5


def application_name(pid: int | None = None) -> str:
    return f"shopbot listen pid={pid if pid is not None else os.getpid()}"


class Listener:
    """One process's LISTEN connection, setting `signals` on every notification (a task: `start`, `close`)."""

    def __init__(self, url: str, signals: Signals, *, scan_s: float = SCAN_S) -> None:
        self.url = url
        self.signals = signals
        self.scan_s = scan_s
        self.connects = 0          # successful LISTENs so far (the first, then one per reconnect)
        self.notifications = 0
        self.losses = 0            # connections lost or refused so far
        self.scans = 0             # full scans signalled (start, reconnect, timeout)
        self.listening = asyncio.Event()   # set while LISTEN is in place
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="shopbot-listen")

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def _scan(self) -> None:
        self.scans += 1
        self.signals.work.notify()
        self.signals.deliveries.notify()
        self.signals.actions.notify()
        self.signals.receipts.notify()

    async def _run(self) -> None:
        delay = BACKOFF_S[0]
        while not self._closed:
            started = time.monotonic()
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # a lost or refused connection: said, waited out, never the process's end
                self.listening.clear()
                self.losses += 1
                if time.monotonic() - started > self.scan_s:
                    delay = BACKOFF_S[0]          # it had been up a while: reconnect quickly
                log.warning("listen connection lost (%s); reconnecting in %.1f s, scanning meanwhile",
                            _reason(exc), delay)
                self._scan()                      # the periodic looks carry on; this one is at once
                await asyncio.sleep(delay)
                delay = min(BACKOFF_S[1], delay * 2)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=application_name())
        try:
            for channel in CHANNELS:
                await conn.execute(f"LISTEN {channel}")
            self.connects += 1
            self.listening.set()
            if self.losses:
                log.info("listen connection back after a loss; full scan")
            self._scan()                          # LISTEN first, then look: nothing committed since is missed
            while True:
                heard = False
                async for note in conn.notifies(timeout=self.scan_s):
                    heard = True
                    self.notifications += 1
                    part = CHANNELS.get(note.channel)
                    if part is not None:
                        getattr(self.signals, part).notify()
                if not heard:
                    self._scan()
                # the connection still answers (a dead peer without a FIN is noticed here, not never)
                await asyncio.wait_for(conn.execute("SELECT 1"), PROBE_TIMEOUT_S)
        finally:
            self.listening.clear()
            await _close_quietly(conn)


async def _close_quietly(conn: Any) -> None:
    try:
        await asyncio.wait_for(conn.close(), 2.0)
    except (Exception, asyncio.CancelledError):
        pass


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
