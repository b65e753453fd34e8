"""The whole turn over real HTTP: the real `openai` and `anthropic` SDKs against the local scripted servers, a real
store, the worker. C13 over the wire, the context a model gets (today's date in the shop's time zone, the output cap
on every request, Anthropic's cache breakpoint), a base URL without a key, a bad key, and the provider stop reasons
the owner is told about as what they are."""
import json
from datetime import UTC, datetime

import pytest

from store import Occurrence, PartStopped
from tests.integration.test_worker import SHOP
from tests.support import DATA, ROOT
from tests.support.fake_model_servers import (
    FakeModelServer,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
    openai_completion,
    openai_error,
    openai_text,
    openai_tool_calls,
)
from worker.agent_loop import NOTICE_CONTENT_FILTER, NOTICE_CONTEXT_WINDOW, NOTICE_REFUSAL
from worker.figures import DASH
from worker.models import load_model
from worker.models.openai_chat import OpenAIChatModel
from worker.prompts import TOOL_FIRST
from worker.worker import Worker, WorkerSettings

NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)          # already 2 March on Kiritimati (UTC+14)
SETTINGS = dict(shop_timezone="Pacific/Kiritimati", shop_name="Lucy's Ice Cream", locale="en_GB")
PROSE = "Vanilla: 2 tubs on hand, reorder point 8, price $3.00 a tub; you sold 17 yesterday."


@pytest.fixture
async def shop_store(store, clock):
    clock.set(NOW)
    await store.seed_shop(SHOP.items, "test")
    return store


def ask(n, text="How is vanilla?"):
    return Occurrence(f"tg:1:{n}", "tg:1", text, destination="tg:1")


def body(raw, report_id="r1.1"):
    return raw.execute("SELECT body FROM reports WHERE report_id = ?", (report_id,)).fetchone()[0]


PROVIDERS = {
    "openai": (lambda: [openai_tool_calls(("c1", "get_item", '{"item": "vanilla"}')), openai_text(PROSE)],
               lambda s: s.openai_base_url),
    "anthropic": (lambda: [anthropic_tool_use(("c1", "get_item", {"item": "vanilla"})), anthropic_text(PROSE)],
                  lambda s: s.anthropic_base_url),
}


async def run_turns(store, name, script, *, api_key="test-key", max_tokens=333, turns=1):
    async with FakeModelServer(script) as server:
        model = load_model(f"{name}:test-model", base_url=PROVIDERS[name][1](server), api_key=api_key, timeout=5,
                           max_tokens=max_tokens)
        try:
            for n in range(1, turns + 1):
                await store.admit(ask(n))
            await Worker(store, model, WorkerSettings(**SETTINGS)).drain()
        finally:
            await model.aclose()
    return server


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_a_reply_keeps_on_hand_reorder_point_and_price_and_blanks_an_invented_number(shop_store, raw, name):
    server = await run_turns(shop_store, name, PROVIDERS[name][0]())
    text = body(raw)
    assert text.startswith(f"Vanilla: 2 tubs on hand, reorder point 8, price $3.00 a tub; you sold {DASH} yesterday.")
    assert "17" not in text
    # an en_GB shop reads dollars as CLDR writes them there: US$3.00 (the prose's $3.00 still matches the figure)
    for line in ("- vanilla on hand: 2 tubs", "- vanilla reorder point: 8 tubs", "- vanilla unit cost: US$3.00"):
        assert line in text.splitlines(), line

    first, second = (r.body for r in server.requests)
    # the tool result the model read shows money as the owner reads it, not cents
    if name == "openai":
        system = first["messages"][0]
        assert system["role"] == "system" and [m["role"] for m in first["messages"]] == ["system", "user"]
        system_text, user = system["content"], first["messages"][1]["content"]
        assert json.loads(second["messages"][-1]["content"])["unit_cost"] == "US$3.00"
    else:
        (cached,) = first["system"]
        assert cached["cache_control"] == {"type": "ephemeral"}     # the breakpoint after the stable prefix
        system_text, user = cached["text"], first["messages"][0]["content"][0]["text"]
        assert [m["role"] for m in first["messages"]] == ["user"]
        assert json.loads(second["messages"][-1]["content"][0]["content"])["unit_cost"] == "US$3.00"
    # C18: the date and time head the latest user message, never the system prompt
    assert "2027" not in system_text and "02:00" not in system_text
    assert user.startswith("[Today is Tuesday 2 March 2027 (2027-03-02); the time in the shop is 02:00 "
                           f"(Pacific/Kiritimati). {TOOL_FIRST}]") and user.endswith("How is vanilla?")
    assert "2027-03-01" not in system_text                        # the shop's date, not UTC's
    assert "Lucy's Ice Cream" in system_text and "vanilla (tubs)" in system_text and "GBP" not in system_text
    assert "USD (US$)" in system_text and "Reorder point:" in system_text
    cap = "max_tokens"
    assert all(r.body[cap] == 333 for r in server.requests)       # the output cap on every request


