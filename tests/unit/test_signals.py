"""The in-process wake-up (store/signals.py `Pulse`): level-triggered, and a cancellation always ends a wait.

Found with the leader frozen inside its relay's look (tests/acceptance/test_leader_kill_points.py): when it woke, its
listener's scan notified the receipt relay in the same moment as its lapsed lease's demotion cancelled it;
`asyncio.wait_for` (Python 3.11) then returned the notify and dropped the cancellation, so the receipt relay's loop
ran on, the demotion waited for it forever and SIGTERM could not stop the process."""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from store.signals import Pulse
from tests.support.cancelling import how_it_ended


async def cancelled_as_notified(wait: Callable[[], Awaitable[object]], pulse: Pulse) -> str:
    """A loop that waits on `wait()` over and over (a relay's), cancelled in the same moment as `pulse` is
    notified: how it ended."""
    async def loop() -> None:
        while True:
            await wait()
    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)                 # it is waiting
    pulse.notify()
    task.cancel()
    return await how_it_ended(task)


async def test_a_wait_cancelled_as_it_is_notified_ends_cancelled():
    pulse = Pulse()
    assert await cancelled_as_notified(lambda: pulse.wait(5), pulse) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps a cancellation from Python 3.12 on")
async def test_negative_control_the_former_wait_for_drops_that_cancellation():
    """Pulse.wait as it was (`asyncio.wait_for` around the event): the loop runs on after its cancellation, which
    the test above would catch."""
    pulse = Pulse()
    event = pulse._event

    async def former_wait() -> None:
        try:
            await asyncio.wait_for(event.wait(), 5)
        except TimeoutError:
            return
        event.clear()
    assert await cancelled_as_notified(former_wait, pulse) == "ran on"


async def test_a_notify_before_the_wait_is_kept_and_a_timeout_is_false():
    pulse = Pulse()
    pulse.notify()
    assert await pulse.wait(0) is True          # level-triggered: notified before the wait
    assert await pulse.wait(0.01) is False      # cleared by that wait; nothing since
    pulse.notify()
    assert await pulse.wait() is True


async def test_wait_or_is_woken_by_the_notify_or_by_another_future_and_a_cancellation_ends_it():
    """Issue 31: the worker's wait (`wait_or`): level-triggered as `wait`, it also ends (False) when one of the
    futures it watches is done (a turn's chain), and a cancellation arriving with a notify ends it cancelled."""
    pulse = Pulse()
    pulse.notify()
    assert await pulse.wait_or([], 0) is True
    other = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, other.set_result, None)
    assert await pulse.wait_or([other], 5) is False          # the other future ended it, not a notify
    assert await pulse.wait_or([], 0.01) is False
    waiting = asyncio.ensure_future(pulse.wait_or([], 5))
    await asyncio.sleep(0.01)
    pulse.notify()
    assert await waiting is True and not pulse._event.is_set()   # the notify is taken by the wait it woke
    assert await cancelled_as_notified(lambda: pulse.wait_or([], 5), pulse) == "cancelled"


async def test_wake_ends_a_wait_without_marking_the_pulse():
    """`wake` hands a waiting task over without a mark; `notify` marks it (the next wait returns at once)."""
    pulse = Pulse()
    waiting = asyncio.ensure_future(pulse.wait_or([], 10))
    await asyncio.sleep(0)
    pulse.wake()
    assert await asyncio.wait_for(waiting, 5) is False
    assert await pulse.wait_or([], 0) is False                          # no mark left
    pulse.notify()
    assert await pulse.wait_or([], 0) is True                           # the control: a notify leaves one
