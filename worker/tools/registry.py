"""The generic tool registry: typed tools with an effect kind (docs/contracts.md "Operation", C10, C11), and the
collection of a run's figures from the tools' typed results (C13).

A tool is an async function `fn(args, context) -> dict` with a pydantic model for its arguments. Its result is
typed by its values and, for plain integers, by its keys; `typed_result` turns it into what the model is shown
(and the journal records) plus every number in it as a `Figure`, for every tool alike:

* `Money` -> the amount as the owner reads it (`$3.00`); an integer under a key ending in `_cents` is money in
  the shop's currency, shown under the key without the suffix (`unit_cost_cents: 300` -> `unit_cost: "$3.00"`);
* `date` -> ISO; `datetime` (and ISO date-time text such as a record's `expires_at`) -> the shop's local time;
* a record number (an integer under `id`, a key ending in `_id`, or one of `ID_KEYS`: `order`, `proposal`,
  `open_proposal`, `report`, `draft`) is an id, never a figure: the model is shown `#2`, and the run's ids (a
  `Figure` with `record_id`) only let a `#2` of its prose stand (C13); `#2` inside a sentence is an id too;
* int and float -> a count. Its unit is the `unit` of its record (`on_hand`, `reorder_point`, `quantity`), `days`
  for a key naming days (`days_of_cover`, `window_days`), `<unit> a day` for a key ending in `_per_day`, none for
  a key listed in `UNITLESS`;
* the figure's label is the record's `item` (its subject) and the key in words (`vanilla reorder point`);
* a sentence (text with a space, such as a policy's reason): its numbers are figures without a subject (shown only
  when the reply cites them), and an amount in cents in it is shown and counted as money (`1500 cents` ->
  `$15.00`); booleans, None and other text are shown as they are and are no figures.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, Literal

import pydantic

from worker.figures import Figure
from worker.models.base import ToolSpec
from worker.money import Money, ShopFormat

Effect = Literal["read", "internal", "external"]
EFFECTS: tuple[str, ...] = ("read", "internal", "external")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what both OpenAI and Anthropic accept


class ToolError(Exception):
    """An expected failure of a tool ("unknown item 'pistachio'"): the model sees {"error": message}."""


@functools.cache   # schema generation costs ~0.2 ms a tool; every turn asks for every spec
def _flat_schema(args_model: type[pydantic.BaseModel]) -> dict[str, Any]:
    schema = args_model.model_json_schema()
    if "$defs" in schema or "$ref" in str(schema):
        raise ValueError(
            f"{args_model.__name__}: tool arguments must be flat (str/int/float/bool fields, no nested models)"
        )
    schema.pop("title", None)
    schema.pop("additionalProperties", None)   # unknown keys are ignored anyway (worker/agent_loop.py)
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        # an optional argument reads as its type, not `anyOf [type, null]` with `default: null`: the definitions
        # are most of a small model's prompt (C18), and it omits an argument it does not need
        kinds = [k for k in prop.pop("anyOf", ()) if k != {"type": "null"}]
        if len(kinds) == 1:
            prop.update(kinds[0])
            if prop.get("default", 0) is None:
                del prop["default"]
        elif kinds:
            prop["anyOf"] = kinds
        properties[name] = prop
    schema["properties"] = properties
    schema["type"] = "object"
    return schema


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[pydantic.BaseModel]
    fn: Callable[[Any, Any], Awaitable[dict[str, Any]]]   # (its args_model's instance, the turn's context)
    effect: Effect

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
        self._specs: tuple[ToolSpec, ...] | None = None   # built once: every turn offers the same definitions (C18)
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs = None
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool of that name, or None (the loop answers an unknown name to the model)."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        if self._specs is None:
            self._specs = tuple(tool.spec() for tool in self._tools.values())
        return self._specs

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools


UNITLESS = frozenset({"events", "counts", "count", "proposals", "attempts", "records"})   # counts of records
ID_KEYS = frozenset({"id", "order", "proposal", "open_proposal", "report", "draft"})    # record numbers (order #2)
_TEXT_ID = re.compile(r"#(\d+)\b")
_ISO_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?$")
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TEXT_CENTS = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+) cents\b")
_TEXT_NUMBER = re.compile(r"(?<![\w.,$€£#])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.,]\d)")


def is_id_key(key: str) -> bool:
    return key in ID_KEYS or key.endswith("_id")


def _unit_for(key: str, unit: str) -> str:
    if key in UNITLESS:
        return ""
    if key.endswith("_per_day"):
        return f"{unit} a day" if unit else "a day"
    if "days" in key.split("_"):
        return "days"
    if key.endswith("_percent") or key == "percent":
        return "%"
    return unit


def typed_result(result: dict[str, Any], fmt: ShopFormat) -> tuple[dict[str, Any], list[Figure]]:
    """What the model is shown for a tool's result, and every number in it as a figure (see the module docstring)."""
    figures: list[Figure] = []

    def label(subject: str | None, key: str) -> str:
        words = key.replace("_", " ").strip()
        return f"{subject} {words}" if subject and words != "item" else words

    def moment(value: datetime) -> datetime:
        local = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(fmt.zone())
        return local.replace(second=0, microsecond=0)

    def walk(node: Any, key: str, subject: str | None, unit: str) -> Any:
        if isinstance(node, dict):
            subject = node["item"] if isinstance(node.get("item"), str) else subject
            unit = node["unit"] if isinstance(node.get("unit"), str) else unit
            out: dict[str, Any] = {}
            for k, v in node.items():
                name = str(k)
                if name.endswith("_cents") and isinstance(v, int) and not isinstance(v, bool):
                    name, v = name[:-len("_cents")] or "amount", Money(v, fmt.currency)
                out[name] = walk(v, name, subject, unit)
            return out
        if isinstance(node, (list, tuple)):
            return [walk(v, key, subject, unit) for v in node]
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, Money):
            figures.append(Figure(label(subject, key), node, "", subject))
            return fmt.money(node)
        if isinstance(node, datetime):
            local = moment(node)
            figures.append(Figure(label(subject, key), local, "", subject))
            return local.strftime("%Y-%m-%d %H:%M")
        if isinstance(node, date):
            figures.append(Figure(label(subject, key), node, "", subject))
            return node.isoformat()
        if isinstance(node, time):
            figures.append(Figure(label(subject, key), node, "", subject))
            return node.strftime("%H:%M")
        if isinstance(node, int) and is_id_key(key):
            figures.append(Figure(label(subject, key), node, "", subject, record_id=True))
            return f"#{node}"
        if isinstance(node, (int, float)):
            figures.append(Figure(label(subject, key), node, _unit_for(key, unit), subject))
            return node
        if isinstance(node, str) and _ISO_MOMENT.match(node):
            try:
                return walk(datetime.fromisoformat(node.replace("Z", "+00:00")), key, subject, unit)
            except ValueError:
                return node
        if isinstance(node, str) and _ISO_DAY.match(node):
            try:
                return walk(date.fromisoformat(node), key, subject, unit)
            except ValueError:
                return node
        if isinstance(node, str) and " " in node:
            return text_numbers(node, label(subject, key))
        return node

    def text_numbers(text: str, where: str) -> str:
        """Numbers inside a sentence a tool returned (a policy's reason): figures too, shown only when cited;
        an amount in cents reads as money."""
        def money(match: re.Match[str]) -> str:
            amount = Money(int(match.group(1).replace(",", "")), fmt.currency)
            figures.append(Figure(where, amount))
            return fmt.money(amount)

        text = _TEXT_CENTS.sub(money, text)
        figures.extend(Figure(where, int(m.group(1)), record_id=True) for m in _TEXT_ID.finditer(text))
        for match in _TEXT_NUMBER.finditer(text):
            raw = match.group(0).replace(",", "")
            figures.append(Figure(where, float(raw) if "." in raw else int(raw)))
        return text

    payload = walk(result, "", None, "")
    return payload, figures
