"""Tool calls a model wrote as text (C17): small local models often answer a tool call as prose instead of a
structured `tool_calls` entry. The forms read here are a JSON object `{"name": ..., "arguments"|"parameters": {...}}`
(also `{"function": {...}}`), bare, in ```json fences, or inside `<tool_call>…</tool_call>` / `<tools>…</tools>`;
and, given the offered tools' names, an object whose only key is one of them (`{"get_item": {"item": "vanilla"}}`):
a small model asked to call a tool was seen writing that shape, its own made-up `<tool_response>`, instead of the
call; the keys the tool does not take are then ignored like any unknown argument, so no made-up value is acted on.
Likewise an object with exactly the keys of a result one tool returned earlier in the conversation (`result_shapes`:
the same small model wrote `<tool_response>{"item": "chocolate", "on_hand": 10, ...}</tool_response>`, get_item's
result for chocolate made up, instead of calling get_item) is read as a call of that tool: it runs for real, and
the model answers from the real result.

`text_calls(text)` returns the calls found (the agent loop runs and journals them as calls); `looks_like_tool_call`
is the delivery check: a reply that still looks like a call after that is never shown to the owner.
"""
from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from worker.models.base import Message, ToolCall

_DECODER = json.JSONDecoder()
# <tool_response> too: a small model asked to look something up was seen writing its own tool result (never delivered)
_TAGS = re.compile(r"</?(?:tool_call|tools|tool_response|function_call|function)\b[^>]*>", re.IGNORECASE)
_NAME_KEY = re.compile(r'"name"\s*:')
_ARGS_KEY = re.compile(r'"(?:arguments|parameters)"\s*:')


Shapes = Mapping[frozenset[str], str]   # the keys of a tool's result -> that tool


def result_shapes(messages: Iterable[Message]) -> dict[frozenset[str], str]:
    """The key set of every successful tool result in `messages`, with the tool that returned it; a key set two
    tools returned names neither (ambiguous)."""
    called = {call.id: call.name for m in messages for call in m.tool_calls}
    shapes: dict[frozenset[str], str] = {}
    ambiguous: set[frozenset[str]] = set()
    for m in messages:
        if m.role != "tool" or m.is_error or m.tool_call_id not in called:
            continue
        try:
            result = json.loads(m.text)
        except ValueError:
            continue
        if isinstance(result, dict) and result:
            keys, tool = frozenset(result), called[m.tool_call_id]
            if shapes.setdefault(keys, tool) != tool:
                ambiguous.add(keys)
    return {keys: tool for keys, tool in shapes.items() if keys not in ambiguous}


def _as_call(node: Any, names: Collection[str] = (), shapes: Shapes | None = None) -> tuple[str, str] | None:
    """(name, arguments JSON text) when `node` is a call object, else None."""
    if not isinstance(node, dict):
        return None
    if shapes and frozenset(node) in shapes:         # a made-up result shaped like an earlier one of a tool
        return shapes[frozenset(node)], json.dumps(node, ensure_ascii=False)
    if len(node) == 1:                               # {"get_item": {...}}: named by an offered tool only
        (key, value), = node.items()
        if key in names and isinstance(value, dict):
            return key, json.dumps(value, ensure_ascii=False)
    if isinstance(node.get("function"), dict):       # {"type": "function", "function": {...}}
        node = node["function"]
    name = node.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    key = "arguments" if "arguments" in node else "parameters" if "parameters" in node else None
    if key is None:
        return None
    arguments = node[key]
    if isinstance(arguments, str):                   # double-encoded: "arguments": "{\"item\": \"vanilla\"}"
        text = arguments.strip() or "{}"
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    return name.strip(), text


def text_calls(text: str, names: Collection[str] = (), shapes: Shapes | None = None) -> tuple[ToolCall, ...]:
    """Every call object in `text`, in order (an object inside a call is not read again); `names` are the offered
    tools' names, for the `{"<tool>": {...}}` shape, and `shapes` the results seen (`result_shapes`)."""
    found: list[ToolCall] = []
    plain = _TAGS.sub(" ", text or "")
    i = 0
    while True:
        i = min((p for p in (plain.find("{", i), plain.find("[", i)) if p >= 0), default=-1)
        if i < 0:
            break
        try:
            node, end = _DECODER.raw_decode(plain, i)
        except ValueError:
            i += 1
            continue
        for candidate in node if isinstance(node, list) else [node]:
            call = _as_call(candidate, names, shapes)
            if call is not None:
                found.append(ToolCall(id=f"text_{uuid.uuid4().hex[:12]}", name=call[0], arguments=call[1]))
        i = end
    return tuple(found)


def looks_like_tool_call(text: str) -> bool:
    """The delivery check: a reply with a call's tags, or with both a "name" key and an "arguments"/"parameters"
    key, is a tool call however malformed, never an answer for the owner."""
    return bool(_TAGS.search(text or "")) or bool(_NAME_KEY.search(text or "") and _ARGS_KEY.search(text or ""))
