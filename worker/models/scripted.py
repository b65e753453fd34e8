"""ScriptedModel: a test double that plays a fixed script of turns and records every call it got."""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.models.base import Message, ModelTurn, ToolSpec

Step = ModelTurn | Callable[[tuple[Message, ...]], ModelTurn] | BaseException | type


class ScriptExhausted(AssertionError):
    """The model was called more times than scripted: a fake hit unexpectedly fails the test."""


@dataclass(frozen=True)
class ScriptedCall:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]


class ScriptedModel:
    """Each call takes the next step: a ModelTurn is returned, a callable gets the messages and returns a
    ModelTurn (it may be async), an exception (instance or class) is raised."""

    def __init__(self, turns: Sequence[Step], *, name: str = "scripted") -> None:
        self.name = name
        self._turns = list(turns)
        self.calls: list[ScriptedCall] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - len(self.calls)

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelTurn:
        index = len(self.calls)
        self.calls.append(ScriptedCall(system, tuple(messages), tuple(tools)))
        if index >= len(self._turns):
            raise ScriptExhausted(f"{self.name}: called {index + 1} times, scripted for {len(self._turns)}")
        step = self._turns[index]
        if isinstance(step, BaseException) or (isinstance(step, type) and issubclass(step, BaseException)):
            raise step
        produced: object = step
        if callable(step) and not isinstance(step, type):
            produced = step(tuple(messages))
            if inspect.isawaitable(produced):
                produced = await produced
        if not isinstance(produced, ModelTurn):
            raise TypeError(f"{self.name}: step {index} gave {type(produced).__name__}, not a ModelTurn")
        return produced
