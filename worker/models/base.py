"""Provider-neutral model types and the error classes the worker maps (C7, C9).

Everything the agent loop and the adapters exchange is defined here, so the loop never sees a provider's
wire format and the store can keep plain rows (role, text, tool calls, tool_call_id, is_error).
"""
from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable


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


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict  # JSON schema of the arguments object


@dataclass(frozen=True)
class ModelTurn:
    text: str
    tool_calls: tuple[ToolCall, ...]
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False  # the provider stopped at its output-length limit


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


class ModelRefused(ModelError):
    """400/413/422 and other 4xx about this request: fail the turn with an explanation."""


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
    return ModelRefused(detail, status=status)


def sdk_error_detail(provider: str, exc: Exception) -> str:
    """The provider's own error message from an SDK status error (both SDKs carry `.body` and `.message`)."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
    return f"{provider}: {message or getattr(exc, 'message', str(exc))}"[:500]
