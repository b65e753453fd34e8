"""A flood of half-open connections against a real `shopbot run` whose descriptors are capped at 1,024 (`ulimit -n
1024`, as outside systemd): a fresh /healthz still gets an HTTP answer (200 or 503) within 3 s during the flood and
200 within 5 s after it, and asyncio's "out of system resource" line never floods the log. The fault is shown to
reach the process: it holds the cap's worth of connections open (its descriptor table) and a connection past the
cap reads a 503 (before bot/http.py, the same flood made /healthz time out and wrote 61,382 log lines)."""
from __future__ import annotations

import asyncio
import os
import resource
import socket
import sys

import httpx
import pytest

from bot.http import MAX_CONNECTIONS
from bot.sandbox.bot_api import LocalBotApi
from tests.support.proc import Product

FLOOD = 1_100


@pytest.fixture
async def api():
    async with LocalBotApi("779:flood-token") as server:
        yield server


def sockets_of(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_flood_of_half_open_connections_under_ulimit_1024(tmp_path, api):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 200:
        pytest.skip("this machine's hard descriptor limit is below the flood")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))   # the flood's own side
    product = Product(tmp_path, api, SHOPBOT_HTTP_PORT="0")     # it binds a free port and logs it
    loop = asyncio.get_running_loop()
    errors = tmp_path / "shopbot.err"          # its stdout and stderr, printed if the drill fails
    with errors.open("wb") as sink:
        await product.start(stdout=sink, stderr=sink,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    assert product.proc is not None
    flood: list[socket.socket] = []
    try:
        port = await product.http_port()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=3) as client:
            deadline = loop.time() + 30
            while True:                                         # up: it answers before the flood
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert loop.time() < deadline and product.proc.returncode is None
                await asyncio.sleep(0.1)
            for _ in range(FLOOD):                             # connected, and never a byte sent
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", port))
                flood.append(sock)
            await asyncio.sleep(0)
            deadline = loop.time() + 10
            while sockets_of(product.proc.pid) < MAX_CONNECTIONS:   # the fault reached it: the cap is held open
                assert loop.time() < deadline, f"only {sockets_of(product.proc.pid)} sockets open"
                await asyncio.sleep(0.05)
            answer = await asyncio.wait_for(client.get("/healthz"), 3)   # an HTTP answer within 3 s
            assert answer.status_code in (200, 503)
            past = socket.create_connection(("127.0.0.1", port), timeout=3)
            past.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert past.recv(64).startswith(b"HTTP/1.1 503")    # past the cap: 503, not silence
            past.close()
            for sock in flood:
                sock.close()
            flood.clear()
            healthy = loop.time() + 5                          # 200 within 5 s after the flood
            while True:
                try:
                    if (await client.get("/healthz", timeout=1)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert loop.time() < healthy, "no 200 within 5 s after the flood"
                await asyncio.sleep(0.1)
        assert product.proc.returncode is None                  # still running
    except BaseException:
        print(f"shopbot's stdout and stderr:\n{errors.read_text(errors='replace')[-4000:]}")
        raise
    finally:
        for sock in flood:
            sock.close()
        if product.proc.returncode is None:
            product.proc.send_signal(15)
            assert await asyncio.wait_for(product.proc.wait(), 15) == 0
    log = product.log.read_text()
    assert log.count("out of system resource") <= 10 and len(log) < 2_000_000
