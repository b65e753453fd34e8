"""Tool calls written as text (C17): the forms read, the delivery check, and the agent loop's handling of both."""
import dataclasses
import json

import pytest

from tests.support.fake_model_servers import FakeShop, RecordingJournal
from worker.agent_loop import CORRECTION, CORRECTION_CALL, UnusableAnswer, run_agent
from worker.models.base import ModelTurn, ToolCall
from worker.models.scripted import ScriptedModel
from worker.text_calls import looks_like_tool_call, text_calls

VANILLA = '{"item": "vanilla"}'


@pytest.mark.parametrize("text", [
    '{"name": "get_item", "arguments": {"item": "vanilla"}}',
    '{"name": "get_item", "parameters": {"item": "vanilla"}}',
    'Sure!\n```json\n{"name": "get_item", "arguments": {"item": "vanilla"}}\n```\n',
    '<tool_call>\n{"name": "get_item", "arguments": {"item": "vanilla"}}\n</tool_call>',
    '<tools>{"name": "get_item", "arguments": {"item": "vanilla"}}</tools>',
    '{"type": "function", "function": {"name": "get_item", "arguments": "{\\"item\\": \\"vanilla\\"}"}}',
    '{{"name": "get_item", "arguments": {"item": "vanilla"}}}',
    '[{"name": "get_item", "arguments": {"item": "vanilla"}}]',
])
def test_every_form_gives_the_call(text):
    [call] = text_calls(text)
    assert (call.name, call.arguments) == ("get_item", VANILLA) and call.id
    assert looks_like_tool_call(text)


def test_several_calls_in_one_reply_are_read_in_order():
    text = '<tool_call>{"name": "get_item", "arguments": {"item": "a"}}</tool_call>\n' \
           '<tool_call>{"name": "list_stock", "arguments": {}}</tool_call>'
    assert [(c.name, c.arguments) for c in text_calls(text)] == [("get_item", '{"item": "a"}'), ("list_stock", "{}")]


@pytest.mark.parametrize("text", ["Vanilla: 2 tubs.", 'The JSON {"a": 1} is fine.', "We have {two} tubs",
                                  '{"name": "vanilla"}'])
def test_prose_is_no_call(text):
    assert text_calls(text) == () and not looks_like_tool_call(text)


@pytest.mark.parametrize("text", ['{"name": "get_item", "arguments": {"item": ', '<tool_call>get_item</tool_call>',
                                  '```json\n{"name": "get_item", "parameters": {"item": "vanilla"\n```'])
def test_a_broken_call_is_no_call_but_still_looks_like_one(text):
    assert text_calls(text) == () and looks_like_tool_call(text)


async def run(model, shop):
    return await run_agent(model=model, registry=shop.registry(), system="s", history=(), user_text="how much vanilla",
                           journal=RecordingJournal(shop.events), context=None)


async def test_the_loop_runs_a_text_call_and_keeps_the_call_not_its_text_in_the_exchange():
    shop = FakeShop()
    model = ScriptedModel([ModelTurn('```json\n{"name": "get_item", "arguments": {"item": "vanilla"}}\n```', ()),
                           ModelTurn("Vanilla: 2 tubs.", ())])
    result = await run(model, shop)
    assert [t.tool for t in result.tool_results] == ["get_item"]
    assistant = result.exchange[1]
    assert assistant.text == "" and assistant.tool_calls[0].name == "get_item"
    assert result.exchange[-1].text == "Vanilla: 2 tubs." and result.model_text == "Vanilla: 2 tubs."


async def test_a_broken_call_gets_one_correction_and_a_second_one_is_unusable():
    broken = '<tool_call>{"name": "get_it'
    model = ScriptedModel([ModelTurn(broken, ()), ModelTurn(broken, ())])
    with pytest.raises(UnusableAnswer):
        await run(model, FakeShop())
    assert model.calls[1].messages[-1].text == CORRECTION


