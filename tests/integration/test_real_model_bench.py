"""bench.real_model at its smallest size against the scripted OpenAI-compatible server: the whole path a real model
takes (a tool call written as text, run and journaled; the answer checked against the shop's records; the cached
prompt tokens read from the usage), without a real model."""
import io

from bench import real_model
from tests.support.fake_model_servers import FakeModelServer, openai_text

CALL = '```json\n{"name": "get_item", "arguments": {"item": "vanilla"}}\n```'


async def test_the_bench_runs_one_question_and_checks_it_against_the_records():
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 900}}
    async with FakeModelServer([openai_text(CALL, usage=usage), openai_text("We have 2 tubs of vanilla.",
                                                                            usage=usage)]) as server:
        out = io.StringIO()
        results = await real_model.run_bench(server.openai_base_url, "fake", limit=1, out=out)
        figures = real_model.summary(results, 2000, out)
    [result] = results
    assert result.right and result.tools == ("get_item",) and (result.prompt, result.cached) == (2000, 1800)
    assert figures["right"] == 1 and figures["tool_call_texts_delivered"] == 0
    assert " 1 stock" in out.getvalue() and "get_item" in out.getvalue()
    second = server.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "get_item"   # the text call ran as a call


async def test_a_wrong_number_is_counted_wrong():
    async with FakeModelServer([openai_text("We have 7 tubs of vanilla.")]) as server:
        results = await real_model.run_bench(server.openai_base_url, "fake", limit=1, out=io.StringIO())
    assert not results[0].right and results[0].prose.count("—") == 1


def _conversation_turn(item):
    return [openai_text(f'{{"name": "get_item", "arguments": {{"item": "{item}"}}}}'), openai_text("Here it is.")]


async def test_the_bench_says_how_many_exchanges_each_turn_saw_and_which_turns_compacted():
    script = [r for item in ("strawberry", "chocolate", "vanilla") for r in _conversation_turn(item)]

    async def run(budget):
        async with FakeModelServer(list(script)) as server:
            return await real_model.run_bench(server.openai_base_url, "fake", limit=3, conversation_first=True,
                                              history_tokens=budget, out=io.StringIO())

    whole = await run(2000)     # within the budget every earlier exchange is seen and nothing compacts
    assert [(r.seen, r.stored, r.compacted) for r in whole] == [(0, 0, False), (1, 1, False), (2, 2, False)]
    assert 0 < whole[1].seen_tokens < whole[2].seen_tokens
    # a budget two exchanges pass: turn 3 drops turn 1's exchange, which turn 2 saw: its prefix changed
    third = (await run(whole[2].seen_tokens - 1))[2]
    assert third.seen < 2 and third.compacted
    # a budget of 0 drops every exchange before any turn sees it: the prefix (system, tools) never changes
    assert [(r.seen, r.compacted) for r in await run(0)] == [(0, False)] * 3


def test_the_proposals_question_follows_the_records_when_none_is_open():
    from types import SimpleNamespace

    from bench.real_model_questions import Facts, proposals

    none = Facts(items={}, rates={}, cover={}, on_order=[], proposals=[])
    assert proposals("There are no proposals waiting for your approval.", none, ())
    assert not proposals("Chocolate: — tubs are waiting.", none, ())    # negative control: a blank is no answer
    one = Facts(items={}, rates={}, cover={}, on_order=[], proposals=[SimpleNamespace(item="chocolate", quantity=3)])
    assert proposals("Chocolate, 3 tubs.", one, ()) and not proposals("There are no proposals.", one, ())


async def test_the_echo_probe_builds_the_turn_after_the_real_result_and_its_variants():
    import json

    from bench.real_model_echo import requests_for, variants
    from worker.agent_loop import ECHO

    requests = await requests_for("Is any vanilla on order?", "on_order", '{"item": "vanilla"}')
    system, after, tools = requests[1]
    assert [m.role for m in after] == ["user", "assistant", "tool"] and system and tools
    assert json.loads(after[-1].text)["orders"][0]["item"] == "vanilla"            # the tool's real result
    sent = variants(after, "Is any vanilla on order?")
    assert sent["V0"] == after and sent["V2"][-1].text == ECHO and sent["V2"][:-1] == after
    assert [m.role for m in sent["V1"][-2:]] == ["assistant", "user"]               # the old round: the echo back
