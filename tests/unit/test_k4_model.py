"""worker/worker.py `_K4Model`: with K4 armed, the fault point is reached while the model's request has started;
unarmed, the call runs in the turn's own task, with no task or loop pass of its own (which let other callbacks run
in the middle of a turn)."""
from __future__ import annotations

import asyncio

import pytest

from store import faults
from worker.models.base import ModelTurn
from worker.worker import _K4Model


class Recording:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object] | None] = []

    async def complete(self, system, messages, tools):  # type: ignore[no-untyped-def]
        self.tasks.append(asyncio.current_task())
        return ModelTurn(text="ok", tool_calls=())


@pytest.fixture
def disarmed():
    yield
    faults.arm("")


async def test_unarmed_the_model_runs_in_the_callers_task_with_no_loop_pass(disarmed):
    faults.arm("")
    model = Recording()
    other_ran = []
    asyncio.get_running_loop().call_soon(other_ran.append, True)   # runs at the first loop pass
    turn = await _K4Model(model).complete("system", (), ())
    assert turn.text == "ok"
    assert model.tasks == [asyncio.current_task()]
    assert other_ran == []              # no pass of the loop inside the call


async def test_armed_the_point_is_reached_once_the_request_has_started(disarmed):
    faults.arm("K4:raise")
    model = Recording()
    with pytest.raises(faults.FaultInjected):
        await _K4Model(model).complete("system", (), ())
    assert len(model.tasks) == 1 and model.tasks[0] is not asyncio.current_task()   # started, in its own task
