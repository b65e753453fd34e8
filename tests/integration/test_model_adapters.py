"""Both provider adapters against the loopback fake server: wire format, parsing and error mapping.

Every error case asserts exactly one HTTP request: the SDKs run with max_retries=0, the worker's release of
the turn is the only retry.
"""
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.support.fake_model_servers import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    FakeModelServer,
    FakeResponse,
    FakeShop,
    RecordingJournal,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
    openai_completion,
    openai_error,
    openai_text,
    openai_tool_calls,
)
from worker.agent_loop import run_agent
from worker.models import load_model
from worker.models.anthropic_messages import to_anthropic_messages
from worker.models.base import (
    Message,
    ModelConfigFault,
    ModelRefused,
    ModelTransient,
    ToolCall,
    ToolSpec,
    parse_retry_after,
)
from worker.models.openai_chat import to_openai_messages

SPEC = ToolSpec("get_item", "One item's stock.", {"type": "object", "properties": {"item": {"type": "string"}},
                                                   "required": ["item"]})


@dataclass(frozen=True)
class Provider:
    name: str
    path: str
    text: Callable
    tool_call: Callable  # (id, name, arguments dict) -> FakeResponse
    error: Callable
    base_url: Callable

    def model(self, server, timeout=5.0):
        return load_model(f"{self.name}:test-model", base_url=self.base_url(server), api_key="test-key",
                          timeout=timeout)


PROVIDERS = [
    Provider("openai", OPENAI_PATH, openai_text,
             lambda i, n, a: openai_tool_calls((i, n, json.dumps(a))), openai_error,
             lambda s: s.openai_base_url),
    Provider("anthropic", ANTHROPIC_PATH, anthropic_text,
             lambda i, n, a: anthropic_tool_use((i, n, a)), anthropic_error,
             lambda s: s.anthropic_base_url),
]


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request):
    return request.param


async def complete_once(provider, script, **kw):
    async with FakeModelServer(script) as server:
        model = provider.model(server, **kw)
        try:
            return await model.complete("You help Lucy.", [Message("user", "hi")], [SPEC]), server
        finally:
            await model.aclose()


async def expect_error(provider, response, error_type, **kw):
    async with FakeModelServer([response]) as server:
        model = provider.model(server, **kw)
        try:
            with pytest.raises(error_type) as raised:
                await model.complete("", [Message("user", "hi")], [])
        finally:
            await model.aclose()
        assert len(server.requests) == 1, "exactly one HTTP request: no SDK retry"
        assert server.requests[0].path == provider.path
    return raised.value


# --- success paths --------------------------------------------------------------------------------------------

async def test_text_answer(provider):
    usage = ({"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16} if provider.name == "openai"
             else {"input_tokens": 11, "output_tokens": 5})
    turn, server = await complete_once(provider, [provider.text("Vanilla: 2 tubs.", usage=usage)])
    assert (turn.text, turn.tool_calls, turn.input_tokens, turn.output_tokens, turn.truncated) == (
        "Vanilla: 2 tubs.", (), 11, 5, False)
    (request,) = server.requests
    body = request.body
    assert body["model"] == "test-model"
    if provider.name == "openai":
        assert body["messages"] == [{"role": "system", "content": "You help Lucy."}, {"role": "user", "content": "hi"}]
        assert body["tools"] == [{"type": "function", "function": {
            "name": "get_item", "description": "One item's stock.", "parameters": SPEC.parameters}}]
        assert "stream" not in body or body["stream"] is False
    else:
        assert body["system"] == [{"type": "text", "text": "You help Lucy.", "cache_control": {"type": "ephemeral"}}]
        assert body["max_tokens"] == 1024 and not body.get("stream")
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        assert body["tools"] == [{"name": "get_item", "description": "One item's stock.",
                                  "input_schema": SPEC.parameters}]
    assert request.headers["x-stainless-retry-count"] == "0"


@pytest.mark.parametrize("usage, cached", [
    ({"prompt_tokens": 1200, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1100}}, 1100),
    ({"prompt_tokens": 1200, "completion_tokens": 5}, 0),
])
async def test_openai_cached_prompt_tokens_are_read_from_the_usage(usage, cached):
    async with FakeModelServer([openai_text("ok", usage=usage)]) as server:
        model = load_model("openai:test-model", base_url=server.openai_base_url, api_key="k", timeout=5)
        try:
            turn = await model.complete("s", [Message("user", "hi")], [])
        finally:
            await model.aclose()
    assert (turn.input_tokens, turn.cached_tokens) == (1200, cached)


