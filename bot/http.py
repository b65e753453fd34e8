"""The product's HTTP server (Starlette on uvicorn, in the bot's event loop) and its health route; the producers
bring their own routes (the Telegram webhook, the till API)."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from store import Store, StoreError

log = logging.getLogger("shopbot.http")

@dataclass
class Health:
    """Faults of the bot's own configuration or edges; /healthz answers 503 while any is set."""
    faults: dict[str, str] = field(default_factory=dict)

    def fail(self, part: str, reason: str) -> None:
        self.faults[part] = reason

    def clear(self, part: str) -> None:
        self.faults.pop(part, None)


def health_route(store: Store, health: Health) -> Route:
    async def healthz(request: Request) -> Response:
        try:
            await store.schema_version()
        except StoreError as exc:
            return JSONResponse({"ok": False, "store": f"unreachable: {exc}"}, status_code=503)
        if health.faults:
            return JSONResponse({"ok": False, "faults": health.faults}, status_code=503)
        return JSONResponse({"ok": True})
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
