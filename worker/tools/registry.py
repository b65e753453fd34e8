"""The generic tool registry: typed tools with an effect kind (docs/contracts.md "Operation", C10, C11).

A tool is an async function `fn(args, context) -> dict` with a pydantic model for its arguments. The shop's
tools themselves (list_stock, get_item, ...) and their figures functions live with the lead's code.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from worker.figures import Figure
from worker.models.base import ToolSpec

Effect = Literal["read", "internal", "external"]
EFFECTS: tuple[str, ...] = ("read", "internal", "external")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what both OpenAI and Anthropic accept


class ToolError(Exception):
    """An expected failure of a tool ("unknown item 'pistachio'"): the model sees {"error": message}."""


@functools.cache   # schema generation costs ~0.2 ms a tool; every turn asks for every spec
def _flat_schema(args_model: type[pydantic.BaseModel]) -> dict:
    schema = args_model.model_json_schema()
    if "$defs" in schema or "$ref" in str(schema):
        raise ValueError(
            f"{args_model.__name__}: tool arguments must be flat (str/int/float/bool fields, no nested models)"
        )
    schema.pop("title", None)
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        properties[name] = prop
    schema["properties"] = properties
    schema["type"] = "object"
    return schema


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[pydantic.BaseModel]
    fn: Callable[[pydantic.BaseModel, Any], Awaitable[dict]]
    effect: Effect
    figures: Callable[[dict], list[Figure]] | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern}")
        if self.effect not in EFFECTS:
            raise ValueError(f"tool {self.name!r}: effect must be one of {EFFECTS}, not {self.effect!r}")
        if not (isinstance(self.args_model, type) and issubclass(self.args_model, pydantic.BaseModel)):
            raise TypeError(f"tool {self.name!r}: args_model must be a pydantic BaseModel subclass")
        _flat_schema(self.args_model)  # fail at definition time, not at the first model call

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=_flat_schema(self.args_model))


class ToolRegistry:
    """Tools by name, in registration order (the order the model sees them)."""

    def __init__(self, tools: list[Tool] | tuple[Tool, ...] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool of that name, or None (the loop answers an unknown name to the model)."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec() for tool in self._tools.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
