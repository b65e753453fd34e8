"""How the composition root keeps its parts running (C21): a part that crashes on a bug is restarted with backoff
and reported in /healthz; two bodies that share one leader lease run side by side."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from bot.http import Health

log = logging.getLogger("shopbot.app")


class StartAborted(Exception):
    """SIGINT/SIGTERM arrived while the bot was still starting."""


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
            delay = min(60.0, first_delay * 2 ** min(crashes - 1, 6))
            log.critical("%s crashed (%s: %s); restarting in %.1f s", name, type(exc).__name__, str(exc)[:300],
                         delay, exc_info=crashes == 1)
            health.fail(name, f"the {name} part crashed ({type(exc).__name__}) and is restarting")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), delay)
        health.clear(name)
