"""SHOPBOT_LOG_FORMAT=json: every line one JSON object with ts (UTC with offset), level, logger, a stable event and
the ids it names, through the same redaction as text; the event catalogue matches the code and docs/operations.md;
a real `shopbot run` writes nothing but JSON lines (uvicorn's and APScheduler's included) with no secret in them."""
from __future__ import annotations

import json
import logging
import re
import warnings
from datetime import datetime
from pathlib import Path

import pytest

from bot import logs
from bot.log_events import EVENTS
from bot.sandbox.bot_api import LocalBotApi
from tests.support.log_calls import log_calls
from tests.support.proc import OWNER, Product

from .test_logs import restore_logging  # noqa: F401 - the autouse fixture that puts logging back

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:JSON-log-token-0123456789abcdefghij"
TILL = "till-json-secret-token-0001"
SECRETS = (TOKEN, TOKEN.split(":")[1], TILL)


@pytest.fixture(autouse=True)
def stop_capturing_warnings():
    yield
    logging.captureWarnings(False)


def parse_lines(text: str) -> list[dict]:
    lines = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)                       # every line is one JSON object
        assert isinstance(line, dict) and {"ts", "level", "logger", "event", "message"} <= set(line), raw
        assert datetime.fromisoformat(line["ts"]).utcoffset().total_seconds() == 0 and line["ts"].endswith("+00:00")
        for secret in SECRETS:
            assert secret not in raw, raw
        lines.append(line)
    return lines


def test_every_logging_call_in_the_code_has_a_stable_event_name_and_no_name_is_left_over():
    in_code = log_calls()
    catalogue = {where for where in EVENTS.values()}
    missing = {k: v for k, v in in_code.items() if k not in catalogue}
    assert not missing, "add these logging calls to bot/log_events.py and docs/operations.md: " + "; ".join(
        f"{where}: ({logger!r}, {template!r})" for (logger, template), where in missing.items())
    left_over = catalogue - set(in_code)
    assert not left_over, f"bot/log_events.py names calls the code no longer makes: {sorted(left_over)}"
    assert len(set(EVENTS)) == len(EVENTS) and all(re.fullmatch(r"[a-z_]+\.[a-z_]+", e) for e in EVENTS)


def test_the_event_list_in_the_docs_is_the_catalogue():
    text = (ROOT / "docs" / "operations.md").read_text()
    listed = re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| `([a-z_.]+)` \|", text, flags=re.M)
    assert [e for e, _ in listed] == list(EVENTS)
    assert all(EVENTS[e][0] == logger for e, logger in listed)


def test_a_json_line_for_every_event_with_its_ids_and_no_secret(capsys, tmp_path):
    log_file = tmp_path / "shopbot.log"
    logs.setup_logging("DEBUG", [TOKEN, TILL], log_file=log_file, fmt="json")
    for logger, template in EVENTS.values():
        placeholders = len(re.findall(r"%[-+ #0]*\d*(?:\.\d+)?[sdrf]", template))
        args = []
        for spec in re.findall(r"%[-+ #0]*\d*(?:\.\d+)?([sdrf])", template):
            args.append(7 if spec in "df" else f"r7.1 with {TOKEN} and {TILL}")
        assert len(args) == placeholders
        logging.getLogger(logger).warning(template, *args)
    for handler in logging.getLogger().handlers:
        handler.flush()
    err = capsys.readouterr().err
    for text in (err, log_file.read_text()):
        lines = parse_lines(text)
        assert [line["event"] for line in lines] == list(EVENTS)
    by_event = {line["event"]: line for line in parse_lines(err)}
    assert by_event["worker.turn_finished"]["report_id"].startswith("r7.1")
    assert by_event["till.post"]["work_id"] == "r7.1" and "source" in by_event["till.post"]
    assert "****" in by_event["app.part_stopped"]["message"]


