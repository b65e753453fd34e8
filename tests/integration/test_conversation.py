"""Issue 26 over real HTTP (the real `openai`/`anthropic` SDKs against the scripted servers, a real store, the worker):
tool calls written as text (C17), what the next turn's request holds (C17), a cache-stable prompt (C18), the turn
limit, the owner-first claim order and the cached-token metric."""
import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.metrics import MeteredModel, Metrics
from store import Occurrence, WorkKind
from tests.integration.test_worker import SHOP
from tests.support.fake_model_servers import (
    FakeModelServer,
    FakeResponse,
    anthropic_text,
    anthropic_tool_use,
    openai_text,
    openai_tool_calls,
)
from worker.agent_loop import NOTICE_SECONDS, Limits
from worker.models import load_model
from worker.prompts import TOOL_FIRST
from worker.worker import Worker, WorkerSettings

NOW = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
SETTINGS = dict(shop_timezone="Europe/London", shop_name="Lucy's Ice Cream")


@pytest.fixture
async def shop_store(store, clock):
    clock.set(NOW)
    await store.seed_shop(SHOP.items, "test")
    return store


def ask(n, text="How is vanilla?", session="tg:1"):
    return Occurrence(f"{session}:{n}", session, text, destination=session)


async def drain(store, server, *, provider="openai", settings=None, metrics=None):
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    model = load_model(f"{provider}:test-model", base_url=base, api_key="k", timeout=5)
    try:
        worker = Worker(store, MeteredModel(model, metrics) if metrics else model,
                        settings or WorkerSettings(**SETTINGS))
        return await worker.drain()
    finally:
        await model.aclose()


def report(raw, source):
    return raw.execute("SELECT r.body, r.is_error FROM reports r JOIN report_items i ON i.report_id = r.report_id "
                       "JOIN work w ON w.work_id = i.work_id WHERE w.source = ?", (source,)).fetchone()


def operations(raw):
    return [(r[0], json.loads(r[1]), r[2]) for r in raw.execute("SELECT tool, arguments, status FROM operations "
                                                                "ORDER BY op_id")]


FORMS = {
    "bare": '{"name": "get_item", "arguments": {"item": "vanilla"}}',
    "json fence": 'Let me check.\n```json\n{"name": "get_item", "parameters": {"item": "vanilla"}}\n```',
    "tool_call tags": '<tool_call>\n{"name": "get_item", "arguments": {"item": "vanilla"}}\n</tool_call>',
    "tools tags": '<tools>{"name": "get_item", "arguments": "{\\"item\\": \\"vanilla\\"}"}</tools>',
    "doubled braces": '{{"name": "get_item", "arguments": {"item": "vanilla"}}}',   # Qwen2.5-Coder-1.5B, seen live
}


@pytest.mark.parametrize("form", FORMS)
async def test_a_tool_call_written_as_text_runs_as_a_call_and_is_journaled(shop_store, raw, form):
    await shop_store.admit(ask(1))
    async with FakeModelServer([openai_text(FORMS[form]), openai_text("Vanilla: 2 tubs on hand.")]) as server:
        await drain(shop_store, server)
    assert operations(raw) == [("get_item", {"item": "vanilla"}, "done")]
    body, is_error = report(raw, "tg:1:1")
    assert body.startswith("Vanilla: 2 tubs on hand.") and not is_error and "get_item" not in body
    second = server.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "get_item" and second[-2]["content"] in (None, "")
    assert json.loads(second[-1]["content"])["on_hand"] == 2


async def test_a_text_call_naming_a_tool_not_offered_goes_back_as_a_tool_error(shop_store, raw):
    await shop_store.admit(ask(1))
    script = [openai_text('{"name": "get_weather", "arguments": {"city": "Paris"}}'), openai_text("Sorry.")]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server)
    assert operations(raw) == []
    tool = server.requests[1].body["messages"][-1]
    assert tool["role"] == "tool" and "unknown tool 'get_weather'" in tool["content"]