@pytest.mark.parametrize(("broken", "correction"), [
    ('<tool_call>{"name": "get_item", "arguments": {"item": ', CORRECTION_CALL.format(tool="get_item")),
    # negative controls: two offered tools named, or a name that is only part of a word, get the general correction
    ('<tool_call>{"name": "get_item"} or {"name": "list_stock"', CORRECTION),
    ('<tool_call>{"name": "get_items"', CORRECTION),
])
async def test_a_broken_call_naming_one_offered_tool_is_asked_for_that_call_only(broken, correction):
    model = ScriptedModel([ModelTurn(broken, ()), ModelTurn("Vanilla: no answer.", ())])
    await run(model, FakeShop())
    assert model.calls[1].messages[-1].text == correction


def test_a_made_up_tool_result_named_by_an_offered_tool_is_read_as_its_call():
    text = '<tool_response>\n{"get_item": {"item": "vanilla", "on_hand": 15}}\n</tool_response>'   # seen live
    [call] = text_calls(text, ("get_item", "list_stock"))
    assert (call.name, call.arguments) == ("get_item", '{"item": "vanilla", "on_hand": 15}')
    # negative controls: no offered names, a name not offered, more than one key, a value that is not an object
    assert text_calls(text) == () and text_calls(text, ("list_stock",)) == ()
    assert text_calls('{"get_item": {"item": "a"}, "x": 1}', ("get_item",)) == ()
    assert text_calls('{"get_item": "vanilla"}', ("get_item",)) == ()


async def test_the_loop_runs_a_made_up_tool_result_as_the_call_and_ignores_its_made_up_values():
    shop = FakeShop()
    model = ScriptedModel([ModelTurn('<tool_response>{"get_item": {"item": "vanilla", "on_hand": 15}}</tool_response>',
                                     ()), ModelTurn("Vanilla: 2 tubs.", ())])
    result = await run(model, shop)
    [ran] = result.tool_results
    assert ran.tool == "get_item" and ran.arguments == {"item": "vanilla", "ignored": {"on_hand": 15}}
    assert result.text.startswith("Vanilla: 2 tubs.")


async def test_a_blanked_answer_no_tool_backed_leaves_no_history():
    from worker.models.base import ToolCall
    shop = FakeShop()
    invented = await run(ScriptedModel([ModelTurn("Vanilla: 9 tubs.", ())]), shop)
    assert invented.text.startswith("Vanilla: — tubs.") and invented.exchange == ()
    # negative controls: a tool-backed answer and an answer with no number are history as before
    backed = await run(ScriptedModel([ModelTurn("", (ToolCall("c1", "get_item", VANILLA),)),
                                      ModelTurn("Vanilla: 2 tubs.", ())]), shop)
    assert backed.exchange[-1].text == "Vanilla: 2 tubs." and len(backed.exchange) == 4
    polite = await run(ScriptedModel([ModelTurn("I can only help with the shop.", ())]), shop)
    assert [m.text for m in polite.exchange] == ["how much vanilla", "I can only help with the shop."]


async def test_a_tool_less_answer_naming_a_shop_item_leaves_no_history_and_other_tool_less_answers_do():
    shop = FakeShop()

    async def answer(text: str) -> tuple:
        result = await run_agent(model=ScriptedModel([ModelTurn(text, ())]), registry=shop.registry(), system="s",
                                 history=(), user_text="which are low?", journal=RecordingJournal(shop.events),
                                 context=None, shop_words=("vanilla", "chocolate"))
        return result.exchange

    assert await answer("Chocolate and strawberry are low.") == ()
    assert [m.text for m in await answer("Paris is the capital of France.")][-1] == "Paris is the capital of France."


async def test_a_call_looking_text_under_a_provider_stop_is_not_delivered_either():
    model = ScriptedModel([ModelTurn('<tool_call>{"name": "get_item"', (), stop="content_filter")])
    result = await run(model, FakeShop())
    assert "tool_call" not in result.text and result.stop_reason == "content_filter"


