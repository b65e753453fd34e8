"""The product's HTTP server (Starlette on uvicorn, in the bot's event loop) and its health route; the producers
bring their own routes (the Telegram webhook, the till API).

Floods (C21: nothing from outside stops a part): at most `MAX_CONNECTIONS` connections are open at once; a
connection past that is answered 503 at once and closed (uvicorn's `limit_concurrency` answers 503 only to a
request, and a half-open connection never sends one), so the descriptors never run out before the cap is reached;
a fresh connection must complete its request headers within `HEADER_DEADLINE_S` (uvicorn has no such deadline:
without it a half-open connection stays open for ever); the listen backlog is small (`BACKLOG`), so a flood waits
in the kernel for little and the answer stays fast. The systemd unit raises LimitNOFILE well above the cap.
`Host` must be one of the configured names (TrustedHostMiddleware: no DNS rebinding through a tunnel)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.logs import redact
from store import Store, StoreError

log = logging.getLogger("shopbot.http")

@dataclass
class Health:
    """Faults of the bot's own configuration or edges; /healthz answers 503 while any is set."""
    faults: dict[str, str] = field(default_factory=dict)
    probe_interval_s: float = 5.0     # the write probe runs at most this often (store.Store.writable)

    def fail(self, part: str, reason: str) -> None:
        self.faults[part] = reason

    def clear(self, part: str) -> None:
        self.faults.pop(part, None)


_PATH = re.compile(r"(?<![\w:/.])/[^\s'\"]+")


def public_reason(text: str) -> str:
    """A reason fit for /healthz: secrets redacted, file paths replaced (the page may be seen by a load balancer
    or a monitoring system that has no business knowing either)."""
    return _PATH.sub("<path>", redact(text))[:300]


HEALTH_WAIT_S = 2.0


def health_route(store: Store, health: Health) -> Route:
    """`GET /healthz`: always a JSON object. 200 `{"ok": true, "database": "writable", "schema": N}` while a write
    can commit and no part stopped; otherwise 503 `{"ok": false, "problems": [...], ...}`, each problem a sentence
    with no path and no secret."""
    async def healthz(request: Request) -> Response:
        problems: list[str] = []
        body: dict[str, object] = {}
        try:
            # answered within HEALTH_WAIT_S even when writes queue on the store's connection behind a foreign lock
            body["schema"] = await asyncio.wait_for(store.schema_version(), HEALTH_WAIT_S)
            unwritable = await asyncio.wait_for(store.writable(health.probe_interval_s), HEALTH_WAIT_S)
        except StoreError as exc:
            unwritable = f"the database cannot be read ({type(exc).__name__})"
        except TimeoutError:
            unwritable = (f"the database is busy: this check waited over {HEALTH_WAIT_S:g} s for it (another "
                          "connection may hold its write lock)")
        body["database"] = unwritable or "writable"
        if unwritable:
            problems.append(unwritable)
        for part, reason in sorted(health.faults.items()):
            problems.append(f"{part} stopped: {public_reason(reason)}")
        body["parts_stopped"] = sorted(health.faults)
        if problems:
            return JSONResponse({"ok": False, "problems": problems, **body}, status_code=503,
                                headers={"Cache-Control": "no-store"})
        return JSONResponse({"ok": True, **body}, headers={"Cache-Control": "no-store"})
    return Route("/healthz", healthz, methods=["GET"])


MAX_CONNECTIONS = 256         # open at once; far below the 1,024 descriptors of a default soft limit
HEADER_DEADLINE_S = 5.0       # a fresh connection's request headers must be complete within this
BACKLOG = 64
LINGER_S = 0.5                # a refused connection stays open this long for its client to read the 503
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 20\r\n"
         b"retry-after: 1\r\nconnection: close\r\n\r\nService Unavailable\n")


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the cap answered at connect time and a deadline for the first request's
    headers (see the module docstring)."""
    busy_refused = 0            # connections answered 503 at once since start (all servers of this process)
    lingering = 0               # of those, the ones still open for their client to read the answer
    header_deadline_s = HEADER_DEADLINE_S

    # uvicorn's own signature, which narrows asyncio.Protocol's (uvicorn ignores the override error too)
    def connection_made(self, transport: asyncio.Transport) -> None:   # type: ignore[override]
        if self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency:
            GuardedH11.busy_refused += 1
            self.transport = transport
            transport.write(_BUSY)
            if GuardedH11.lingering >= self.limit_concurrency:   # a flood: no descriptor is kept for politeness
                transport.abort()
                return
            # the client's request may still be arriving: closing now would reset the connection before it reads
            # the 503, so the write side is shut and the socket closed a moment later (its bytes are dropped)
            GuardedH11.lingering += 1
            if transport.can_write_eof():
                transport.write_eof()
            self.loop.call_later(LINGER_S, self._end_linger)
            return
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(self.header_deadline_s,
                                                                                 self._no_headers)

    def _end_linger(self) -> None:
        GuardedH11.lingering -= 1
        self.transport.close()

    def _no_headers(self) -> None:
        self._header_timer = None
        if self.cycle is None and not self.transport.is_closing():      # no request started on it: let it go
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        if self in self.connections:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self in self.connections:         # a refused connection's late bytes are dropped
            super().data_received(data)


class _Server(uvicorn.Server):
    """The app owns the process's signals: uvicorn (>= 0.29) would take SIGINT/SIGTERM while it serves."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    def __init__(self, routes: Sequence[BaseRoute], host: str, port: int, *,
                 allowed_hosts: Sequence[str] = ("*",), max_connections: int = MAX_CONNECTIONS,
                 header_deadline_s: float = HEADER_DEADLINE_S) -> None:
        self.app = Starlette(routes=list(routes),
                             middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))])
        config = uvicorn.Config(self.app, host=host, port=port, log_config=None, access_log=False,
                                lifespan="off", server_header=False,
                                http=type("GuardedH11", (GuardedH11,), {"header_deadline_s": header_deadline_s}),
                                limit_concurrency=max_connections, backlog=BACKLOG, timeout_keep_alive=5)
        self.server = _Server(config)
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        """The bound port (the configured one once the server stopped listening)."""
        for server in self.server.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.server.config.port

    async def serve(self) -> None:
        task = asyncio.ensure_future(self.server.serve())
        while not self.server.started and not task.done():
            await asyncio.sleep(0.01)
        if task.done():
            await task
            raise OSError("the HTTP server could not start (is the port in use?)")
        self.started.set()
        log.info("http server listening on %s:%d", self.server.config.host, self.port)
        await task

    def stop(self) -> None:
        self.server.should_exit = True
