"""Anthropic Messages adapter.

max_retries=0 (the worker's release is the only retry) and max_tokens set (SHOPBOT_MODEL_MAX_TOKENS, 1024 by
default) so the SDK sends a plain, non-streamed request. The system prompt (stable all day, C18) goes as a system
block marked `cache_control: ephemeral`: the cache covers the tools and that block (today's date heads the latest
user message, after the history). A two-block SystemPrompt keeps its second block after the breakpoint. Input
tokens count the cache's too (`cache_read_input_tokens`, also reported as cached, and
`cache_creation_input_tokens`). A server at a base URL needs no key (the placeholder NO_KEY is sent).
Stop reasons `refusal` and `model_context_window_exceeded` are reported as what they are.
Provider-neutral history is converted to what the Messages API requires: roles
alternate (consecutive messages of one role are merged), tool results are `tool_result` blocks grouped in one
user message placed before any user text, the first message is a user message, and no text block is empty.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import anthropic

from worker.models.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_S,
    NO_KEY,
    Message,
    ModelConfigFault,
    ModelTransient,
    ModelTurn,
    SystemPrompt,
    ToolCall,
    ToolSpec,
    error_for_status,
    sdk_error_detail,
)

EMPTY = "(empty)"  # the API refuses empty text blocks
CONTINUED = "(conversation continues)"


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def to_anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if wire and wire[-1]["role"] == role:
            previous = wire[-1]["content"]
            if role == "user" and any(b["type"] == "tool_result" for b in blocks):
                # tool results must come first in a user message: keep them ahead of earlier user text
                results = [b for b in previous if b["type"] == "tool_result"] + blocks
                wire[-1]["content"] = results + [b for b in previous if b["type"] != "tool_result"]
            else:
                previous.extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "user":
            add("user", [{"type": "text", "text": m.text or EMPTY}])
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.text or not m.tool_calls:
                blocks.append({"type": "text", "text": m.text or EMPTY})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
                for c in m.tool_calls
            )
            add("assistant", blocks)
        elif m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "",
                                     "content": m.text or EMPTY}
            if m.is_error:
                block["is_error"] = True
            add("user", [block])
        else:  # pragma: no cover - Message.role is a Literal
            raise ValueError(f"unknown message role {m.role!r}")
    if wire and wire[0]["role"] != "user":
        wire.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED}]})
    return wire


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def _detail(exc: Exception) -> str:
    return sdk_error_detail("anthropic", exc)


class AnthropicMessagesModel:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self.max_tokens = max_tokens
        if base_url and not api_key and not os.environ.get("ANTHROPIC_API_KEY"):
            api_key = NO_KEY
        try:
            self._client = anthropic.AsyncAnthropic(
                base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout
            )
        except anthropic.AnthropicError as exc:
            raise ModelConfigFault(f"anthropic: {exc}") from exc
        client = self._client
        if client.api_key is None and client.auth_token is None and getattr(client, "_token_cache", None) is None:
            # the SDK would only fail at the first request, with a TypeError
            raise ModelConfigFault("anthropic: no credentials (pass an API key or set ANTHROPIC_API_KEY)")

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": to_anthropic_messages(messages),
        }
        if isinstance(system, SystemPrompt) and system.cached:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": system.cached,
                                             "cache_control": {"type": "ephemeral"}}]
            if system.turn:
                blocks.append({"type": "text", "text": system.turn})
            request["system"] = blocks
        elif system:
            request["system"] = [{"type": "text", "text": str(system), "cache_control": {"type": "ephemeral"}}]
        if tools:
            request["tools"] = to_anthropic_tools(tools)
        try:
            response = await self._client.messages.create(**request)
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            raise ModelTransient(f"anthropic: {type(exc).__name__}: {exc}"[:500]) from exc
        except anthropic.APIStatusError as exc:
            raise error_for_status(exc.status_code, _detail(exc), exc.response.headers) from exc
        except (anthropic.APIError, json.JSONDecodeError) as exc:  # a 2xx the SDK could not read
            raise ModelTransient(f"anthropic: unreadable response: {exc}"[:500]) from exc
        except anthropic.AnthropicError as exc:  # e.g. no credentials could be resolved
            raise ModelConfigFault(f"anthropic: {exc}"[:500]) from exc
        return self._turn(response)

    def _turn(self, response: Any) -> ModelTurn:
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise ModelTransient("anthropic: the response has no content")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
        usage = getattr(response, "usage", None)
        read = (getattr(usage, "cache_read_input_tokens", None) or 0) if usage else 0
        written = (getattr(usage, "cache_creation_input_tokens", None) or 0) if usage else 0
        return ModelTurn(
            text="\n\n".join(t for t in texts if t),
            tool_calls=tuple(calls),
            input_tokens=((getattr(usage, "input_tokens", None) or 0) + read + written) if usage else 0,
            cached_tokens=read,
            output_tokens=(getattr(usage, "output_tokens", None) or 0) if usage else 0,
            truncated=getattr(response, "stop_reason", None) == "max_tokens",
            stop={"max_tokens": "length", "tool_use": "tool_calls", "refusal": "refusal",
                  "model_context_window_exceeded": "context_window"}.get(  # type: ignore[arg-type]
                      getattr(response, "stop_reason", None) or "", "end"),
        )
