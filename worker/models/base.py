"""Provider-neutral model types and the error classes the worker maps (C7, C9).

Everything the agent loop and the adapters exchange is defined here, so the loop never sees a provider's
wire format and the store can keep plain rows (role, text, tool calls, tool_call_id, is_error).
"""
from __future__ import annotations

import email.utils
import enum
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it (may be empty or malformed)


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


class SystemPrompt(str):
    """A system prompt in two blocks: `cached` (stable from turn to turn: the shop) and `turn` (today's date and
    time). As a str it is both, joined by a blank line, so a model that knows no blocks reads it whole; the
    Anthropic adapter sends two system blocks with the cache breakpoint after the first."""

    cached: str
    turn: str

    def __new__(cls, cached: str, turn: str = "") -> SystemPrompt:
        obj = super().__new__(cls, f"{cached}\n\n{turn}" if cached and turn else cached or turn)
        obj.cached, obj.turn = cached, turn
        return obj


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


StopKind = Literal["end", "tool_calls", "length", "content_filter", "refusal", "context_window"]
NO_KEY = "no-key"   # sent as the key to a server at SHOPBOT_MODEL_BASE_URL when none is set (it needs none)
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ModelTurn:
    text: str
    tool_calls: tuple[ToolCall, ...]
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False  # the provider stopped at its output-length limit
    stop: StopKind = "end"   # why the provider stopped (a content filter, a refusal, a full context window, ...)
    cached_tokens: int = 0   # of input_tokens, those the provider served from its prompt cache (C18)



@runtime_checkable
class Model(Protocol):
    name: str

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelTurn: ...


class ModelError(Exception):
    """Root of every model failure. `status` is the HTTP status when there was one."""

    def __init__(self, detail: str, *, status: int | None = None) -> None:
        super().__init__(detail if status is None else f"{detail} (HTTP {status})")
        self.detail = detail
        self.status = status


class ModelTransient(ModelError):
    """Timeout, connection error, 408/409/429, 5xx, a malformed 200: release the turn with backoff."""

    def __init__(self, detail: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(detail, status=status)
        self.retry_after = retry_after


class RefusalReason(enum.StrEnum):
    """Why a model refused a request, when it says so; compared by identity (`is`)."""
    CONTEXT_WINDOW = "context_window"    # the request was too long for the model's context window


class ModelRefused(ModelError):
    """400/413/422 and other 4xx about this request: fail the turn with an explanation. `reason` is
    `RefusalReason.CONTEXT_WINDOW` when the request was too long for the model's context window."""

    def __init__(self, detail: str, *, status: int | None = None, reason: RefusalReason | None = None) -> None:
        super().__init__(detail, status=status)
        self.reason = RefusalReason(reason) if reason is not None else None


_CONTEXT_WORDS = ("context_length_exceeded", "context length", "context window", "maximum context", "too many tokens",
                  "prompt is too long", "exceed_context_size", "exceeds the available context")


def is_context_overflow(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _CONTEXT_WORDS)


class ModelConfigFault(ModelError):
    """401/402/403/404, a 3xx or a missing key: the bot's configuration is wrong; stop, leave work pending."""


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or HTTP date); None when absent."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - (time.time() if now is None else now))


def error_for_status(
    status: int, detail: str, headers: Mapping[str, str] | None = None
) -> ModelError:
    """The one mapping from an HTTP status to the worker's three outcomes (same for every provider)."""
    if status == 429:
        return ModelTransient(detail, status=status, retry_after=parse_retry_after(headers))
    if status in (408, 409) or status >= 500:
        return ModelTransient(detail, status=status, retry_after=parse_retry_after(headers))
    if status in (401, 402, 403, 404) or status < 400:  # a 3xx means a wrong base URL
        return ModelConfigFault(detail, status=status)
    reason = RefusalReason.CONTEXT_WINDOW if is_context_overflow(detail) else None
    return ModelRefused(detail, status=status, reason=reason)


def sdk_error_detail(provider: str, exc: Exception) -> str:
    """The provider's own error message from an SDK status error (both SDKs carry `.body` and `.message`)."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
    return f"{provider}: {message or getattr(exc, 'message', str(exc))}"[:500]
