"""C21 inside the product: an exception while handling one action stays with that action (logged, counted, held
after SHOPBOT_ATTEMPT_CAP of them) and never ends the action relay; a part that crashes anyway is reported in
/healthz and restarted with backoff, never the process's end."""
from __future__ import annotations

import asyncio

from bot.http import Health
from bot.sandbox.local_setup import local_product
from bot.supervision import supervise
from tests.integration.test_hostile_supplier import FAST, approve_vanilla, rows, told


class Broken:
    """A supplier client that fails in a way nobody classified (the relay's own guard is what is tested)."""
    can_lookup = True
    drops_repeated_keys = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def place(self, key: str, payload: dict) -> object:
        self.calls.append("place")
        raise RuntimeError("unexpected answer")

    async def lookup(self, key: str) -> object:
        self.calls.append("lookup")
        raise RuntimeError("unexpected answer")


async def test_an_exception_while_handling_one_action_holds_it_after_the_attempt_cap():
    async with local_product(FAST) as run:
        relay = run.app.parts.actions
        relay.adapter = broken = Broken()
        relay.reconcile_every_s = 0.05
        await approve_vanilla(run)
        await run.api.wait_for(lambda: len(told(run, "I could not confirm order")) == 1, timeout=15)
        assert broken.calls == ["place", "lookup", "lookup"]      # 3 failures (SHOPBOT_ATTEMPT_CAP), then held
        [(state, reason)] = rows(run, "SELECT state, reason FROM actions")
        assert state == "unknown" and "RuntimeError" in reason     # it may have been sent: never resent blindly
        assert relay._held_ids == {1}                              # not asked about again by this process
        assert not run.task.done() and "actions" not in run.app.parts.health.faults


async def test_a_crashing_part_is_reported_and_restarted_never_ending_the_process():
    health, stopping = Health(), asyncio.Event()
    starts: list[int] = []
    seen: list[dict] = []

    async def part() -> None:
        starts.append(1)
        seen.append(dict(health.faults))
        if len(starts) <= 2:
            raise KeyError("a bug")
        stopping.set()                   # the third start runs until the process stops

    await asyncio.wait_for(supervise("actions", part, health, stopping, first_delay=0.01), 5)
    assert len(starts) == 3
    assert seen[0] == {} and seen[1] == {}         # cleared when it starts again ...
    assert health.faults == {}


async def test_while_restarting_the_crash_is_in_health():
    health, stopping = Health(), asyncio.Event()

    async def part() -> None:
        raise ValueError("a bug")

    task = asyncio.create_task(supervise("actions", part, health, stopping, first_delay=60))
    for _ in range(200):
        if health.faults:
            break
        await asyncio.sleep(0.01)
    assert "crashed (ValueError)" in health.faults["actions"]      # ... and reported while it waits
    stopping.set()
    await asyncio.wait_for(task, 5)                                # a stop ends the backoff at once
