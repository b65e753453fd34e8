"""/healthz tells the truth: always a JSON object; 503 with its reason while the database is full or write-locked by
another connection (by the write probe, and by the outcome of the last commit), 200 again after; no path and no
secret in any answer."""
from __future__ import annotations

import asyncio
import sqlite3

import httpx

from bot.sandbox.local_setup import OWNER_ID, local_product
from tests.edge.test_resource_faults import BIG, cap_pages, settled, uncap_pages

from .test_metrics import FAST


async def health(run) -> httpx.Response:
    await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(f"http://127.0.0.1:{run.app.parts.http.port}/healthz")


async def health_until(run, status: int, timeout: float = 10.0) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        response = await health(run)
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert isinstance(body, dict) and body["ok"] is (response.status_code == 200)
        if response.status_code == status:
            return body
        if loop.time() > deadline:
            raise AssertionError(f"/healthz stayed {response.status_code}: {body}")
        await asyncio.sleep(0.05)


def no_path_no_secret(body: dict, run) -> None:
    text = str(body)
    assert str(run.app.cfg.db.parent) not in text and "/" not in text, text
    assert str(run.app.cfg.telegram_token) not in text and "token" not in text.lower()


async def test_healthz_is_503_with_its_reason_while_the_database_is_full_and_200_after() -> None:
    async with local_product(FAST) as run:
        run.app.parts.health.probe_interval_s = 0.1
        body = await health_until(run, 200)
        assert body["database"] == "writable" and body["parts_stopped"] == []
        await cap_pages(run.app.parts.store)
        body = await health_until(run, 503)
        assert body["problems"] == ["the database is full: no room for new pages"]
        no_path_no_secret(body, run)
        await uncap_pages(run.app.parts.store)
        await health_until(run, 200)


async def test_a_failed_commit_makes_healthz_503_until_a_write_probe_commits() -> None:
    async with local_product(FAST) as run:
        await health_until(run, 200)
        run.app.parts.health.probe_interval_s = 3600     # the probe ran once: only real commits decide from here
        store = run.app.parts.store
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        await settled(run)
        await cap_pages(store)
        for i in range(3):                               # their admission needs new pages: it fails
            posted = run.api.post_message(OWNER_ID, OWNER_ID, f"{BIG} {i}")
        body = await health_until(run, 503)
        assert body["problems"] == ["the database is full: no room for new pages"]
        await asyncio.sleep(0)
        assert (await health(run)).status_code == 503     # later small commits that fit do not clear it
        await uncap_pages(store)
        await run.admitted(posted["update_id"])          # the same update again, stored this time
        run.app.parts.health.probe_interval_s = 0.1      # the next probe commits: healthy again
        await health_until(run, 200)


async def test_healthz_is_503_while_another_connection_holds_the_write_lock_and_200_after() -> None:
    async with local_product(FAST) as run:
        run.app.parts.health.probe_interval_s = 0.1
        await health_until(run, 200)
        other = sqlite3.connect(str(run.app.cfg.db), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            body = await health_until(run, 503)
            # the probe's own finding, or (when writes queue behind the lock on a loaded machine) the check's deadline
            assert body["problems"] in (["the database is write-locked by another connection"],
                                        ["the database is busy: this check waited over 2 s for it (another "
                                         "connection may hold its write lock)"]), body
            no_path_no_secret(body, run)
        finally:
            other.execute("ROLLBACK")
            other.close()
        await health_until(run, 200)


async def test_a_stopped_part_is_named_without_its_paths_or_secrets() -> None:
    async with local_product(FAST) as run:
        token = str(run.app.cfg.telegram_token)
        run.app.parts.health.fail("relay", f"cannot read /etc/shopbot/secret.env with {token}")
        body = await health_until(run, 503)
        assert body["problems"] == ["relay stopped: cannot read <path> with ****"], body
        assert body["parts_stopped"] == ["relay"]


async def test_a_real_run_capped_by_shopbot_db_max_pages_answers_503_full(tmp_path) -> None:
    """The test-mode page cap (SHOPBOT_DB_MAX_PAGES with SHOPBOT_TEST_MODE=1) on a real `shopbot run` process (the
    way back to 200 once there is room is shown in-process above)."""
    from bot.sandbox.bot_api import LocalBotApi
    from tests.support.proc import Product

    async def healthz_until(status: int, timeout: float = 20.0) -> dict:
        port = await product.http_port()           # each start binds a free port of its own and logs it
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                try:
                    response = await client.get(f"http://127.0.0.1:{port}/healthz")
                    if response.status_code == status:
                        return response.json()
                except httpx.TransportError:
                    pass                           # not listening yet
                assert loop.time() < deadline, f"/healthz never answered {status}"
                await asyncio.sleep(0.1)

    async with LocalBotApi("777:health-full-token") as api:
        product = Product(tmp_path, api, SHOPBOT_HTTP_PORT="0")
        await product.start()
        try:
            await healthz_until(200)
        finally:
            assert await product.stop() == 0
        pages = product.query("PRAGMA page_count")[0][0]
        product.settings.update({"SHOPBOT_TEST_MODE": "1", "SHOPBOT_DB_MAX_PAGES": str(pages)})
        await product.start()
        try:
            body = await healthz_until(503)
            assert body["problems"] == ["the database is full: no room for new pages"] and body["ok"] is False
            assert str(tmp_path) not in str(body)
        finally:
            assert await product.stop() == 0
