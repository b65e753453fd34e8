"""Model selection. The SDKs are imported only inside their adapter module, and only when selected."""
from __future__ import annotations

from worker.models.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_S,
    Message,
    Model,
    ModelConfigFault,
    ModelError,
    ModelRefused,
    ModelTransient,
    ModelTurn,
    RefusalReason,
    SystemPrompt,
    ToolCall,
    ToolSpec,
)
from worker.models.offline import OfflineModel

__all__ = [
    "Message", "Model", "ModelConfigFault", "ModelError", "ModelRefused", "ModelTransient", "ModelTurn",
    "OfflineModel", "RefusalReason", "SystemPrompt", "ToolCall", "ToolSpec", "load_model",
]

SPEC_HELP = "expected 'offline', 'openai:<model>' or 'anthropic:<model>'"


def load_model(spec: str, *, base_url: str | None = None, api_key: str | None = None,
               timeout: float = DEFAULT_TIMEOUT_S, max_tokens: int = DEFAULT_MAX_TOKENS) -> Model:
    """"offline" (also "" ), "openai:<model>" or "anthropic:<model>". Unknown spec: ValueError.

    A missing API key (none given, none in the SDK's environment variable) raises ModelConfigFault, unless a
    base URL is given (a local server such as Ollama or llama.cpp needs none).
    """
    text = (spec or "").strip()
    if text in ("", "offline"):
        return OfflineModel()
    provider, _, model = text.partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if provider == "openai" and model:
        from worker.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(model, base_url=base_url, api_key=api_key, timeout=timeout, max_tokens=max_tokens)
    if provider == "anthropic" and model:
        from worker.models.anthropic_messages import AnthropicMessagesModel

        return AnthropicMessagesModel(model, base_url=base_url, api_key=api_key, timeout=timeout,
                                      max_tokens=max_tokens)
    raise ValueError(f"unknown model spec {spec!r}: {SPEC_HELP}")
