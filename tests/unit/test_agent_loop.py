"""The agent loop with a scripted model and in-memory fakes of the shop's tools."""
import asyncio
import json
import re

import pydantic
import pytest

from tests.support.fake_model_servers import FakeShop, NoArgs, RecordingJournal
from worker.agent_loop import (
    NOTICE_MODEL_CALLS,
    NOTICE_OUTPUT_SIZE,
    NOTICE_PARTIAL,
    NOTICE_SECONDS,
    NOTICE_TOOL_CALLS,
    NOTICE_TRUNCATED,
    Limits,
    _echoes,
    run_agent,
)
from worker.figures import DASH
from worker.models.base import Message, ModelRefused, ModelTransient, ModelTurn, ToolCall
from worker.models.scripted import ScriptedModel, ScriptExhausted
from worker.tools.registry import Tool, ToolRegistry


def call(name, arguments="{}", id=None):
    return ToolCall(id=id if id is not None else f"id-{name}-{arguments}", name=name, arguments=arguments)


def tools(*calls, text=""):
    return ModelTurn(text=text, tool_calls=tuple(calls))


def say(text, **kw):
    return ModelTurn(text=text, tool_calls=(), **kw)


@pytest.fixture
def shop():
    return FakeShop()


@pytest.fixture
def journal(shop):
    return RecordingJournal(shop.events)  # one event list: journal and tool runs interleave in true order


async def run(model, shop, journal, user_text="how much vanilla", **kw):
    return await run_agent(model=model, registry=shop.registry(), system="You help Lucy.",
                           history=kw.pop("history", ()),
                           user_text=user_text, journal=journal, context={"ctx": True}, **kw)


async def test_tool_round_trip_journaled_started_before_finished_after(shop, journal):
    model = ScriptedModel([
        ModelTurn("Let me look.", (call("get_item", '{"item": "vanilla"}', id="c1"),),
                  input_tokens=10, output_tokens=4),
        say("Vanilla: 2 tubs on hand.", input_tokens=5, output_tokens=3),
    ])
    result = await run(model, shop, journal)

    shown = {"item": "vanilla", "on_hand": 2, "reorder_point": 8, "target": 8, "unit_cost": "$3.00", "unit": "tubs",
             "open_proposal": None}   # what the model is shown: money as the owner reads it (C13)
    assert shop.events == [
        ("started", "c1", "get_item", {"item": "vanilla"}, "read"),
        ("run", "get_item", {"item": "vanilla"}),
        ("finished", "c1", "done", shown),
    ]
    assert result.stop_reason == "answered"
    assert result.prose == "Vanilla: 2 tubs on hand."
    # the prose cites on hand, and the question names vanilla: vanilla's figures are shown (C13)
    assert result.text == ("Vanilla: 2 tubs on hand.\n\nFigures:\n- vanilla on hand: 2 tubs\n"
                           "- vanilla reorder point: 8 tubs\n- vanilla target: 8 tubs\n- vanilla unit cost: $3.00")
    assert result.model_calls == 2 and result.input_tokens == 15 and result.output_tokens == 7
    assert [(r.call_id, r.tool, r.arguments, r.ok, r.effect) for r in result.tool_results] == [
        ("c1", "get_item", {"item": "vanilla"}, True, "read")]

    first, second = model.calls
    assert first.system == "You help Lucy."
    assert first.messages == (Message("user", "how much vanilla"),)
    assert [t.name for t in first.tools] == ["list_stock", "get_item", "reorder_need", "draft_order", "propose_order"]
    assert second.messages[1] == Message("assistant", "Let me look.",
                                         (call("get_item", '{"item": "vanilla"}', id="c1"),))
    tool_message = second.messages[2]
    assert tool_message.role == "tool" and tool_message.tool_call_id == "c1" and not tool_message.is_error
    assert json.loads(tool_message.text) == shown


