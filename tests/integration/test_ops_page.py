"""The operator page /ops: only with SHOPBOT_OPS_TOKEN; refused without the session cookie; the token is POSTed by a
login form (never in a URL), compared in constant time, and answered with an HttpOnly, SameSite=Strict cookie; every
response carries the CSP, no-store and no-framing headers; every record field is escaped. In headless Chromium: the
page renders, shows a planted unknown delivery, escapes an item named `<script>`, and a screenshot is written."""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import httpx
import pytest

from bot import config
from bot.sandbox.local_setup import OWNER_ID, local_product
from store import ItemSpec
from tests.support.chromium import BINARY, MISSING, Chromium

from .test_metrics import FAST

TOKEN = "ops-token-for-the-tests-0123456789"
EVIL = "<script>document.title='pwned'</script>"
OPS = {**FAST, "SHOPBOT_OPS_TOKEN": TOKEN}


async def base_url(run) -> str:
    await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
    return f"http://127.0.0.1:{run.app.parts.http.port}"


async def plant(run) -> None:
    """An unknown delivery (Telegram took the message, the reply was lost) and an item named like a script."""
    store = run.app.parts.store
    run.api.post_message(OWNER_ID, OWNER_ID, "stock")        # one answered turn, so the day's chart has a point
    await run.replies(1)
    await store.sync_shop([*run.app.parts.shop.items, ItemSpec(EVIL, "tub", 3, 1, 5, 100)], "test")
    run.api.inject("sendMessage", "drop_after_accept")
    await store.notice("test", "1", "a notice whose reply is lost", f"tg:{OWNER_ID}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not (await store.status()).unknown:
        assert loop.time() < deadline, "the planted delivery did not become unknown"
        await asyncio.sleep(0.05)


def secure_headers(response: httpx.Response) -> None:
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"


async def test_no_token_no_page():
    async with local_product(FAST) as run:
        async with httpx.AsyncClient(base_url=await base_url(run)) as client:
            assert (await client.get("/ops")).status_code == 404


def test_a_short_operator_token_is_refused_and_the_token_is_a_secret():
    with pytest.raises(config.ConfigError, match="at least 24"):
        config.load({"SHOPBOT_OPS_TOKEN": "too-short"})
    cfg = config.load({"SHOPBOT_OPS_TOKEN": TOKEN})
    assert TOKEN in cfg.secrets() and TOKEN not in repr(cfg) and cfg.redacted()["ops_token"] == "****"


async def test_the_page_refuses_without_the_cookie_and_logs_in_by_a_posted_token(caplog):
    caplog.set_level(logging.INFO)
    async with local_product(OPS) as run:
        await plant(run)
        async with httpx.AsyncClient(base_url=await base_url(run)) as client:
            refused = await client.get("/ops")
            assert refused.status_code == 401 and 'name="token"' in refused.text and "Unknown" not in refused.text
            secure_headers(refused)
            forged = await client.get("/ops", cookies={"shopbot_ops": "guessed"})
            assert forged.status_code == 401
            wrong = await client.post("/ops/login", data={"token": TOKEN[:-1] + "x"})
            assert wrong.status_code == 401 and "shopbot_ops" not in wrong.headers.get("set-cookie", "")
            ok = await login_after_the_wait(client, TOKEN)
            assert ok.status_code == 303 and ok.headers["location"] == "/ops"
            cookie = ok.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ops" in cookie
            assert TOKEN.lower() not in cookie
            page = await client.get("/ops")
            assert page.status_code == 200
            secure_headers(page)
            assert EVIL not in page.text
            assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page.text
            assert "<svg" in page.text and "polyline" in page.text and "Unknown deliveries" in page.text
            assert "<script" not in page.text
            await client.post("/ops/logout")
            assert (await client.get("/ops")).status_code == 401
    assert any("login refused" in r.getMessage() for r in caplog.records)
    assert not any(TOKEN in r.getMessage() for r in caplog.records)


async def login_after_the_wait(client: httpx.AsyncClient, token: str) -> httpx.Response:
    """A login from an address that just guessed wrong: answered 429 until its wait is over (polled, deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while (answer := await client.post("/ops/login", data={"token": token})).status_code == 429:
        assert loop.time() < deadline and int(answer.headers["retry-after"]) >= 1
        await asyncio.sleep(0.1)
    return answer


async def test_wrong_logins_slow_down_per_address_and_a_malformed_form_is_400(caplog):
    caplog.set_level(logging.INFO)
    async with local_product(OPS) as run:
        async with httpx.AsyncClient(base_url=await base_url(run)) as client:
            first = await client.post("/ops/login", data={"token": "wrong-" * 5})
            assert first.status_code == 401                      # compared: the control for what follows
            again = await client.post("/ops/login", data={"token": TOKEN})
            assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1   # not even compared
            secure_headers(again)
            second = await login_after_the_wait(client, "wrong-" * 5)
            assert second.status_code == 401
            third = await client.post("/ops/login", data={"token": TOKEN})
            assert third.status_code == 429                      # the wait doubled; the right token waits too
            assert (await login_after_the_wait(client, TOKEN)).status_code == 303
            # a login form with six fields (parse_qs raised: 500 and a traceback before)
            six = await client.post("/ops/login", data={f"f{i}": "x" for i in range(5)} | {"token": TOKEN})
            assert six.status_code == 400 and "not a login form" in six.text
            secure_headers(six)
            garbage = await client.post("/ops/login", content=b"token", headers={
                "content-type": "application/x-www-form-urlencoded"})
            assert garbage.status_code == 400
            one = await client.post("/ops/login", data={"token": TOKEN})
            assert one.status_code == 303                        # the control: a one-field form logs in
    refused = [r for r in caplog.records if "login refused" in r.getMessage()]
    assert 1 <= len(refused) <= 2                                # two wrong tokens, summarised once a second
    assert not any(r.levelno >= logging.ERROR for r in caplog.records if r.name.startswith("uvicorn"))


def browse(base: str, profile: Path, shots: Path) -> dict:
    browser = Chromium(profile)
    try:
        seen = {"refused_status": browser.open(f"{base}/ops")}
        seen["refused_text"] = browser.evaluate("document.body.innerText")
        browser.screenshot(shots / "ops-login.png")
        seen["login_status"] = browser.submit(
            f"document.querySelector('input[name=token]').value = {TOKEN!r}; document.forms[0].submit()")
        seen["title"] = browser.evaluate("document.title")
        seen["text"] = browser.evaluate("document.body.innerText")
        seen["scripts"] = browser.evaluate("document.scripts.length")
        seen["svg_lines"] = browser.evaluate("document.querySelectorAll('svg polyline').length")
        seen["styled"] = browser.evaluate("getComputedStyle(document.querySelector('th')).backgroundColor")
        seen["cookie_visible_to_script"] = browser.evaluate("document.cookie")
        seen["shot"] = browser.screenshot(shots / "ops.png")
        return seen
    finally:
        browser.close()


# skipped where Chromium is missing, but never on CI (CI=true, .ci/run installs it): there it fails, saying why
@pytest.mark.skipif(BINARY is None and os.environ.get("CI") != "true", reason=MISSING)
async def test_the_operator_page_in_headless_chromium(tmp_path):
    async with local_product(OPS) as run:
        await plant(run)
        seen = await asyncio.to_thread(browse, await base_url(run), tmp_path / "profile", tmp_path)
    assert seen["refused_status"] == 401 and "Operator token" in seen["refused_text"]
    assert seen["login_status"] == 200
    assert seen["title"] == "shopbot operator page"           # the planted script did not run
    assert EVIL in seen["text"] and seen["scripts"] == 0       # it is shown as text, never as an element
    assert "UNKNOWN DELIVERIES" in seen["text"].upper() and "shopbot resolve r2.1" in seen["text"]
    assert seen["svg_lines"] == 3 and seen["styled"] == "rgb(240, 240, 240)"   # the stylesheet loaded under the CSP
    assert seen["cookie_visible_to_script"] == ""               # HttpOnly
    assert seen["shot"].stat().st_size > 10_000
