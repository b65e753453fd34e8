"""OpenAI chat-completions adapter (also any OpenAI-compatible server through base_url).

The SDK is built with max_retries=0: the worker's release of the turn (C9) is the only retry, so one
complete() is at most one HTTP request. Errors are mapped by HTTP status in base.error_for_status.
Every request carries the output cap: `max_completion_tokens` for OpenAI itself (its newer models refuse
`max_tokens`), `max_tokens` for a server at a base URL (llama.cpp, Ollama, vLLM read that one). A server at a
base URL needs no key: without one the placeholder NO_KEY is sent. The system prompt is one system message at the
start and carries nothing that changes in a day (C18: today's date heads the latest user message), so a provider's
prefix cache (OpenAI's automatic one, llama.cpp's slot cache) keeps the system message, the tools and the history.
Cached prompt tokens are read from `usage.prompt_tokens_details.cached_tokens` (llama.cpp's `timings.cache_n` when
a server gives only that).
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

import openai

from worker.models.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_S,
    NO_KEY,
    Message,
    ModelConfigFault,
    ModelTransient,
    ModelTurn,
    StopKind,
    ToolCall,
    ToolSpec,
    error_for_status,
    sdk_error_detail,
)


def _replayable_arguments(arguments: str) -> str:
    """Arguments echoed back in history must be a JSON object; a malformed one is replayed as "{}"
    (the tool message that answered it already says what was wrong)."""
    try:
        return arguments if isinstance(json.loads(arguments), dict) else "{}"
    except ValueError:
        return "{}"


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for m in messages:
        if m.role == "user":
            wire.append({"role": "user", "content": m.text})
        elif m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _replayable_arguments(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            elif not m.text:
                entry["content"] = ""
            wire.append(entry)
        elif m.role == "tool":
            wire.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text})
        else:  # pragma: no cover - Message.role is a Literal
            raise ValueError(f"unknown message role {m.role!r}")
    return wire


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def _detail(exc: Exception) -> str:
    return sdk_error_detail("openai", exc)


class OpenAIChatModel:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.max_tokens = max_tokens
        self.cap_key = "max_tokens" if base_url else "max_completion_tokens"
        if base_url and not api_key and not os.environ.get("OPENAI_API_KEY"):
            api_key = NO_KEY
        try:
            self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
        except openai.OpenAIError as exc:  # no key given and none in the environment
            raise ModelConfigFault(f"openai: {exc}") from exc

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        request: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(system, messages),
                                   self.cap_key: self.max_tokens}
        if tools:
            request["tools"] = to_openai_tools(tools)
        try:
            response = await self._client.chat.completions.create(**request)
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            raise ModelTransient(f"openai: {type(exc).__name__}: {exc}"[:500]) from exc
        except openai.APIStatusError as exc:
            raise error_for_status(exc.status_code, _detail(exc), exc.response.headers) from exc
        except (openai.APIError, json.JSONDecodeError) as exc:  # a 2xx the SDK could not read
            raise ModelTransient(f"openai: unreadable response: {exc}"[:500]) from exc
        return self._turn(response)

    def _turn(self, response: Any) -> ModelTurn:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelTransient("openai: the response has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise ModelTransient("openai: the response's choice has no message")
        refusal = getattr(message, "refusal", None)
        text = message.content or refusal or ""
        calls = []
        for call in message.tool_calls or []:
            # a custom (non-function) tool call names a tool we never offered: the loop answers it as unknown
            function = getattr(call, "function", None) or getattr(call, "custom", None)
            calls.append(ToolCall(
                id=getattr(call, "id", None) or f"call_{uuid.uuid4().hex[:24]}",
                name=getattr(function, "name", None) or "",
                arguments=getattr(function, "arguments", None) or getattr(function, "input", None) or "",
            ))
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is None:   # llama.cpp's server reports its prompt cache in `timings`
            timings = (getattr(response, "model_extra", None) or {}).get("timings")
            cached = timings.get("cache_n") if isinstance(timings, dict) else None
        return ModelTurn(
            text=text,
            tool_calls=tuple(calls),
            input_tokens=(getattr(usage, "prompt_tokens", None) or 0) if usage else 0,
            output_tokens=(getattr(usage, "completion_tokens", None) or 0) if usage else 0,
            cached_tokens=cached if isinstance(cached, int) and cached > 0 else 0,
            truncated=choice.finish_reason == "length",
            stop=_stop(choice.finish_reason, refusal, calls),
        )


def _stop(finish_reason: str | None, refusal: str | None, calls: list[Any]) -> StopKind:
    if refusal:
        return "refusal"
    stops: dict[str, StopKind] = {"length": "length", "content_filter": "content_filter", "tool_calls": "tool_calls",
                                  "function_call": "tool_calls"}
    return stops.get(finish_reason or "", "tool_calls" if calls else "end")
