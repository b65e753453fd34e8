"""C17: a session's history is what the model said and did, never what the product wrote.

One exchange is stored per finished turn (store `history.messages`, beside the owner's text and the model's prose):
the latest user message as the model got it, the model's tool calls, their results and its own final prose, in the
order and bytes the model saw them, so the next turn's request repeats them exactly and a provider's prefix cache
(C18) keeps serving them. Never stored: the Figures block and the report identity (C13's rendering), the product's
stop and error replies, cards, notices, control answers, and a correction round (worker/agent_loop.py).

Compaction (`fit`) keeps the prefix stable: while the exchanges fit `SHOPBOT_HISTORY_TOKENS` all are kept; the turn
that would pass the budget drops the oldest exchanges down to about half of it at once. The cut is recomputed from
the stored exchanges alone, so every later turn finds the same cut until the budget is passed again.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from worker.models.base import Message, ToolCall

CHARS_PER_TOKEN = 4      # the estimate: about four characters of English text a token
# Exchanges kept decoded, with their token cost (`_decoded`): every turn reads up to `history_limit` rows (200), and
# decoding and costing each of their exchanges again took 1.8 ms of the event loop per reply once a conversation was
# long (100 exchanges). A stored exchange never changes, so its text is its key; 512 hold a few long sessions.
DECODED_KEPT = 512


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def encode(messages: Sequence[Message]) -> str:
    """The exchange as stored: compact JSON, one object a message."""
    wire: list[dict[str, Any]] = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.role, "text": m.text}
        if m.tool_calls:
            entry["calls"] = [[c.id, c.name, c.arguments] for c in m.tool_calls]
        if m.tool_call_id is not None:
            entry["call_id"] = m.tool_call_id
        if m.is_error:
            entry["error"] = True
        wire.append(entry)
    return json.dumps(wire, ensure_ascii=False, separators=(",", ":"))


def decode(text: str) -> list[Message]:
    """The stored exchange's messages (a new list each time: the messages themselves are frozen and shared)."""
    return list(_decoded(text)[0])


@lru_cache(maxsize=DECODED_KEPT)
def _decoded(text: str) -> tuple[tuple[Message, ...], int]:
    """A stored exchange's messages and their cost, worked out once (see `DECODED_KEPT`)."""
    messages = tuple(Message(role=e["role"], text=e.get("text", ""),
                             tool_calls=tuple(ToolCall(i, n, a) for i, n, a in e.get("calls", ())),
                             tool_call_id=e.get("call_id"), is_error=bool(e.get("error")))
                     for e in json.loads(text))
    return messages, cost(messages)


class _Stored(list[Message]):
    """An exchange as stored, with the cost its decoding counted (`cost` reads it instead of counting again)."""
    __slots__ = ("tokens",)

    def __init__(self, messages: Sequence[Message], tokens: int) -> None:
        super().__init__(messages)
        self.tokens = tokens


def exchanges(rows: Sequence[tuple[str, str, str | None]]) -> list[list[Message]]:
    """The stored rows (role, text, messages) as exchanges, oldest first. A row with its exchange's messages gives
    them; an older row without (stored before C17) gives the owner's text and the answer's text. Leading answers
    without their question are dropped."""
    found: list[list[Message]] = []
    for role, text, messages in rows:
        if role == "user":
            found.append([Message(role="user", text=text)])
        elif found and messages:
            found[-1] = _Stored(*_decoded(messages))
        elif found:
            found[-1] = [*found[-1], Message(role="assistant", text=text)]   # a plain list: its cost is counted
    return found


def cost(exchange: Sequence[Message]) -> int:
    if isinstance(exchange, _Stored):
        return exchange.tokens
    return sum(estimate_tokens(m.text) + sum(estimate_tokens(c.name + c.arguments) for c in m.tool_calls)
               for m in exchange)


def cut(found: Sequence[Sequence[Message]], budget_tokens: int) -> int:
    """How many of the oldest exchanges the next turn does not see (see the module docstring)."""
    costs = [cost(e) for e in found]
    start = total = 0
    for i, c in enumerate(costs):
        total += c
        if total > budget_tokens:            # passed: drop the oldest down to about half the budget at once
            while start <= i and total > budget_tokens // 2:
                total -= costs[start]
                start += 1
    return start


def fit(found: Sequence[Sequence[Message]], budget_tokens: int) -> list[Message]:
    """The exchanges the next turn sees, flattened, oldest first."""
    return [m for exchange in found[cut(found, budget_tokens):] for m in exchange]