async def test_an_answer_with_numbers_and_no_tool_is_sent_back_once_to_look_them_up():
    from worker.agent_loop import LOOK_UP, Limits
    from worker.models.base import ToolCall
    shop = FakeShop()
    model = ScriptedModel([ModelTurn("Vanilla: 9 tubs.", ()),
                           ModelTurn("", (ToolCall("c1", "get_item", VANILLA),)), ModelTurn("Vanilla: 2 tubs.", ())])
    result = await run_agent(model=model, registry=shop.registry(), system="s", history=(), user_text="and vanilla?",
                             journal=RecordingJournal(shop.events), context=None, limits=Limits(look_up=True))
    assert model.calls[1].messages[-1].text == LOOK_UP and result.text.startswith("Vanilla: 2 tubs.")
    assert all(m.text != LOOK_UP for m in result.exchange)          # the product's text is never history
    # once only, and never without the setting
    again = ScriptedModel([ModelTurn("Vanilla: 9 tubs.", ()), ModelTurn("Vanilla: 8 tubs.", ())])
    result = await run_agent(model=again, registry=shop.registry(), system="s", history=(), user_text="and vanilla?",
                             journal=RecordingJournal(shop.events), context=None, limits=Limits(look_up=True))
    assert result.text.startswith("Vanilla: — tubs.") and len(again.calls) == 2
    off = ScriptedModel([ModelTurn("Vanilla: 9 tubs.", ())])
    await run_agent(model=off, registry=shop.registry(), system="s", history=(), user_text="and vanilla?",
                    journal=RecordingJournal(shop.events), context=None)
    assert len(off.calls) == 1


def test_a_tool_response_the_model_wrote_itself_looks_like_a_call():
    text = '<tool_response>\n{"item": "chocolate", "on_hand": 15}\n</tool_response>'   # seen live after a look-up
    assert text_calls(text) == () and looks_like_tool_call(text)


async def test_an_answer_that_repeats_the_question_is_sent_back_once_and_is_not_history():
    from worker.agent_loop import ECHO
    from worker.models.base import ToolCall
    shop = FakeShop()
    model = ScriptedModel([ModelTurn("", (ToolCall("c1", "get_item", VANILLA),)),
                           ModelTurn("How much vanilla do we have?", ()), ModelTurn("We have 2 tubs.", ())])
    result = await run_agent(model=model, registry=shop.registry(), system="s", history=(),
                             user_text="How much vanilla do we have?", journal=RecordingJournal(shop.events),
                             context=None, turn_head="[Today is Monday.]")
    assert model.calls[2].messages[-1].text == ECHO and result.text.startswith("We have 2 tubs.")
    # the echo is not sent back: the round asks after the tool result itself (shown its echo, a 1.5B model echoed
    # again, 5 questions of 5; without it, it answered all 5)
    assert model.calls[2].messages[:-1] == model.calls[1].messages
    assert all(m.text not in (ECHO, "How much vanilla do we have?") for m in result.exchange)
    assert result.exchange[-1].text == "We have 2 tubs."
    # once only: a second echo is delivered as it is; negative control: an answer that is not the question
    again = ScriptedModel([ModelTurn("how much vanilla do we have", ()), ModelTurn("How much vanilla do we have?", ())])
    result = await run_agent(model=again, registry=shop.registry(), system="s", history=(),
                             user_text="How much vanilla do we have?", journal=RecordingJournal(shop.events),
                             context=None)
    assert len(again.calls) == 2 and result.prose == "How much vanilla do we have?"
    plain = ScriptedModel([ModelTurn("How much? I do not know.", ())])
    await run_agent(model=plain, registry=shop.registry(), system="s", history=(),
                    user_text="How much vanilla do we have?", journal=RecordingJournal(shop.events), context=None)
    assert len(plain.calls) == 1


async def test_a_second_echo_is_delivered_but_leaves_no_history():
    from worker.models.base import ToolCall
    shop = FakeShop()

    async def turn(final: str):
        model = ScriptedModel([ModelTurn("", (ToolCall("c1", "get_item", VANILLA),)),
                               ModelTurn("How much vanilla do we have?", ()), ModelTurn(final, ())])
        return await run_agent(model=model, registry=shop.registry(), system="s", history=(),
                               user_text="How much vanilla do we have?", journal=RecordingJournal(shop.events),
                               context=None)

    echoed = await turn("How much vanilla do we have?")   # seen live: replayed, it taught every later turn to echo
    assert echoed.prose == "How much vanilla do we have?" and echoed.exchange == ()
    # negative control: an answer after the echo round is the exchange, its tool call and result included
    answered = await turn("We have 2 tubs.")
    assert answered.exchange[-1].text == "We have 2 tubs." and answered.exchange[1].tool_calls