async def test_history_comes_before_the_new_user_message(shop, journal):
    history = (Message("user", "hello"), Message("assistant", "Hi Lucy."))
    model = ScriptedModel([say("ok")])
    await run(model, shop, journal, user_text="stock", history=history)
    assert model.calls[0].messages == (*history, Message("user", "stock"))


async def test_unknown_tool_and_invalid_arguments_never_reach_the_tool_or_journal(shop, journal):
    bad_calls = (
        call("send_money", '{"to": "me"}', id="a"),
        call("get_item", '{"itm": "vanilla"}', id="b"),                # missing field
        call("get_item", '{"item": "vanil', id="c"),                    # malformed JSON (cut off)
        call("propose_order", '{"item": "vanilla", "quantity": -1}', id="d"),  # constraint
        call("get_item", '["vanilla"]', id="e"),                       # not an object
    )
    model = ScriptedModel([tools(*bad_calls), say("Sorry.")])
    result = await run(model, shop, journal)

    assert shop.events == []  # no journal entry, no tool run
    assert result.tool_results == ()
    replies = model.calls[1].messages[2:]
    assert [m.tool_call_id for m in replies] == ["a", "b", "c", "d", "e"]
    assert all(m.role == "tool" and m.is_error for m in replies)
    errors = [json.loads(m.text)["error"] for m in replies]
    assert errors[0].startswith("unknown tool 'send_money'") and "get_item" in errors[0]
    assert all(e.startswith("invalid arguments for") for e in errors[1:])
    assert "item" in errors[1] and "quantity" in errors[3]
    assert result.stop_reason == "answered" and result.text == "Sorry."


async def test_empty_arguments_mean_no_arguments(shop, journal):
    model = ScriptedModel([tools(call("list_stock", "", id="s")), say("Done.")])
    result = await run(model, shop, journal)
    assert shop.events[0] == ("started", "s", "list_stock", {}, "read")
    assert result.tool_results[0].ok


async def test_tool_error_reaches_the_model_as_an_error(shop, journal):
    model = ScriptedModel([tools(call("get_item", '{"item": "pistachio"}', id="p")), say("No pistachio.")])
    result = await run(model, shop, journal)

    failure = {"error": "unknown item 'pistachio'"}
    assert shop.events == [
        ("started", "p", "get_item", {"item": "pistachio"}, "read"),
        ("run", "get_item", {"item": "pistachio"}),
        ("finished", "p", "failed", failure),
    ]
    reply = model.calls[1].messages[-1]
    assert reply.is_error and reply.tool_call_id == "p" and json.loads(reply.text) == failure
    assert [(r.ok, r.result) for r in result.tool_results] == [(False, failure)]
    assert result.text == "No pistachio."  # no figures from a failed call


async def test_other_exception_from_a_tool_propagates_and_stays_started(shop, journal):
    async def broken(args, context):
        raise RuntimeError("bug")

    registry = ToolRegistry([Tool("broken", "d", NoArgs, broken, "internal")])
    model = ScriptedModel([tools(call("broken", id="x")), say("never")])
    with pytest.raises(RuntimeError, match="bug"):
        await run_agent(model=model, registry=registry, system="", history=(), user_text="go",
                        journal=journal, context=None)
    assert shop.events == [("started", "x", "broken", {}, "internal")]
    assert model.remaining == 1


async def test_tool_returning_a_non_dict_is_a_bug(shop, journal):
    async def wrong(args, context):
        return ["not", "a", "dict"]

    registry = ToolRegistry([Tool("wrong", "d", NoArgs, wrong, "read")])
    with pytest.raises(TypeError, match="not a dict"):
        await run_agent(model=ScriptedModel([tools(call("wrong"))]), registry=registry, system="", history=(),
                        user_text="go", journal=journal, context=None)


async def test_context_reaches_the_tool_fn(journal):
    seen = []

    async def probe(args, context):
        seen.append(context)
        return {}

    registry = ToolRegistry([Tool("probe", "d", NoArgs, probe, "read")])
    await run_agent(model=ScriptedModel([tools(call("probe")), say("ok")]), registry=registry, system="",
                    history=(), user_text="go", journal=journal, context="the-store")
    assert seen == ["the-store"]


