"""Logging setup: no secret reaches stderr or the log file, whoever logs it."""
from __future__ import annotations

import logging

import httpx
import pytest

from bot import logs
from bot.relays.sender import TelegramSender
from bot.sandbox.bot_api import LocalBotApi
from producers.telegram.client import make_bot

TOKEN = "123456:TEST-token-for-log-tests-0123456789abcd"
TOKEN_TAIL = TOKEN.split(":")[1]


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_levels = {n: logging.getLogger(n).level for n in ("httpx", "httpcore", "telegram")}
    yield
    for handler in list(root.handlers):
        if handler not in saved_handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(saved_level)
    for name, level in saved_levels.items():
        logging.getLogger(name).setLevel(level)
    logs._reset_secrets()


def _outputs(capsys, log_file) -> str:
    for handler in logging.getLogger().handlers:
        handler.flush()
    return capsys.readouterr().err + "\n" + log_file.read_text(encoding="utf-8")


def test_secrets_are_redacted_everywhere(capsys, tmp_path):
    log_file = tmp_path / "logs" / "shopbot.log"
    logs.setup_logging("DEBUG", [TOKEN, "", "abc"], log_file=log_file)
    ours = logging.getLogger("shopbot.test")

    ours.debug("calling https://api.telegram.org/bot%s/getMe", TOKEN)  # in args
    ours.info(f"token in the message itself: {TOKEN}")
    ours.info("a dict arg %s", {"url": f"/bot{TOKEN}/sendMessage"})
    ours.warning("proxy at http://alice:s3cr3t-pass@proxy.local:8080/ and https://bob:pw@host/x")
    ours.info("url-encoded %s", TOKEN.replace(":", "%3A"))
    try:
        raise RuntimeError(f"request to /bot{TOKEN}/sendMessage failed")
    except RuntimeError:
        ours.exception("boom")
    logging.getLogger("httpx").debug("HTTP Request: POST https://x/bot%s/getUpdates", TOKEN)  # below WARNING
    logging.getLogger("httpx").warning("HTTP Request: POST https://x/bot%s/getUpdates", TOKEN)
    logging.getLogger("httpcore.connection").warning("connect to /bot%s", TOKEN)

    logs.add_secret("till-secret-42")  # learned later
    ours.info("till token till-secret-42")
    logs.add_secret("xyz")  # too short: ignored rather than turning every "xyz" into ****
    ours.info("xyz stays")
    ours.info("unregistered but token-shaped: 987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw")

    out = _outputs(capsys, log_file)
    assert TOKEN not in out and TOKEN_TAIL not in out
    assert "s3cr3t-pass" not in out and "alice" not in out and "bob:pw" not in out
    assert "till-secret-42" not in out
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" not in out
    assert "http://****@proxy.local:8080/" in out
    assert "xyz stays" in out
    assert "RuntimeError: request to /bot****/sendMessage failed" in out  # the traceback is kept, redacted
    assert out.count("HTTP Request: POST https://x/bot****/getUpdates") == 2  # WARNING only, once per output
    line = next(x for x in out.splitlines() if "token in the message itself" in x)
    assert " INFO shopbot.test token in the message itself: ****" in line


def test_levels_of_the_chatty_libraries(tmp_path):
    logs.setup_logging("INFO", [TOKEN])
    assert logging.getLogger().level == logging.INFO
    assert logging.getLogger("httpx").level == logging.WARNING
    assert logging.getLogger("httpcore").level == logging.WARNING
    assert logging.getLogger("telegram").level == logging.INFO
    logs.setup_logging("ERROR", [])
    assert logging.getLogger("telegram").level == logging.ERROR
    assert logging.getLogger("httpx").level == logging.ERROR
    own = [h for h in logging.getLogger().handlers if getattr(h, "_shopbot_handler", False)]
    assert len(own) == 1  # setting up twice replaces, never duplicates
    with pytest.raises(ValueError):
        logs.setup_logging("LOUD", [])


async def test_real_ptb_traffic_at_debug_leaks_no_token(capsys, tmp_path):
    log_file = tmp_path / "shopbot.log"
    logs.setup_logging("DEBUG", [TOKEN], log_file=log_file)
    async with LocalBotApi(TOKEN) as api:
        bot = make_bot(TOKEN, api.base_url)
        async with bot:
            await bot.get_me()
            await TelegramSender(bot).send(1, "hello")
            api.inject("sendMessage", "non_json_200")  # PTB logs the body at ERROR
            await TelegramSender(bot).send(1, "hello")
            api.inject("sendMessage", "500")
            await TelegramSender(bot).send(1, "hello")
        logging.getLogger("httpx").setLevel(logging.DEBUG)  # even if someone turns httpx up again
        logging.getLogger("httpcore").setLevel(logging.DEBUG)
        async with httpx.AsyncClient() as client:
            await client.get(f"{api.base_url}/bot{TOKEN}/getMe")
    out = _outputs(capsys, log_file)
    assert "HTTP Request: GET" in out  # httpx did log the URL...
    assert TOKEN not in out and TOKEN_TAIL not in out  # ...redacted
