"""The product's HTTP server (Starlette on uvicorn, in the bot's event loop) and its health route; the producers
bring their own routes (the Telegram webhook, the till API)."""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

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


def health_route(store: Store, health: Health) -> Route:
    """`GET /healthz`: always a JSON object. 200 `{"ok": true, "database": "writable", "schema": N}` while a write
    can commit and no part stopped; otherwise 503 `{"ok": false, "problems": [...], ...}`, each problem a sentence
    with no path and no secret."""
    async def healthz(request: Request) -> Response:
        problems: list[str] = []
        body: dict = {}
        try:
            body["schema"] = await store.schema_version()
            unwritable = await store.writable(health.probe_interval_s)
        except StoreError as exc:
            unwritable = f"the database cannot be read ({type(exc).__name__})"
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


class HttpServer:
    def __init__(self, routes: Sequence[BaseRoute], host: str, port: int) -> None:
        self.app = Starlette(routes=list(routes))
        config = uvicorn.Config(self.app, host=host, port=port, log_config=None, access_log=False,
                                lifespan="off", server_header=False)
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign] - the app owns signals
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        """The bound port (the configured one once the server stopped listening)."""
        for server in self.server.servers:
            for sock in server.sockets:
                return sock.getsockname()[1]
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
