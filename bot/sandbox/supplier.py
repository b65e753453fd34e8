"""A local supplier on 127.0.0.1 for tests, drills and the demo: it keeps orders in its own SQLite file, drops
repeated idempotency keys (answering with the order it already has), and can lose its reply after committing.

`POST /orders` (Bearer token, `Idempotency-Key` header, JSON `{"supplier", "reference", "lines": [{item, quantity}]}`)
answers 201 `{"order_id": ...}` for a new key and 200 with the same order for a repeated one; `GET /orders/<key>`
answers 200 or 404. Faults (`inject`): `drop_after_commit`, `drop_before_commit`, `500`, `422` (`arg`: its error
text), `429` (`arg`: its Retry-After, sent as UTF-8 bytes, e.g. "²" or 30 digits), `slow`, `401_echo` (a 401 whose
body repeats the Authorization header it got); the hostile answers of C21, after the order is committed: `huge_body`
(a 201 of `arg` bytes, default 400 MB, streamed and never held in memory), `drip` (a 201 whose body comes one byte
every `delay` seconds), `long_order_id` (a 201 whose order id is `arg` characters, default 200 KB); each for `GET
/orders/<key>` too with `on="GET"`; and `refuse()`/`accept()`. Process mode: `python -m bot.sandbox.supplier --port N
--state FILE --token T`, with `/_control/inject`, `/_control/orders`, `/_control/refuse_for`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.sandbox.mini_http import BadHttp, Response, read_request, write_response


def _json(status: int, body: Any) -> Response:
    return Response(status, json.dumps(body).encode())


Streamed = Callable[[asyncio.StreamWriter], Awaitable[None]]   # writes its own answer, then the connection closes
HOSTILE = ("huge_body", "drip", "long_order_id")


def _head(status: int, length: int, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n{extra}"
            "Connection: close\r\n\r\n").encode("latin-1")


def hostile(fault: str, status: int, order_id: str, delay: float, arg: str) -> Streamed:
    """The answers a hostile or broken supplier gives (C21), streamed so that the fake itself stays small."""
    async def write(writer: asyncio.StreamWriter) -> None:
        if fault == "huge_body":
            size = int(arg or 400 * 1024 * 1024)
            chunk = b" " * 65536
            writer.write(_head(status, size))
            sent = 0
            while sent < size:                 # stops as soon as the client hangs up
                piece = chunk[:size - sent]
                writer.write(piece)
                await writer.drain()
                sent += len(piece)
        elif fault == "drip":
            body = json.dumps({"order_id": order_id}).encode()
            writer.write(_head(status, len(body)))
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(delay or 5.0)
        else:                                  # long_order_id
            body = json.dumps({"order_id": "X" * int(arg or 200 * 1024)}).encode()
            writer.write(_head(status, len(body)) + body)
            await writer.drain()
    return write


class LocalSupplier:
    def __init__(self, token: str = "", *, host: str = "127.0.0.1", port: int = 0,
                 state_path: Path | None = None) -> None:
        self.token = token
        self.host, self.port = host, port
        self._db = sqlite3.connect(str(state_path) if state_path else ":memory:", isolation_level=None)
        self._db.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, key TEXT UNIQUE NOT NULL, "
                         "body TEXT NOT NULL, created_at REAL NOT NULL)")
        self._faults: list[tuple[str, float, str]] = []       # (fault, delay, arg) for the next POSTs
        self._get_faults: list[tuple[str, float, str]] = []   # the same for the next GET /orders/<key>
        self._server: asyncio.base_events.Server | None = None
        self.requests: list[tuple[str, str]] = []     # (method, key) of every order request seen
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def orders(self) -> list[dict[str, Any]]:
        return [{"order_id": o, "key": k, **json.loads(b)} for o, k, b in
                self._db.execute("SELECT order_id, key, body FROM orders ORDER BY created_at")]

    def inject(self, fault: str, count: int = 1, delay: float = 0.0, arg: str = "", on: str = "POST") -> None:
        (self._get_faults if on == "GET" else self._faults).extend([(fault, delay, arg)] * count)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self.refuse()
        self._db.close()

    async def refuse(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()

    async def accept(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._handle, self.host, self.port)

    async def __aenter__(self) -> LocalSupplier:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    return
                method, target, headers, body, keep_alive = request
                response = await self._route(method, target.split("?")[0], headers, body)
                if response is None:          # a dropped connection: no reply at all
                    return
                if callable(response):        # a hostile answer: written by itself, then the connection closes
                    await response(writer)
                    return
                await write_response(writer, response, keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, BadHttp):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _route(self, method: str, path: str, headers: dict[str, str],
                     body: bytes) -> Response | Streamed | None:
        if path.startswith("/_control/"):
            return await self._control(path, body)
        if method == "POST" and self._faults and self._faults[0][0] == "401_echo":
            self._faults.pop(0)                # a server that repeats the credential it refused (tests: C16-style)
            return _json(401, {"error": f"unauthorized: {headers.get('authorization', '')} is not a valid token"})
        if self.token and headers.get("authorization", "") != f"Bearer {self.token}":
            return _json(401, {"error": "unauthorized"})
        if method == "POST" and path == "/orders":
            return await self._place(headers.get("idempotency-key", ""), body)
        if method == "GET" and path.startswith("/orders/"):
            key = path[len("/orders/"):]
            self.requests.append(("GET", key))
            row = self._db.execute("SELECT order_id, body FROM orders WHERE key = ?", (key,)).fetchone()
            fault, delay, arg = self._get_faults.pop(0) if self._get_faults else ("", 0.0, "")
            if fault in HOSTILE:
                return hostile(fault, 200, row[0] if row else "SO-none", delay, arg)
            if row is None:
                return _json(404, {"error": "no such order"})
            return _json(200, {"order_id": row[0], **json.loads(row[1])})
        return _json(404, {"error": "not found"})

    async def _place(self, key: str, body: bytes) -> Response | Streamed | None:
        self.requests.append(("POST", key))
        fault, delay, arg = self._faults.pop(0) if self._faults else ("", 0.0, "")
        if fault == "drop_before_commit":
            return None
        if fault == "429" and arg:
            reply = json.dumps({"error": "injected 429"}).encode()

            async def limited(writer: asyncio.StreamWriter) -> None:
                writer.write(_head(429, len(reply), "Retry-After: " + arg.encode().decode("latin-1") + "\r\n") + reply)
                await writer.drain()
            return limited
        if fault in ("500", "422", "429"):
            status = int(fault)
            return Response(status, json.dumps({"error": arg or f"injected {status}"}).encode())
        if not key or len(key) > 200:
            return _json(400, {"error": "an Idempotency-Key header is required"})
        try:
            order = json.loads(body)
            lines = order["lines"]
            assert isinstance(lines, list) and lines
            assert all(isinstance(line["item"], str) and isinstance(line["quantity"], int) and line["quantity"] > 0
                       for line in lines)
        except (ValueError, KeyError, TypeError, AssertionError):
            return _json(422, {"error": "malformed order"})
        row = self._db.execute("SELECT order_id FROM orders WHERE key = ?", (key,)).fetchone()
        if row is not None:                    # a repeated key: the same order, never a second one
            status, order_id = 200, row[0]
        else:
            order_id = "SO-" + secrets.token_hex(4)
            self._db.execute("INSERT INTO orders (order_id, key, body, created_at) VALUES (?, ?, ?, "
                             "julianday('now'))", (order_id, key, json.dumps(order, sort_keys=True)))
            status = 201
        if fault == "slow":
            await asyncio.sleep(delay)
        if fault == "drop_after_commit":      # committed, but the reply is lost
            return None
        if fault in HOSTILE:                   # committed, then a hostile answer
            return hostile(fault, status, order_id, delay, arg)
        return _json(status, {"order_id": order_id})

    async def _control(self, path: str, body: bytes) -> Response:
        data = json.loads(body) if body else {}
        if path == "/_control/inject":
            self.inject(data["fault"], int(data.get("count", 1)), float(data.get("delay", 0.0)),
                        str(data.get("arg", "")), str(data.get("on", "POST")))
            return _json(200, {"ok": True})
        if path == "/_control/orders":
            return _json(200, {"orders": self.orders, "requests": self.requests})
        if path == "/_control/refuse_for":
            seconds = float(data.get("seconds", 1.0))

            async def later() -> None:
                await self.refuse()
                await asyncio.sleep(seconds)
                await self.accept()
            asyncio.get_running_loop().create_task(later())
            return _json(200, {"ok": True})
        return _json(404, {"error": "unknown control"})


async def serve(token: str, host: str, port: int, state: Path | None) -> None:
    supplier = LocalSupplier(token, host=host, port=port, state_path=state)
    await supplier.start()
    print(f"local_supplier listening on {supplier.base_url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await supplier.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.sandbox.supplier", description=__doc__.splitlines()[0])
    parser.add_argument("--token", default="")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--state", type=Path)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.token, args.host, args.port, args.state))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
