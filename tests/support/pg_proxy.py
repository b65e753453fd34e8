"""A fake network edge in front of PostgreSQL for K16: a TCP proxy that forwards bytes between the product and the
server and, when armed, loses a connection around a client COMMIT. The fault is the network's, never a patch of
the product's code.

    async with PgProxy() as proxy:
        url = proxy.url(pg_url)            # SHOPBOT_DB for the process under test
        proxy.arm(r"UPDATE runs SET ended_at")   # the next COMMIT of a transaction that ran such a statement
        ...
        await proxy.dropped.wait()

It reads the frontend protocol just enough to see statement texts: the simple query ('Q') and the extended
protocol's Parse ('P'). A transaction starts at BEGIN; when it ran a statement matching the armed pattern, its
COMMIT is where the fault happens, once:
- `after` (the default): the COMMIT is forwarded, the server's answer is read up to ReadyForQuery and thrown away
  (so the commit certainly happened), then both sides are closed: the client saw its connection drop after it sent
  COMMIT, with no answer.
- `before`: both sides are closed instead of forwarding the COMMIT: the server rolls the transaction back, the
  client sees the same dropped connection. The records must tell the two apart.

The control channel is this object itself (the proxy runs in the test's event loop, as the fake Bot API does):
`arm`, `dropped`, `drops`. URLs through it turn off TLS and GSS encryption so the protocol is readable.
"""
from __future__ import annotations

import asyncio
import re
import struct
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102


@dataclass
class Armed:
    pattern: re.Pattern[str]
    when: str


@dataclass(eq=False)
class _Link:
    client_reader: asyncio.StreamReader
    client_writer: asyncio.StreamWriter
    server_reader: asyncio.StreamReader
    server_writer: asyncio.StreamWriter
    matched: bool = False          # the open transaction ran a statement matching the armed pattern
    statements: list[str] = field(default_factory=list)
    back: asyncio.Task[None] | None = None     # server -> client forwarding


class PgProxy:
    def __init__(self, upstream_host: str = "127.0.0.1", upstream_port: int = 5432) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.armed: Armed | None = None
        self.dropped = asyncio.Event()
        self.drops: list[tuple[str, list[str]]] = []    # (when, the statements of the lost transaction)
        self.connections = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._links: set[_Link] = set()

    async def __aenter__(self) -> PgProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for link in list(self._links):      # closed, not cancelled: each connection's task ends on its own
            _close(link)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    def url(self, database_url: str) -> str:
        """`database_url` (a postgresql:// URL of the real server) through this proxy."""
        parts = urlsplit(database_url)
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        query = dict(parse_qsl(parts.query))
        query.update(sslmode="disable", gssencmode="disable")
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))

    def arm(self, pattern: str, when: str = "after") -> None:
        """Lose the connection at the next COMMIT of a transaction that ran a statement matching `pattern`."""
        if when not in ("after", "before"):
            raise ValueError(when)
        self.armed = Armed(re.compile(pattern), when)
        self.dropped.clear()

    # ---- the connections ----------------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        link = _Link(reader, writer, server_reader, server_writer)
        self._links.add(link)
        back = link.back = asyncio.create_task(self._server_to_client(link))
        try:
            await self._client_to_server(link)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            back.cancel()
            await asyncio.gather(back, return_exceptions=True)
            _close(link)
            self._links.discard(link)
            self._tasks.discard(task)

    async def _server_to_client(self, link: _Link) -> None:
        try:
            while data := await link.server_reader.read(65536):
                link.client_writer.write(data)
                await link.client_writer.drain()
        except ConnectionError:
            pass
        _close(link)                        # the server closed (a cancel never gets here): so does the client side

    async def _client_to_server(self, link: _Link) -> None:
        reader, upstream = link.client_reader, link.server_writer
        while True:                         # the untyped start: SSL/GSS requests, then the startup message
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            upstream.write(head + await reader.readexactly(length - 8))
            await upstream.drain()
            if code not in (SSL_REQUEST, GSSENC_REQUEST):
                if code == CANCEL_REQUEST:
                    return
                break
        after_sync = False                  # a COMMIT sent by Parse: the fault comes with its Sync
        while True:
            kind = await reader.readexactly(1)
            size = await reader.readexactly(4)
            body = await reader.readexactly(struct.unpack("!i", size)[0] - 4)
            message = kind + size + body
            text = _statement(kind, body)
            armed = self.armed
            if text is not None:
                head = text.lstrip().upper()
                if head.startswith(("BEGIN", "START TRANSACTION")):
                    link.matched, link.statements = False, []
                link.statements.append(text)
                if armed is not None and armed.pattern.search(text):
                    link.matched = True
                if armed is not None and link.matched and head.startswith(("COMMIT", "END")):
                    self.armed = None       # once
                    if armed.when == "before":
                        self._record("before", link)
                        _close(link)
                        return
                    if kind == b"Q":
                        await self._drop_after(link, message)
                        return
                    after_sync = True
            if after_sync and kind == b"S":
                await self._drop_after(link, message)
                return
            upstream.write(message)
            await upstream.drain()

    async def _drop_after(self, link: _Link, message: bytes) -> None:
        """Forward the COMMIT, swallow the server's answer up to ReadyForQuery, close both sides."""
        if link.back is not None:           # the answer must not reach the client: stop forwarding first
            link.back.cancel()
            await asyncio.gather(link.back, return_exceptions=True)
        link.server_writer.write(message)
        await link.server_writer.drain()
        try:
            await asyncio.wait_for(_until_ready(link.server_reader), 5.0)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        self._record("after", link)
        _close(link)

    def _record(self, when: str, link: _Link) -> None:
        self.drops.append((when, list(link.statements)))
        self.dropped.set()


def _statement(kind: bytes, body: bytes) -> str | None:
    if kind == b"Q":
        return body.rstrip(b"\0").decode("utf-8", "replace")
    if kind == b"P":
        name_end = body.index(b"\0")
        query_end = body.index(b"\0", name_end + 1)
        return body[name_end + 1:query_end].decode("utf-8", "replace")
    return None


async def _until_ready(reader: asyncio.StreamReader) -> None:
    while True:
        kind = await reader.readexactly(1)
        size = struct.unpack("!i", await reader.readexactly(4))[0]
        await reader.readexactly(size - 4)
        if kind == b"Z":
            return


def _close(link: _Link) -> None:
    for writer in (link.client_writer, link.server_writer):
        try:
            writer.close()
        except Exception:
            pass