async def test_junk_arguments_to_a_tool_without_arguments_run_and_are_recorded(shop_store, raw):
    await shop_store.admit(ask(1, "What is on order?"))
    junk = '{"type": "object", "properties": {}}'
    script = [openai_tool_calls(("c1", "on_order", junk), ("c2", "get_item", '{"item": "vanilla", "x": 1}')),
              openai_text("Nothing is on order.")]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server)
    assert operations(raw) == [
        ("on_order", {"item": None, "ignored": {"type": "object", "properties": {}}}, "done"),
        ("get_item", {"item": "vanilla", "ignored": {"x": 1}}, "done")]
    results = [json.loads(m["content"]) for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert results[0]["note"] == "nothing is on order"            # an empty result says so
    assert results[1]["note"] == "nothing is on order for vanilla"


async def test_a_wrong_type_or_a_missing_argument_is_a_tool_error_the_model_corrects(shop_store, raw):
    await shop_store.admit(ask(1, "order vanilla"))
    script = [openai_tool_calls(("c1", "propose_order", '{"item": "vanilla", "quantity": "lots"}'),
                                ("c2", "get_item", "{}")),
              openai_tool_calls(("c3", "propose_order", '{"item": "vanilla", "quantity": 6}')),
              openai_text("Proposed #1: 6 tubs.")]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server)
    errors = [json.loads(m["content"])["error"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "quantity" in errors[0] and "item" in errors[1] and "Field required" in errors[1]
    assert [op[0] for op in operations(raw)] == ["propose_order"]   # only the corrected call ran
    body, is_error = report(raw, "tg:1:1")
    assert not is_error and "Proposed #1: 6 tubs." in body          # #1 is the id the tool returned


async def test_a_record_number_the_run_never_returned_is_blanked_and_ids_are_never_figures(shop_store, raw):
    await shop_store.admit(ask(1, "What is waiting?"))
    script = [openai_tool_calls(("c1", "propose_order", '{"item": "vanilla", "quantity": 6}')),
              openai_text("Proposal #1 for 6 tubs; order #7 came earlier, and 1 proposal is open.")]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server)
    body, _ = report(raw, "tg:1:1")
    assert "Proposal #1 for 6 tubs; order #— came earlier, and — proposal is open." in body
    assert "proposal id" not in body and "#1" not in body.split("Figures:")[-1]
    assert json.loads(server.requests[1].body["messages"][-1]["content"])["proposal_id"] == "#1"


async def test_a_reply_still_looking_like_a_call_is_never_delivered_and_fails_after_one_correction(shop_store, raw):
    await shop_store.admit(ask(1))
    broken = '<tool_call>{"name": "get_item", "arguments": {"item": "vanilla"</tool_call>'
    async with FakeModelServer([openai_text(broken), openai_text(broken)]) as server:
        await drain(shop_store, server)
    assert len(server.requests) == 2
    correction = server.requests[1].body["messages"][-1]
    assert correction["role"] == "user" and "could not be read" in correction["content"]
    body, is_error = report(raw, "tg:1:1")
    assert is_error and "the model's answer could not be used" in body and "tool_call" not in body
    assert raw.execute("SELECT count(*) FROM history").fetchone()[0] == 0   # a product text never enters history


async def test_a_correction_that_works_answers_and_the_correction_round_is_not_history(shop_store, raw):
    await shop_store.admit(ask(1))
    broken = '```json\n{"name": "get_item", "arguments": {"item": "vanilla"\n```'
    script = [openai_text(broken), openai_text("All is fine."), openai_text("Still fine.")]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server)
        await shop_store.admit(ask(2, "And now?"))
        await drain(shop_store, server)
    assert report(raw, "tg:1:1")[0] == "All is fine."
    history = [m["content"] for m in server.requests[2].body["messages"][1:]]
    assert history[1:] == ["All is fine.", history[-1]] and not any("could not be read" in h for h in history)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_second_turn_holds_the_first_turns_call_and_result_and_no_product_text(shop_store, raw, provider):
    if provider == "openai":
        script = [openai_tool_calls(("c1", "get_item", '{"item": "vanilla"}')),
                  openai_text("Vanilla: 2 tubs on hand."), openai_text("Still 2.")]
    else:
        script = [anthropic_tool_use(("c1", "get_item", {"item": "vanilla"})),
                  anthropic_text("Vanilla: 2 tubs on hand."), anthropic_text("Still 2.")]
    async with FakeModelServer(script) as server:
        await shop_store.admit(ask(1))
        await drain(shop_store, server, provider=provider)
        await shop_store.admit(ask(2, "And now?"))
        await drain(shop_store, server, provider=provider)
    first_report = report(raw, "tg:1:1")[0]
    assert "Figures:" in first_report
    second = json.dumps(server.requests[2].body["messages"])
    assert "get_item" in second and '\\"on_hand\\": 2' in second and "Vanilla: 2 tubs on hand." in second
    for product_text in ("Figures", "r1.1", "- vanilla on hand", "I stopped"):
        assert product_text not in second, product_text
    if provider == "openai":
        roles = [m["role"] for m in server.requests[2].body["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
        # the first turn's messages come back byte for byte as they were sent: the provider's cache keeps them
        assert server.requests[2].body["messages"][:4] == server.requests[1].body["messages"][:4]


async def test_with_no_history_budget_each_question_goes_alone_with_the_same_system_and_tools(shop_store):
    # SHOPBOT_HISTORY_TOKENS=0, the setting docs/local-model.md gives a 1.5B model (bench/RESULTS.md, fourth pass)
    seconds = {}
    for budget, chat in ((0, "tg:1"), (2000, "tg:2")):
        script = [openai_tool_calls(("c1", "get_item", '{"item": "vanilla"}')),
                  openai_text("Vanilla: 2 tubs on hand."), openai_text("Still 2.")]
        async with FakeModelServer(script) as server:
            for n, text in ((1, "How is vanilla?"), (2, "And now?")):
                await shop_store.admit(ask(n, text, session=chat))
                await drain(shop_store, server, settings=WorkerSettings(**SETTINGS, history_tokens=budget))
        first, seconds[budget] = server.requests[0].body, server.requests[2].body
        assert seconds[budget]["messages"][0] == first["messages"][0] and seconds[budget]["tools"] == first["tools"]
    assert [m["role"] for m in seconds[0]["messages"]] == ["system", "user"]
    assert seconds[0]["messages"][-1]["content"].endswith("And now?") and "Vanilla: 2" not in json.dumps(seconds[0])
    # negative control: the default budget replays the first turn
    assert "Vanilla: 2 tubs on hand." in json.dumps(seconds[2000])


async def test_product_stop_texts_never_enter_history_but_the_calls_that_ran_do(shop_store, raw):
    settings = WorkerSettings(**SETTINGS, limits=Limits(max_model_calls=1))
    async with FakeModelServer([openai_tool_calls(("c1", "get_item", '{"item": "vanilla"}')),
                                openai_text("ok")]) as server:
        await shop_store.admit(ask(1))
        await drain(shop_store, server, settings=settings)
        await shop_store.admit(ask(2, "And now?"))
        await drain(shop_store, server)
    assert "I stopped before finishing" in report(raw, "tg:1:1")[0]
    second = json.dumps(server.requests[1].body["messages"])
    assert "I stopped" not in second and "needed more steps" not in second


async def test_system_message_and_tools_are_identical_across_turns_an_hour_apart(shop_store, clock):
    async with FakeModelServer([openai_text("One."), openai_text("Two."), openai_text("Three.")]) as server:
        for n, minutes in enumerate((0, 1, 61), start=1):
            clock.set(NOW + timedelta(minutes=minutes))
            await shop_store.admit(ask(n, f"question {n}"))
            await drain(shop_store, server)
    bodies = [r.body for r in server.requests]
    assert bodies[0]["messages"][0] == bodies[1]["messages"][0] == bodies[2]["messages"][0]
    assert bodies[0]["tools"] == bodies[1]["tools"] == bodies[2]["tools"]
    assert json.dumps(bodies[0]["messages"][0]) == json.dumps(bodies[2]["messages"][0])   # byte-identical
    heads = [b["messages"][-1]["content"].split("\n")[0] for b in bodies]
    assert heads[0].endswith(f"the time in the shop is 09:00 (Europe/London). {TOOL_FIRST}]") and "10:01" in heads[2]
    # turn 3's prefix (system, tools, turn 1 and 2 as sent) is turn 2's request plus its answer
    assert bodies[2]["messages"][:4] == bodies[1]["messages"] and bodies[2]["messages"][4]["content"] == "Two."


async def test_the_turn_timeout_cuts_a_slow_turn_and_answers_with_what_its_tools_found(shop_store, raw):
    settings = WorkerSettings(**SETTINGS, limits=Limits(max_seconds=1))
    await shop_store.admit(ask(1))
    script = [openai_tool_calls(("c1", "get_item", '{"item": "vanilla"}')), FakeResponse(hang=True)]
    async with FakeModelServer(script) as server:
        await drain(shop_store, server, settings=settings)
    body, is_error = report(raw, "tg:1:1")
    assert not is_error and body.startswith(NOTICE_SECONDS) and "- vanilla on hand: 2 tubs" in body
    assert len(server.requests) == 2           # abandoned, not retried


def test_the_turn_timeout_setting_is_known_bounded_and_documented():
    from bot import config
    from tests.support import ROOT
    assert config.KEYS["SHOPBOT_TURN_TIMEOUT_S"][0] == "180"
    assert "SHOPBOT_TURN_TIMEOUT_S=180" in (ROOT / ".env.example").read_text()
    env = {"SHOPBOT_TURN_TIMEOUT_S": "0"}
    with pytest.raises(config.ConfigError, match="SHOPBOT_TURN_TIMEOUT_S"):
        config.load(env)


async def test_owner_sessions_are_claimed_before_producer_sessions_with_one_worker(shop_store, clock):
    await shop_store.admit(Occurrence("stock:vanilla:1", "stock:vanilla", "check vanilla", WorkKind.AGENT,
                                      "tg:1"))
    await shop_store.admit(Occurrence("clock:brief:1", "clock:opening_brief", "Prepare the opening brief",
                                      WorkKind.AGENT, "tg:1"))
    clock.set(NOW + timedelta(seconds=1))
    await shop_store.admit(ask(1, "How is vanilla?"))
    async with FakeModelServer([openai_text("first"), openai_text("second"), openai_text("third")]) as server:
        await drain(shop_store, server, settings=WorkerSettings(**SETTINGS, concurrency=1))
    asked = [r.body["messages"][-1]["content"].split("\n\n", 1)[1] for r in server.requests]
    assert asked == ["How is vanilla?", "check vanilla", "Prepare the opening brief"]


async def test_negative_control_without_the_owner_first_order_the_older_producer_turn_goes_first(
        shop_store, clock, monkeypatch):
    from store.shared import inbox
    monkeypatch.setattr(inbox, "OWNER_FIRST", "w.work_id")
    await shop_store.admit(Occurrence("stock:vanilla:1", "stock:vanilla", "check vanilla", WorkKind.AGENT, "tg:1"))
    clock.set(NOW + timedelta(seconds=1))
    await shop_store.admit(ask(1, "How is vanilla?"))
    async with FakeModelServer([openai_text("first"), openai_text("second")]) as server:
        await drain(shop_store, server)
    assert server.requests[0].body["messages"][-1]["content"].endswith("check vanilla")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_cached_prompt_tokens_are_counted_in_the_metric(shop_store, provider):
    if provider == "openai":
        usage = {"prompt_tokens": 1000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 960}}
        script = [openai_text("ok", usage=usage)]
    else:
        usage = {"input_tokens": 40, "output_tokens": 5, "cache_read_input_tokens": 960}
        script = [anthropic_text("ok", usage=usage)]
    metrics = Metrics()
    await shop_store.admit(ask(1))
    async with FakeModelServer(script) as server:
        await drain(shop_store, server, provider=provider, metrics=metrics)
    text = metrics.render().decode()
    assert 'shopbot_model_tokens_total{direction="cached"} 960.0' in text
    assert 'shopbot_model_tokens_total{direction="input"} 1000.0' in text


# ---- the whole app: the reply as the owner's Telegram chat gets it ---------------------------------------------------

@pytest.mark.parametrize("check", ["on", "removed (negative control)"])
async def test_a_call_looking_reply_never_reaches_the_owner_and_without_the_check_it_would(monkeypatch, check):
    from bot.sandbox.local_setup import OWNER_ID, local_product
    from worker import agent_loop
    if check != "on":
        monkeypatch.setattr(agent_loop, "looks_like_tool_call", lambda text: False)
    broken = '<tool_call>{"name": "get_item", "arguments": {"item": "vanilla"</tool_call>'

    def producers(body):   # the stock watcher's and the opening brief's turns at start answer plainly
        return None if "how much vanilla" in json.dumps(body["messages"]) else openai_text("Noted.")

    async with FakeModelServer([openai_text(broken)] * 2, respond=producers) as server:
        overrides = {"SHOPBOT_MODEL": "openai:fake", "SHOPBOT_MODEL_BASE_URL": server.openai_base_url,
                     "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_DEBOUNCE_MS": "0"}
        async with local_product(overrides) as run:
            run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")

            def answered():
                return [m.text for m in run.owner_messages() if "get_item" in m.text or "could not be used" in m.text]
            await run.api.wait_for(lambda: answered() != [], timeout=30)
            [reply] = answered()
    if check == "on":
        assert "the model's answer could not be used" in reply and "get_item" not in reply
    else:
        assert '"name": "get_item"' in reply          # the JSON reaches the owner without the delivery check


async def test_sigterm_during_a_model_call_exits_at_once_and_the_turn_is_released_not_failed(tmp_path):
    import asyncio
    import os
    import signal
    import sqlite3
    import sys

    from tests.support import DATA
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SHOPBOT_", "TELEGRAM_")) and k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    db = tmp_path / "s.sqlite3"
    env.update({"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml"),   # no brief at start
                "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_MODEL": "openai:llama", "SHOPBOT_MODEL_TIMEOUT_S": "600",
                "SHOPBOT_DEBOUNCE_MS": "0"})
    admit = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.cli", "admit", "--source", "tg:1:1",
                                                 "--session", "tg:1", "--text", "hello", env=env, cwd=tmp_path)
    assert await asyncio.wait_for(admit.wait(), 60) == 0
    async with FakeModelServer([FakeResponse(hang=True)]) as server:
        env["SHOPBOT_MODEL_BASE_URL"] = server.openai_base_url
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.cli", "run", "--drain", env=env,
                                                    cwd=tmp_path, stderr=asyncio.subprocess.PIPE)
        await server.wait_for_requests(1, timeout=60)      # the owner's turn (claimed first) is in its model call
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 5)              # the stop deadline is 10 s; the call is abandoned at once
    conn = sqlite3.connect(db)
    state, attempts = conn.execute("SELECT state, attempts FROM work WHERE source = 'tg:1:1'").fetchone()
    conn.close()
    assert (state, attempts) == ("pending", 0)              # released with its attempt given back, not failed
