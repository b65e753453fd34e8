"""How a loop cancelled in the same moment as something it waits on finished ended (Python 3.11's `asyncio.wait_for`
could drop such a cancellation: tests/unit/test_signals.py, tests/integration/test_cancelled_as_answered.py)."""
from __future__ import annotations

import asyncio
from typing import Any


async def how_it_ended(task: asyncio.Future[Any], *, ran_on: str = "ran on") -> str:
    """"cancelled", or `ran_on` when it was still running 2 s after its cancellation, or how else it ended."""
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:
        task.cancel()                         # the dropped cancellation, asked again so the test ends
        await asyncio.gather(task, return_exceptions=True)
        return ran_on
    return "cancelled" if task.cancelled() else f"{ran_on}, then ended: {task.exception()!r}"