async def test_llama_cpp_timings_give_the_cached_tokens_when_the_usage_has_none():
    response = openai_text("ok", usage={"prompt_tokens": 900, "completion_tokens": 5})
    response.body["timings"] = {"cache_n": 850, "prompt_n": 50}
    async with FakeModelServer([response]) as server:
        model = load_model("openai:test-model", base_url=server.openai_base_url, api_key="k", timeout=5)
        try:
            turn = await model.complete("s", [Message("user", "hi")], [])
        finally:
            await model.aclose()
    assert (turn.input_tokens, turn.cached_tokens) == (900, 850)


async def test_anthropic_cache_reads_count_as_input_and_as_cached():
    usage = {"input_tokens": 20, "output_tokens": 5, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 80}
    async with FakeModelServer([anthropic_text("ok", usage=usage)]) as server:
        model = load_model("anthropic:test-model", base_url=server.anthropic_base_url, api_key="k", timeout=5)
        try:
            turn = await model.complete("s", [Message("user", "hi")], [])
        finally:
            await model.aclose()
    assert (turn.input_tokens, turn.cached_tokens) == (1100, 1000)


async def test_tool_call_then_text_through_run_agent(provider):
    shop = FakeShop()
    script = [provider.tool_call("call_1", "get_item", {"item": "vanilla"}), provider.text("vanilla: 7 tubs")]
    async with FakeModelServer(script) as server:
        model = provider.model(server)
        try:
            result = await run_agent(model=model, registry=shop.registry(), system="sys", history=(),
                                     user_text="how much vanilla", journal=RecordingJournal(shop.events),
                                     context=None)
        finally:
            await model.aclose()
    assert result.stop_reason == "answered" and result.model_calls == 2
    assert result.text.startswith("vanilla: — tubs\n\nFigures:\n- vanilla on hand: 2 tubs\n")  # C13 over a real wire
    assert [e[0] for e in shop.events] == ["started", "run", "finished"]

    second = server.requests[1].body["messages"]
    item = {"item": "vanilla", "on_hand": 2, "reorder_point": 8, "target": 8, "unit_cost": "$3.00", "unit": "tubs",
            "open_proposal": None}
    if provider.name == "openai":
        assert second[-2] == {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_item", "arguments": '{"item": "vanilla"}'}}]}
        assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
        assert json.loads(second[-1]["content"]) == item
    else:
        assert second[-2] == {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "get_item", "input": {"item": "vanilla"}}]}
        (block,) = second[-1]["content"]
        assert second[-1]["role"] == "user" and block["type"] == "tool_result"
        assert block["tool_use_id"] == "call_1" and "is_error" not in block
        assert json.loads(block["content"]) == item


async def test_truncated_answer(provider):
    response = (openai_text("Vanilla is", finish_reason="length") if provider.name == "openai"
                else anthropic_text("Vanilla is", stop_reason="max_tokens"))
    turn, _ = await complete_once(provider, [response])
    assert turn.truncated and turn.text == "Vanilla is"


# --- error mapping --------------------------------------------------------------------------------------------

async def test_429_is_transient_with_retry_after_and_not_retried(provider):
    error = await expect_error(provider, provider.error(429, "slow down", headers={"retry-after": "7"}),
                               ModelTransient)
    assert error.status == 429 and error.retry_after == 7.0 and "slow down" in error.detail


async def test_429_without_retry_after(provider):
    error = await expect_error(provider, provider.error(429, "slow down"), ModelTransient)
    assert error.retry_after is None


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_5xx_is_transient(provider, status):
    error = await expect_error(provider, provider.error(status, "oops"), ModelTransient)
    assert error.status == status


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_bad_key_or_unknown_model_is_a_config_fault(provider, status):
    error = await expect_error(provider, provider.error(status, "no such model"), ModelConfigFault)
    assert error.status == status and "no such model" in error.detail


@pytest.mark.parametrize("status", [400, 422])
async def test_invalid_request_is_refused(provider, status):
    error = await expect_error(provider, provider.error(status, "messages: bad"), ModelRefused)
    assert error.status == status


async def test_timeout_is_transient(provider):
    error = await expect_error(provider, FakeResponse(hang=True), ModelTransient, timeout=0.2)
    assert error.status is None


async def test_connection_refused_is_transient(provider):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = load_model(f"{provider.name}:m",
                       base_url=f"http://127.0.0.1:{port}" + ("/v1" if provider.name == "openai" else ""),
                       api_key="k", timeout=2)
    try:
        with pytest.raises(ModelTransient):
            await model.complete("", [Message("user", "hi")], [])
    finally:
        await model.aclose()


@pytest.mark.parametrize("response", [FakeResponse(200, raw=b"<html>not json</html>"), FakeResponse(200, {"x": 1})])
async def test_unreadable_200_is_transient(provider, response):
    await expect_error(provider, response, ModelTransient)


