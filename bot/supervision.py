"""How the composition root keeps its parts running (C21): a part that crashes on a bug is restarted with backoff
and reported in /healthz; two bodies that share one leader lease run side by side."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from bot.http import Health
from store import CommitUnknown, ConnectionLost

T = TypeVar("T")

log = logging.getLogger("shopbot.app")


class StartAborted(Exception):
    """SIGINT/SIGTERM arrived while the bot was still starting."""


START_TRIES = 5            # a start-up step whose connection the database server ended is run this often at most


def backoff(first_delay: float, failures: int, cap: float) -> float:
    """Seconds to wait after `failures` consecutive failures: `first_delay`, doubling, at most `cap`."""
    return min(cap, first_delay * 2.0 ** min(failures - 1, 6))


async def stopped_within(stopping: asyncio.Event, delay: float) -> bool:
    """Wait `delay` seconds, or less when `stopping` is set meanwhile: True when it was."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), delay)
        return True
    return False


async def at_start(what: str, step: Callable[[], Awaitable[T]], stopping: asyncio.Event, *,
                   tries: int = START_TRIES, first_delay: float = 0.2) -> T:
    """A database step of the start (opening the store, seeding the shop, the recovery sweep), each one safe to
    repeat. When the server ends its connection (`ConnectionLost`: a restart, `pg_terminate_backend`, a network
    drop; nothing was written), or ends it after COMMIT was sent (`CommitUnknown`: running the step again settles
    it), it is said in one line and run again on a fresh connection, with backoff, up to `tries` times; then the
    error stands (one line from the CLI, exit 1). SIGINT/SIGTERM meanwhile stop the start cleanly."""
    for attempt in range(1, tries + 1):
        try:
            return await step()
        except (ConnectionLost, CommitUnknown) as exc:
            if attempt == tries:
                raise
            delay = backoff(first_delay, attempt, 5.0)
            log.warning("database connection lost while %s (%s); trying again in %.1f s (%d of %d)", what, exc,
                        delay, attempt, tries - 1)
        if await stopped_within(stopping, delay):
            raise StartAborted(f"stopped while {what}")
    raise AssertionError("unreachable")


async def side_by_side(*bodies: Coroutine[Any, Any, None] | None) -> None:
    """The report relay and the receipt relay (C19) under one leader lease, each in its own task so that a reply
    never waits behind a receipt; the first failure (a lost lease) ends both and is raised as it is."""
    tasks = [asyncio.create_task(body) for body in bodies if body is not None]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise failure


async def supervise(name: str, start: Callable[[], Awaitable[None]], health: Health, stopping: asyncio.Event, *,
                    first_delay: float = 1.0) -> None:
    """C21: a part that crashes on a bug is reported in /healthz, restarted with backoff, and never ends the
    process (its work is in the database: an action left `sending` becomes unknown and is reconciled)."""
    crashes = 0
    while not stopping.is_set():
        try:
            await start()
            return
        except Exception as exc:
            crashes += 1
            delay = backoff(first_delay, crashes, 60.0)
            log.critical("%s crashed (%s: %s); restarting in %.1f s", name, type(exc).__name__, str(exc)[:300],
                         delay, exc_info=crashes == 1)
            health.fail(name, f"the {name} part crashed ({type(exc).__name__}) and is restarting")
        await stopped_within(stopping, delay)
        health.clear(name)