async def test_parallel_calls_run_sequentially_in_the_given_order(shop, journal):
    async def slow_get(args, context):  # yields to the loop mid-call: an overlap would show in the events
        shop.events.append(("enter", args.item))
        await asyncio.sleep(0)
        shop.events.append(("exit", args.item))
        return {"item": args.item, "on_hand": shop.stock[args.item]["on_hand"], "unit": "tubs"}

    registry = shop.registry()
    registry._tools["get_item"] = Tool("get_item", "d", registry.get("get_item").args_model, slow_get, "read")
    order = ["strawberry", "vanilla", "chocolate"]
    model = ScriptedModel([tools(*(call("get_item", json.dumps({"item": i}), id=i) for i in order)), say("ok")])
    result = await run_agent(model=model, registry=registry, system="", history=(), user_text="go",
                             journal=journal, context=None)

    kinds = [(e[0], e[1]) for e in shop.events]
    expected = []
    for item in order:
        expected += [("started", item), ("enter", item), ("exit", item), ("finished", item)]
    assert kinds == expected
    assert [r.call_id for r in result.tool_results] == order
    assert [m.tool_call_id for m in model.calls[1].messages[2:]] == order
    assert result.text == "ok"   # a reply with no number has no figures block (C13)


async def test_empty_or_repeated_call_ids_get_fresh_unique_ids(shop, journal):
    model = ScriptedModel([
        tools(call("list_stock", id=""), call("list_stock", id="same")),
        tools(call("list_stock", id="same")),
        say("ok"),
    ])
    result = await run(model, shop, journal)
    ids = [r.call_id for r in result.tool_results]
    assert len(set(ids)) == 3 and ids[1] == "same" and ids[0] and ids[2] != "same"
    started = [e[1] for e in shop.events if e[0] == "started"]
    assert started == ids
    echoed = [c.id for m in model.calls[2].messages if m.role == "assistant" for c in m.tool_calls]
    replied = [m.tool_call_id for m in model.calls[2].messages if m.role == "tool"]
    assert echoed == replied == ids


async def test_model_narration_of_a_number_never_becomes_the_number(shop, journal):
    model = ScriptedModel([tools(call("get_item", '{"item": "vanilla"}')), say("vanilla: 7")])
    result = await run(model, shop, journal)
    assert "7" not in result.text
    # the question names vanilla: its figures are shown under the reply (C13)
    assert result.text == (f"vanilla: {DASH}\n\nFigures:\n- vanilla on hand: 2 tubs\n- vanilla reorder point: 8 tubs\n"
                           "- vanilla target: 8 tubs\n- vanilla unit cost: $3.00")
    assert result.prose == "vanilla: 7"  # the raw prose is kept for the record; the report is `text`


# --- limits -----------------------------------------------------------------------------------------------

def test_limit_notices_hold_no_digits_so_c13_leaves_them_alone():
    for notice in (NOTICE_MODEL_CALLS, NOTICE_TOOL_CALLS, NOTICE_SECONDS, NOTICE_OUTPUT_SIZE, NOTICE_PARTIAL,
                   NOTICE_TRUNCATED):
        assert not re.search(r"\d", notice)


async def test_stop_model_calls(shop, journal):
    model = ScriptedModel([tools(call("list_stock", id="1")), tools(call("get_item", '{"item": "vanilla"}', id="2"))])
    result = await run(model, shop, journal, limits=Limits(max_model_calls=2))
    assert result.stop_reason == "model_calls" and result.model_calls == 2
    assert [r.tool for r in result.tool_results] == ["list_stock"]  # the last response's tools did not run
    assert ("run", "get_item", {"item": "vanilla"}) not in shop.events
    assert result.prose == f"{NOTICE_MODEL_CALLS} {NOTICE_PARTIAL}"
    assert result.text.startswith(NOTICE_MODEL_CALLS) and "- vanilla on hand: 2 tubs" in result.text