async def test_a_reply_may_repeat_todays_date_and_time(shop_store, raw):
    await run_turns(shop_store, "openai", [openai_text("Today is 2 March 2027, 02:00; yesterday was 1 March.")])
    assert body(raw) == (f"Today is 2 March 2027, 02:00; yesterday was {DASH} March.\n\n"
                         "Figures:\n- today: 2027-03-02\n- now: 2027-03-02 02:00")


def test_openai_itself_gets_max_completion_tokens_and_a_compatible_server_max_tokens():
    assert OpenAIChatModel("gpt-x", api_key="k").cap_key == "max_completion_tokens"
    assert OpenAIChatModel("llama", base_url="http://127.0.0.1:1/v1", api_key="k").cap_key == "max_tokens"


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_a_base_url_without_a_key_starts_and_answers(shop_store, raw, monkeypatch, name):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    server = await run_turns(shop_store, name, PROVIDERS[name][0](), api_key=None)
    assert body(raw).startswith("Vanilla: 2 tubs on hand")
    headers = server.requests[0].headers
    assert "test-key" not in json.dumps(headers)
    assert headers.get("authorization", headers.get("x-api-key", "")).endswith("no-key")   # a placeholder, no secret


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_a_bad_key_stops_the_worker_with_the_work_left_pending(shop_store, raw, name):
    error = openai_error if name == "openai" else anthropic_error
    with pytest.raises(PartStopped, match="status 401"):
        await run_turns(shop_store, name, [error(401, "invalid x-api-key")])
    assert tuple(raw.execute("SELECT state, attempts FROM work WHERE work_id = 1").fetchone()) == ("pending", 0)
    assert raw.execute("SELECT count(*) FROM reports").fetchone()[0] == 0


@pytest.mark.parametrize("name, script, expected", [
    ("openai", [openai_text("Vanilla is", finish_reason="content_filter")], f"Vanilla is\n\n{NOTICE_CONTENT_FILTER}"),
    ("openai", [openai_completion({"content": None, "refusal": "I can't help with that."})],
     f"{NOTICE_REFUSAL}\n\nI can't help with that."),
    ("anthropic", [anthropic_message([], stop_reason="refusal")], NOTICE_REFUSAL),
    ("anthropic", [anthropic_message([], stop_reason="model_context_window_exceeded")], NOTICE_CONTEXT_WINDOW),
])
async def test_provider_stop_reasons_are_shown_as_what_they_are(shop_store, raw, name, script, expected):
    await run_turns(shop_store, name, script)
    assert body(raw) == expected
    assert raw.execute("SELECT stop_reason FROM runs").fetchone()[0] in ("content_filter", "refusal", "context_window")


async def test_a_request_over_the_context_window_fails_saying_so(shop_store, raw):
    await run_turns(shop_store, "openai", [openai_error(400, "This model's maximum context length is 8192 tokens.")])
    text = body(raw)
    assert "too long for the model's context window" in text and "/forget" in text
    assert raw.execute("SELECT state FROM work WHERE work_id = 1").fetchone()[0] == "failed"


def test_a_model_without_key_or_base_url_is_a_configuration_error_not_a_traceback(tmp_path):
    import os
    import subprocess
    import sys
    root = ROOT
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SHOPBOT_", "TELEGRAM_")) and k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update({"SHOPBOT_DB": str(tmp_path / "s.sqlite3"), "SHOPBOT_SHOP_FILE": str(root / "shop.example.toml"),
                "SHOPBOT_MODEL": "openai:gpt-x", "SHOPBOT_HTTP_PORT": "-1"})
    done = subprocess.run([sys.executable, "-m", "bot.cli", "run", "--drain"], capture_output=True, text=True,
                          env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "configuration error: SHOPBOT_MODEL=openai:gpt-x needs SHOPBOT_MODEL_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr


async def test_shopbot_run_with_a_base_url_and_no_key_starts_and_answers(tmp_path):
    import asyncio
    import os
    import sqlite3
    import sys
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SHOPBOT_", "TELEGRAM_")) and k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    db = tmp_path / "s.sqlite3"
    env.update({"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml"),   # no brief at start
                "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_MODEL": "openai:llama", "SHOPBOT_MODEL_MAX_TOKENS": "77"})

    async def shopbot(*args):
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.cli", *args, env=env, cwd=tmp_path,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, out.decode(), err.decode()

    assert (await shopbot("admit", "--source", "tg:1:1", "--session", "tg:1", "--text", "hello"))[0] == 0
    # the stock watcher may also admit its low-stock checks in this run: each gets an answer too
    async with FakeModelServer([openai_text("Hello! Nothing to count today.")] * 3) as server:
        env["SHOPBOT_MODEL_BASE_URL"] = server.openai_base_url
        code, _, err = await shopbot("run", "--drain")
    assert code == 0, err
    assert server.requests and all(r.headers["authorization"] == "Bearer no-key" and r.body["max_tokens"] == 77
                                   for r in server.requests)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT r.body FROM reports r JOIN report_items i ON i.report_id = r.report_id "
                        "JOIN work w ON w.work_id = i.work_id WHERE w.source = 'tg:1:1'").fetchone()[0] == (
        "Hello! Nothing to count today.")
    conn.close()