def _history_with(tool: str, result: dict) -> list:
    from worker.models.base import Message, ToolCall
    return [Message("user", "how much strawberry"), Message("assistant", "", (ToolCall("h1", tool, "{}"),)),
            Message("tool", json.dumps(result), tool_call_id="h1"), Message("assistant", "We have 4 tubs.")]


def test_a_made_up_result_shaped_like_an_earlier_one_is_read_as_that_tools_call():
    from worker.text_calls import result_shapes
    earlier = {"item": "strawberry", "on_hand": 4, "unit": "tubs"}
    shapes = result_shapes(_history_with("get_item", earlier))
    made_up = '<tool_response> {"item": "chocolate", "on_hand": 10, "unit": "tubs"} </tool_response>'   # seen live
    [call] = text_calls(made_up, (), shapes)
    assert call.name == "get_item" and json.loads(call.arguments)["item"] == "chocolate"
    # negative controls: another key set, no shapes, and a key set two tools returned (ambiguous)
    assert text_calls('<tool_response>{"item": "chocolate", "on_hand": 10}</tool_response>', (), shapes) == ()
    assert text_calls(made_up) == ()
    both = [*_history_with("get_item", earlier), *_history_with("list_stock", earlier)]
    both[5] = dataclasses.replace(both[5], tool_calls=(ToolCall("h2", "list_stock", "{}"),))
    both[6] = dataclasses.replace(both[6], tool_call_id="h2")
    assert result_shapes(both) == {}


async def test_the_loop_answers_a_made_up_result_with_the_real_one():
    shop = FakeShop()
    made_up = '<tool_response>\n' + json.dumps({**shop._item("vanilla"), "on_hand": 99}) + '\n</tool_response>'
    model = ScriptedModel([ModelTurn(made_up, ()), ModelTurn("Vanilla: 2 tubs.", ())])
    result = await run_agent(model=model, registry=shop.registry(), system="s",
                             history=_history_with("get_item", shop._item("vanilla")), user_text="and vanilla?",
                             journal=RecordingJournal(shop.events), context=None)
    [ran] = result.tool_results
    assert ran.tool == "get_item" and ran.arguments["item"] == "vanilla" and result.text.startswith("Vanilla: 2 tubs.")



async def test_the_echo_round_without_a_tool_result_asks_for_the_answer_or_the_tool():
    from worker.agent_loop import ECHO_NO_RESULT
    model = ScriptedModel([ModelTurn("How much vanilla do we have?", ()), ModelTurn("I do not know.", ())])
    result = await run_agent(model=model, registry=FakeShop().registry(), system="s", history=(),
                             user_text="How much vanilla do we have?", journal=RecordingJournal([]), context=None)
    assert [m.text for m in model.calls[1].messages] == ["How much vanilla do we have?", ECHO_NO_RESULT]
    assert result.prose == "I do not know."


async def test_the_look_up_round_also_takes_an_answer_naming_a_shop_item_without_a_tool():
    from worker.agent_loop import LOOK_UP, Limits
    shop = FakeShop()

    async def first_reply_sent_back(text: str) -> bool:
        model = ScriptedModel([ModelTurn(text, ()), ModelTurn("Fine.", ())])
        await run_agent(model=model, registry=shop.registry(), system="s", history=(), user_text="any vanilla?",
                        journal=RecordingJournal(shop.events), context=None, limits=Limits(look_up=True),
                        shop_words=("vanilla",))
        return len(model.calls) == 2 and model.calls[1].messages[-1].text == LOOK_UP

    assert await first_reply_sent_back("No vanilla is on order.")
    assert not await first_reply_sent_back("Paris is the capital of France.")     # negative control