async def test_stop_model_calls_before_any_call_when_the_limit_is_zero(shop, journal):
    model = ScriptedModel([])
    result = await run(model, shop, journal, limits=Limits(max_model_calls=0))
    assert result.stop_reason == "model_calls" and model.calls == [] and result.text == NOTICE_MODEL_CALLS


async def test_stop_tool_calls(shop, journal):
    model = ScriptedModel([
        tools(call("get_item", '{"item": "vanilla"}', id="a"), call("bogus", id="b")),
        tools(call("get_item", '{"item": "chocolate"}', id="c"), call("get_item", '{"item": "strawberry"}', id="d")),
    ])
    result = await run(model, shop, journal, limits=Limits(max_tool_calls=3))
    assert result.stop_reason == "tool_calls"
    assert [r.call_id for r in result.tool_results] == ["a", "c"]  # "b" was rejected but counted, "d" never ran
    assert ("run", "get_item", {"item": "strawberry"}) not in shop.events
    assert result.prose.startswith(NOTICE_TOOL_CALLS)
    # a run stopped by a limit lists every figure of the calls that ran (its notice cites none)
    assert result.text.endswith("- vanilla on hand: 2 tubs\n- vanilla reorder point: 8 tubs\n- vanilla target: 8 tubs\n"
                                "- vanilla unit cost: $3.00\n- chocolate on hand: 12 tubs\n"
                                "- chocolate reorder point: 6 tubs\n- chocolate target: 12 tubs\n"
                                "- chocolate unit cost: $2.50")


async def test_stop_seconds_checked_before_each_tool_call(shop, journal):
    clock = [0.0]

    def slow_model(messages):
        clock[0] += 50.0
        return tools(call("get_item", '{"item": "vanilla"}', id=f"v{clock[0]}"))

    model = ScriptedModel([slow_model, slow_model, slow_model])
    result = await run(model, shop, journal, limits=Limits(max_seconds=120), monotonic=lambda: clock[0])
    # t=50 tool runs, t=100 tool runs, t=150: past the deadline, the third call's tool does not run
    assert result.stop_reason == "seconds" and result.model_calls == 3
    assert len(result.tool_results) == 2
    assert result.prose.startswith(NOTICE_SECONDS)


async def test_stop_seconds_checked_before_each_model_call(shop, journal):
    clock = [0.0]

    async def slow_tool(args, context):
        clock[0] += 500
        return {}

    registry = ToolRegistry([Tool("slow", "d", NoArgs, slow_tool, "read")])
    model = ScriptedModel([tools(call("slow")), say("never")])
    result = await run_agent(model=model, registry=registry, system="", history=(), user_text="go",
                             journal=journal, context=None, monotonic=lambda: clock[0])
    assert result.stop_reason == "seconds" and len(model.calls) == 1 and result.prose == NOTICE_SECONDS


async def test_stop_seconds_cancels_a_model_call_that_outlives_the_deadline(shop, journal):
    cancelled = asyncio.Event()

    async def hang(messages):
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    model = ScriptedModel([hang])
    result = await run(model, shop, journal, limits=Limits(max_seconds=0.05))
    assert result.stop_reason == "seconds" and cancelled.is_set() and result.model_calls == 0


async def test_a_timeout_raised_by_the_model_itself_propagates(shop, journal):
    model = ScriptedModel([TimeoutError("the model's own")])
    with pytest.raises(TimeoutError, match="own"):
        await run(model, shop, journal)


async def test_stop_output_size(shop, journal):
    words = " ".join(f"word{n:03d}" for n in range(50))  # 399 characters
    model = ScriptedModel([say(words)])
    result = await run(model, shop, journal, limits=Limits(max_output_chars=120))
    assert result.stop_reason == "output_size"
    assert len(result.prose) <= 120 and result.prose.endswith(NOTICE_OUTPUT_SIZE)
    kept = result.prose[: -len(NOTICE_OUTPUT_SIZE)].split()
    assert kept and all(re.fullmatch(r"word\d{3}", w) for w in kept)  # cut between words, never inside


