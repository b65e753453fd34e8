"""The HTTP server under floods and foreign names (C21; bot/http.py): a connection past the cap is answered 503 at
once, not left in silence; a fresh connection that never completes its headers is closed at the header deadline;
a foreign Host is refused; /metrics wants its token when one is set. Each test holds its control beside it (the
same request within the limits, with the right name or token, is answered as before)."""
from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bot.http import HttpServer
from bot.sandbox.local_setup import local_product

FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0"}


async def ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


@pytest.fixture
async def server():
    http = HttpServer([Route("/ok", ok)], "127.0.0.1", 0, allowed_hosts=("127.0.0.1",), max_connections=8,
                      header_deadline_s=0.5)
    task = asyncio.create_task(http.serve())
    await asyncio.wait_for(http.started.wait(), 10)
    try:
        yield http
    finally:
        http.stop()
        await task


def half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n")           # headers never completed
    return sock


async def read_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    data = b""
    async with asyncio.timeout(timeout):
        while chunk := await loop.sock_recv(sock, 4096):
            data += chunk
    return data


async def test_a_connection_past_the_cap_is_answered_503_and_a_half_open_one_closed_at_the_deadline(server):
    held = [half_open(server.port) for _ in range(8)]                   # the cap, all half-open
    try:
        extra = socket.create_connection(("127.0.0.1", server.port))     # it sends nothing: answered anyway and
        assert (await read_all(extra)).startswith(b"HTTP/1.1 503 ")      # closed at once, so a flood past the cap
        extra.close()                                                    # holds no descriptor (not uvicorn's 503)
        for sock in held:                                                # closed by the header deadline
            assert await read_all(sock) == b""
    finally:
        for sock in held:
            sock.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
        assert (await client.get("/ok")).text == "ok"                   # the control: served again


async def test_a_complete_request_is_served_within_the_deadline(server):
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    answer = await read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"ok")


async def test_a_foreign_host_is_refused(server):
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
        assert (await client.get("/ok", headers={"Host": "attacker.example"})).status_code == 400
        assert (await client.get("/ok", headers={"Host": "127.0.0.1:8080"})).status_code == 200


async def test_the_default_names_are_loopback_and_the_webhook_host_and_metrics_want_their_token():
    token = "metrics-token-0123456789"
    async with local_product({**FAST, "SHOPBOT_METRICS_TOKEN": token}) as run:
        await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
        assert run.app.cfg.http_hosts == ("127.0.0.1", "localhost")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{run.app.parts.http.port}") as client:
            assert (await client.get("/healthz", headers={"Host": "rebound.example"})).status_code == 400
            assert (await client.get("/healthz", headers={"Host": "localhost"})).status_code in (200, 503)
            assert (await client.get("/metrics")).status_code == 401
            assert (await client.get("/metrics", headers={"Authorization": "Bearer wrong-token-0123456"})
                    ).status_code == 401
            shown = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert shown.status_code == 200 and "shopbot_" in shown.text


def test_the_webhook_host_is_a_default_name():
    from bot import config
    cfg = config.load({"TELEGRAM_BOT_TOKEN": "123:abc", "SHOPBOT_OWNER_IDS": "1001",
                       "SHOPBOT_WEBHOOK_URL": "https://bot.shop.example/telegram/webhook",
                       "SHOPBOT_WEBHOOK_SECRET": "s3cret"})
    assert cfg.http_hosts == ("127.0.0.1", "localhost", "bot.shop.example")
    cfg = config.load({"SHOPBOT_HTTP_HOSTS": "Till.Local, 192.168.1.5"})
    assert cfg.http_hosts == ("till.local", "192.168.1.5")
    with pytest.raises(config.ConfigError, match="SHOPBOT_HTTP_HOSTS"):
        config.load({"SHOPBOT_HTTP_HOSTS": "http://x:80"})
    with pytest.raises(config.ConfigError, match="SHOPBOT_METRICS_TOKEN"):
        config.load({"SHOPBOT_METRICS_TOKEN": "short"})
