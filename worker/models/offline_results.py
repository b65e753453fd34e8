"""What the offline model has learnt in a turn: the tools' answers since the request, looked up by (tool, arguments);
a rule that still lacks one raises `_Need` with the calls to make. Shared by the offline model's answers
(worker/models/offline.py, offline_everyday.py)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store import units
from worker.models.base import Message, ToolSpec


class _Need(Exception):
    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(calls)
        self.calls = calls


@dataclass(frozen=True)
class _Res:
    ok: bool
    data: dict[str, Any]

    @property
    def error(self) -> str:
        return str(self.data.get("error", "failed"))


def _key(name: str, args: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps(args, sort_keys=True)


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class _Results:
    """What the tools answered since the request, looked up by (tool, arguments)."""

    def __init__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> None:
        self.specs = {t.name: t for t in tools}
        self.available = set(self.specs)
        self.done: dict[tuple[str, str], _Res] = {}
        self.issued = 0
        by_id: dict[str, tuple[str, str]] = {}
        for message in messages:
            if message.role == "assistant":
                for call in message.tool_calls:
                    by_id[call.id] = _key(call.name, _parse_args(call.arguments))
                    self.issued += 1
            elif message.role == "tool" and message.tool_call_id in by_id:
                try:
                    data = json.loads(message.text)
                except ValueError:
                    data = {"error": message.text}
                if not isinstance(data, dict):
                    data = {"error": message.text} if message.is_error else {"value": data}
                self.done[by_id[message.tool_call_id]] = _Res(not message.is_error, data)

    def optional_argument(self, tool: str, argument: str) -> bool:
        """Whether the tool offers `argument` and may be called without it (read from its schema)."""
        spec = self.specs.get(tool)
        if spec is None:
            return False
        parameters = spec.parameters
        return argument in parameters.get("properties", {}) and argument not in parameters.get("required", [])

    def get(self, name: str, **args: Any) -> _Res:
        return self.get_all([(name, args)])[0]

    def get_all(self, calls: list[tuple[str, dict[str, Any]]]) -> list[_Res]:
        missing = [
            (name, args) for name, args in calls
            if name in self.available and _key(name, args) not in self.done
        ]
        if missing:
            raise _Need(missing)
        return [
            self.done.get(_key(name, args))
            or _Res(False, {"error": f"the {name} tool is not available"})
            for name, args in calls
        ]


def _unit(data: dict[str, Any], number: Any, lang: str = "en", fallback: str = "") -> str:
    """` tub` or ` tubs`, agreeing with `number` (store/units.py), in the owner's language when the shop names it."""
    unit = data.get("unit", fallback)
    if not isinstance(unit, str) or not unit:
        return ""
    value = number if isinstance(number, (int, float)) and not isinstance(number, bool) else 2
    return f" {units.unit_word(value, unit, lang)}"


def _count(data: dict[str, Any], number: Any, lang: str = "en", fallback: str = "") -> str:
    """`7 tubs`, `1 tub`: a number with its unit's word agreeing with it."""
    return f"{number}{_unit(data, number, lang, fallback)}"
