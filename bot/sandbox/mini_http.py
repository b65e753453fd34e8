"""A minimal HTTP/1.1 server side on asyncio streams, for the local fakes (Bot API, supplier): small enough that
transport faults (a connection closed after the request was processed, a refused port) are easy to produce."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

MAX_BODY = 16 * 1024 * 1024


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    after: Callable[[], Any] | None = None  # run after the reply was written
    unsized: bool = False      # no Content-Length: the body runs until the connection closes (a hostile server's way)
    trickle: float = 0.0       # seconds between the body's bytes, written one at a time (a server that dribbles)



class BadHttp(Exception):
    pass


async def read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes, bool] | None:
    line = await reader.readline()
    if not line:
        return None
    while line in (b"\r\n", b"\n"):  # tolerate stray blank lines between requests
        line = await reader.readline()
        if not line:
            return None
    try:
        method, target, version = line.decode("latin-1").strip().split(" ", 2)
    except ValueError:
        raise BadHttp("bad request line") from None
    headers: dict[str, str] = {}
    total = 0
    while True:
        raw = await reader.readline()
        if not raw:
            raise BadHttp("eof in headers")
        total += len(raw)
        if total > 256 * 1024:
            raise BadHttp("headers too large")
        if raw in (b"\r\n", b"\n"):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
            if sum(map(len, chunks)) > MAX_BODY:
                raise BadHttp("body too large")
        body = b"".join(chunks)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY:
            raise BadHttp("body too large")
        body = await reader.readexactly(length)
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version.upper() == "HTTP/1.1" else connection == "keep-alive"
    return method.upper(), target, headers, body, keep_alive


async def write_response(writer: asyncio.StreamWriter, response: Response, keep_alive: bool) -> None:
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = "Unknown"
    keep_alive = keep_alive and not response.unsized
    length = "" if response.unsized else f"Content-Length: {len(response.body)}\r\n"
    head = (
        f"HTTP/1.1 {response.status} {phrase}\r\n"
        f"Server: shopbot-local\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"{length}"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    if response.trickle:
        writer.write(head.encode("latin-1"))
        for i in range(len(response.body)):
            await writer.drain()
            await asyncio.sleep(response.trickle)
            writer.write(response.body[i:i + 1])
    else:
        writer.write(head.encode("latin-1") + response.body)
    await writer.drain()
    if response.unsized:
        writer.close()