async def test_output_size_never_cuts_inside_a_number(shop, journal):
    model = ScriptedModel([tools(call("get_item", '{"item": "chocolate"}')), say("chocolate " * 3 + "12" * 40)])
    result = await run(model, shop, journal, limits=Limits(max_output_chars=90))
    assert result.stop_reason == "output_size" and "1" not in result.prose


async def test_answer_at_the_limit_is_not_cut(shop, journal):
    result = await run(ScriptedModel([say("x" * 50)]), shop, journal, limits=Limits(max_output_chars=50))
    assert result.stop_reason == "answered" and result.prose == "x" * 50


async def test_truncated_and_empty_answers_are_said_plainly(shop, journal):
    result = await run(ScriptedModel([say("Vanilla is", truncated=True)]), shop, journal)
    assert result.prose == f"Vanilla is\n\n{NOTICE_TRUNCATED}"
    result = await run(ScriptedModel([say("  ")]), shop, journal)
    assert result.stop_reason == "answered" and result.text.strip()


# --- model errors and the scripted double --------------------------------------------------------------------

@pytest.mark.parametrize("error", [ModelTransient("slow down", status=429, retry_after=3.0),
                                   ModelRefused("bad request", status=400)])
async def test_model_errors_propagate(shop, journal, error):
    model = ScriptedModel([tools(call("list_stock")), error])
    with pytest.raises(type(error)) as raised:
        await run(model, shop, journal)
    assert raised.value is error


async def test_scripted_model_fails_when_called_more_than_scripted(shop, journal):
    with pytest.raises(ScriptExhausted):
        await run(ScriptedModel([tools(call("list_stock"))]), shop, journal)


def test_tool_rejects_nested_arguments_and_bad_names():
    class Inner(pydantic.BaseModel):
        x: int

    class Nested(pydantic.BaseModel):
        inner: Inner

    async def fn(args, context):
        return {}

    with pytest.raises(ValueError, match="flat"):
        Tool("nested", "d", Nested, fn, "read")
    with pytest.raises(ValueError, match="name"):
        Tool("bad name!", "d", NoArgs, fn, "read")
    with pytest.raises(ValueError, match="effect"):
        Tool("ok", "d", NoArgs, fn, "write")
    registry = ToolRegistry([Tool("ok", "d", NoArgs, fn, "read")])
    with pytest.raises(ValueError, match="already"):
        registry.register(Tool("ok", "d", NoArgs, fn, "read"))
    assert registry.get("missing") is None and registry.names() == ("ok",) and "ok" in registry


def test_tool_spec_is_a_flat_schema():
    spec = FakeShop().registry().get("propose_order").spec()
    assert spec.name == "propose_order"
    assert spec.parameters == {
        "type": "object",
        "properties": {"item": {"type": "string"},
                       "quantity": {"type": "integer", "exclusiveMinimum": 0, "maximum": 1000}},
        "required": ["item", "quantity"],
    }
    assert FakeShop().registry().get("list_stock").spec().parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize("answer, question, echoes", [
    ("How many TUBS of yoghurt?!", "how many tubs of yoghurt", True),
    ("how  many tubs_of yoghurt", "How many tubs of yoghurt?", True),      # `_` and spacing are not words
    ("How many tubs of yoghurt? We have 2.", "How many tubs of yoghurt?", False),   # the question and more
    ("How many tubs", "How many tubs of yoghurt?", False),                 # a prefix of it
    ("We have 2 tubs of yoghurt.", "How many tubs of yoghurt?", False),
    ("", "?!", False),                                                     # a question without words
    ("Crème brûlée?", "crème BRÛLÉE", True),
])
def test_an_echo_is_the_question_again_word_for_word(answer: str, question: str, echoes: bool):
    assert _echoes(answer, question) is echoes