def test_retry_after_forms():
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_unknown_spec_and_missing_key(monkeypatch):
    with pytest.raises(ValueError, match="openai:<model>"):
        load_model("gemini:x")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ModelConfigFault):
        load_model("openai:x")
    with pytest.raises(ModelConfigFault):
        load_model("anthropic:x")


# --- OpenAI specifics -----------------------------------------------------------------------------------------

async def test_openai_missing_ids_empty_and_malformed_arguments_usage_absent():
    shop = FakeShop()
    script = [
        openai_tool_calls((None, "list_stock", ""), (None, "get_item", '{"item": "vani')),
        openai_text("done"),
    ]
    async with FakeModelServer(script) as server:
        model = load_model("openai:m", base_url=server.openai_base_url, api_key="k")
        try:
            result = await run_agent(model=model, registry=shop.registry(), system="", history=(),
                                     user_text="stock", journal=RecordingJournal(shop.events), context=None)
        finally:
            await model.aclose()
    assert result.input_tokens == 0 and result.output_tokens == 0  # no usage in the responses
    assert [r.tool for r in result.tool_results] == ["list_stock"]   # the malformed call never ran
    sent = server.requests[1].body["messages"]
    echoed = sent[-3]["tool_calls"]
    ids = [c["id"] for c in echoed]
    assert all(ids) and len(set(ids)) == 2                           # synthesised, unique
    assert [c["function"]["arguments"] for c in echoed] == ["{}", "{}"]  # replayable JSON only
    assert [m["tool_call_id"] for m in sent[-2:]] == ids
    assert "invalid arguments" in json.loads(sent[-1]["content"])["error"]


async def test_openai_text_with_tool_calls_and_refusal():
    turn, _ = await complete_once(PROVIDERS[0], [openai_tool_calls(("a", "get_item", "{}"), ("b", "list_stock", "{}"),
                                                                     text="Checking both.")])
    assert turn.text == "Checking both." and [c.id for c in turn.tool_calls] == ["a", "b"]
    turn, _ = await complete_once(PROVIDERS[0], [openai_completion({"content": None, "refusal": "I can't."})])
    assert turn.text == "I can't."


def test_openai_message_conversion():
    wire = to_openai_messages("", [
        Message("user", "a"), Message("assistant", ""), Message("assistant", "x", (ToolCall("i", "t", "[1]"),)),
        Message("tool", '{"error": "no"}', tool_call_id="i", is_error=True),
    ])
    assert wire == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "x",
         "tool_calls": [{"id": "i", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "i", "content": '{"error": "no"}'},
    ]


# --- Anthropic specifics --------------------------------------------------------------------------------------

def test_anthropic_groups_tool_results_and_alternates_roles():
    calls = (ToolCall("t1", "get_item", '{"item": "vanilla"}'), ToolCall("t2", "get_item", "oops"))
    wire = to_anthropic_messages([
        Message("assistant", "Earlier answer."),
        Message("user", "first"), Message("user", ""),
        Message("assistant", "", calls),
        Message("tool", '{"on_hand": 2}', tool_call_id="t1"),
        Message("tool", '{"error": "bad"}', tool_call_id="t2", is_error=True),
        Message("user", "and chocolate?"),
    ])
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "assistant", "user"]
    assert wire[0]["content"] == [{"type": "text", "text": "(conversation continues)"}]
    assert wire[2]["content"] == [{"type": "text", "text": "first"}, {"type": "text", "text": "(empty)"}]
    assert wire[3]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "get_item", "input": {"item": "vanilla"}},
        {"type": "tool_use", "id": "t2", "name": "get_item", "input": {}},
    ]
    assert wire[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": '{"on_hand": 2}'},
        {"type": "tool_result", "tool_use_id": "t2", "content": '{"error": "bad"}', "is_error": True},
        {"type": "text", "text": "and chocolate?"},
    ]


async def test_anthropic_parallel_tool_use_with_text_and_other_blocks():
    response = anthropic_message([
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "a", "name": "get_item", "input": {"item": "vanilla"}},
        {"type": "tool_use", "id": "b", "name": "list_stock", "input": {}},
    ], stop_reason="tool_use", usage={"input_tokens": 3, "output_tokens": 9})
    turn, _ = await complete_once(PROVIDERS[1], [response])
    assert turn.text == "Let me check."
    assert turn.tool_calls == (ToolCall("a", "get_item", '{"item": "vanilla"}'), ToolCall("b", "list_stock", "{}"))
    assert (turn.input_tokens, turn.output_tokens) == (3, 9)
