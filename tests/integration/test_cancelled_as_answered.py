"""Issue 31: a long-lived loop's bounded store call (the leader's lease statement, `Leader._ask`; the worker's lease
renewal, `Worker._keep_lease`) ends cancelled when its cancellation arrives in the same moment as the answer.
`asyncio.wait_for` (Python 3.11) returned the answer and dropped the cancellation, so a demoted leader's loop, or a
turn's lease keeper, ran on (as `Pulse.wait` did: tests/unit/test_signals.py); `asyncio.timeout` keeps it."""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot.leadership import Leader
from store import Claim, Renewal, SqliteStore
from tests.support.cancelling import how_it_ended
from worker.models.offline import OfflineModel
from worker.worker import Worker

ANSWERED = "the call answered"


async def cancelled_as_answered(start: Callable[[Callable[[], Awaitable[Any]]], Awaitable[object]]) -> str:
    """`start(call)` runs a loop whose bounded store call is `call()`; the call's answer and the loop's cancellation
    arrive in the same moment (the cancel is queued right behind the answer). How the loop ended."""
    answers: list[asyncio.Future[Any]] = []
    loop = asyncio.get_running_loop()

    async def call() -> Any:
        answers.append(loop.create_future())
        return await answers[-1]
    task = asyncio.ensure_future(start(call))
    deadline = loop.time() + 5
    while not answers and loop.time() < deadline:
        await asyncio.sleep(0.005)
    assert answers, "the loop never made its call"
    answers[-1].set_result(True)
    loop.call_soon(task.cancel)
    return await how_it_ended(task)


def asking(ask: Callable[[Awaitable[Any]], Awaitable[object]]) -> Callable[[Callable[[], Awaitable[Any]]],
                                                                          Awaitable[object]]:
    """A leader's loop of lease statements through `ask` (as `Leader.run` and `_lead` make them)."""
    async def run(call: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await ask(call())
    return run


async def former_ask(call: Awaitable[Any]) -> Any:
    """`Leader._ask` as it was."""
    try:
        return await asyncio.wait_for(call, 1.0)
    except TimeoutError:
        return None


async def test_a_leaders_lease_call_cancelled_as_it_answers_ends_cancelled(db_path, clock):
    store = await SqliteStore.open(db_path, clock)
    try:
        leader = Leader(store, "relay", "holder", 3.0)
        assert await cancelled_as_answered(asking(leader._ask)) == "cancelled"
    finally:
        await store.close()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps a cancellation from Python 3.12 on")
async def test_negative_control_the_former_lease_call_drops_that_cancellation():
    assert await cancelled_as_answered(asking(former_ask)) == "ran on"


def keeping(db_path: Any, clock: Any, *, former: bool = False) -> Callable[[Callable[[], Awaitable[Any]]],
                                                                           Awaitable[object]]:
    """A turn's lease keeper (`Worker._keep_lease`) beside a turn that runs on, its renewal answered by `call()`."""
    async def run(call: Callable[[], Awaitable[Any]]) -> None:
        store = await SqliteStore.open(db_path, clock)
        turn = asyncio.ensure_future(asyncio.Event().wait())
        try:
            async def renew(claim: Claim) -> Renewal:
                return Renewal.HELD if await call() else Renewal.LAPSED
            store.renew = renew  # type: ignore[method-assign]
            worker = Worker(store, OfflineModel())
            if former:
                await former_keep(store, turn, 0.6)
            else:
                await worker._keep_lease(Claim("run", "worker-1", "tg:1", (), 1, 0), turn, 0.6)
        finally:
            turn.cancel()
            await store.close()
    return run


async def former_keep(store: Any, turn: asyncio.Future[Any], lease: float) -> None:
    """`Worker._keep_lease`'s renewal as it was (`asyncio.wait_for`), the rest left out."""
    period = lease / 3
    while not turn.done():
        await asyncio.sleep(period)
        try:
            await asyncio.wait_for(store.renew(None), timeout=period)
        except TimeoutError:
            return                            # counted as lost: the real keeper cancels the turn


async def test_a_turns_lease_renewal_cancelled_as_it_answers_ends_cancelled(db_path, clock):
    assert await cancelled_as_answered(keeping(db_path, clock)) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps a cancellation from Python 3.12 on")
async def test_negative_control_the_former_renewal_drops_that_cancellation(db_path, clock):
    """The former keeper runs on after its cancellation: it renews again, that renewal is never answered, and it
    counts the lease lost (the real one would then cancel a turn that had already ended)."""
    assert await cancelled_as_answered(keeping(db_path, clock, former=True)) == "ran on, then ended: None"