def test_library_lines_and_warnings_are_json_lines_too(capsys):
    logs.setup_logging("INFO", [TOKEN], fmt="json")
    logging.getLogger("uvicorn.error").info("Uvicorn running on http://127.0.0.1:1 with %s", TOKEN)
    logging.getLogger("apscheduler.scheduler").info("Scheduler started")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"something deprecated near {TOKEN}", DeprecationWarning, stacklevel=1)
    try:
        raise RuntimeError(f"boom /bot{TOKEN}/getMe")
    except RuntimeError:
        logging.getLogger("shopbot.app").exception("%s stopped: %s", "worker", "boom")
    lines = parse_lines(capsys.readouterr().err)
    assert [line["event"] for line in lines] == ["lib.uvicorn", "lib.apscheduler", "lib.warnings", "app.part_stopped"]
    assert "RuntimeError: boom /bot****/getMe" in lines[-1]["exc"]


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="text or json"):
        logs.setup_logging("INFO", [], fmt="yaml")


async def test_a_real_run_writes_only_json_lines_with_ids_and_no_secret(tmp_path):
    async with LocalBotApi(TOKEN) as api:
        product = Product(tmp_path, api, SHOPBOT_LOG_FORMAT="json", SHOPBOT_HTTP_PORT="0",
                          SHOPBOT_TILL_TOKENS=f"1:{TILL}", SHOPBOT_LOG_LEVEL="INFO")
        await product.start()
        try:
            api.post_message(OWNER, OWNER, "stock")
            await api.wait_for(lambda: any(m.chat_id == OWNER for m in api.sent), timeout=30)
            await product.wait_db("SELECT count(*) FROM deliveries WHERE state != 'confirmed'", [(0,)])
        finally:
            assert await product.stop() == 0
        out, err = await product.proc.communicate()
    stdout_lines = parse_lines(out.decode())
    lines = parse_lines(err.decode())
    assert stdout_lines == []
    assert parse_lines(product.log.read_text()) == lines
    events = {line["event"] for line in lines}
    assert {"run.starting", "app.database_opened", "app.running", "http.listening", "ingress.batch_admitted",
            "worker.turn_started", "worker.turn_finished", "relay.delivered", "app.stopped",
            "lib.uvicorn", "lib.apscheduler"} <= events, events
    finished = next(line for line in lines if line["event"] == "worker.turn_finished")
    assert re.fullmatch(r"r\d+\.\d+", finished["report_id"]) and finished["run_id"]
    delivered = next(line for line in lines if line["event"] == "relay.delivered")
    assert delivered["report_id"] == finished["report_id"]


def test_the_log_file_survives_rotation(tmp_path):
    """logrotate renames the file; the next line goes to a new file at the configured path (no copytruncate)."""
    log_file = tmp_path / "shopbot.log"
    logs.setup_logging("INFO", [], log_file=log_file, fmt="json")
    logging.getLogger("shopbot.app").info("shopbot stopped")
    log_file.rename(tmp_path / "shopbot.log.1")
    logging.getLogger("shopbot.app").info("shopbot running: model=%s telegram=%s http=%s", "offline", "off", "off")
    assert [line["event"] for line in parse_lines((tmp_path / "shopbot.log.1").read_text())] == ["app.stopped"]
    assert [line["event"] for line in parse_lines(log_file.read_text())] == ["app.running"]


def test_a_run_that_refuses_to_start_says_so_in_json_lines(tmp_path):
    """Configuration and store errors come before logging is set up; in the JSON format they are JSON too."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_LOG_FORMAT": "json", "SHOPBOT_CAPACITY": "lots", "TELEGRAM_BOT_TOKEN": TOKEN})
    result = subprocess.run([sys.executable, "-m", "bot.cli", "run", "--db", str(tmp_path / "x.sqlite3")],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    lines = parse_lines(result.stderr)        # one JSON line per problem: the capacity, and a token without owners
    assert {line["event"] for line in lines} == {"run.refused"} and len(lines) == 2
    assert any("SHOPBOT_CAPACITY" in line["message"] for line in lines)
    assert any("SHOPBOT_OWNER_IDS" in line["message"] for line in lines)
