"""The product's HTTP server (Starlette on uvicorn, in the bot's event loop): Telegram webhook, till API, health."""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from store import Store, StoreError

from .ingress import Ingress

log = logging.getLogger("shopbot.http")

WEBHOOK_PATH = "/telegram/webhook"    # never carries the token (DESIGN: the token stays out of every path)
MAX_WEBHOOK_BYTES = 1 << 20


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


def webhook_route(ingress: Ingress, secret: str) -> Route:
    expected = secret.encode()

    async def webhook(request: Request) -> Response:
        given = request.headers.get("x-telegram-bot-api-secret-token", "").encode()
        if not hmac.compare_digest(given, expected):       # constant time (C3)
            log.warning("webhook call with a wrong or missing secret from %s", request.client.host if request.client else "?")
            return JSONResponse({"ok": False, "error": "unauthorized"}, status_code=401)
        body = await request.body()
        try:
            raw = json.loads(body) if len(body) <= MAX_WEBHOOK_BYTES else None
        except (ValueError, UnicodeDecodeError, RecursionError):   # malformed: counted, answered 200
            raw = None
        try:
            # malformed, strangers and refusals are counted and answered 200 (Telegram retries every non-2xx
            # and holds back the updates behind it); only a failed commit gets 5xx so Telegram retries.
            result = await ingress.admit_raw([raw if isinstance(raw, dict) else {"update_id": None}])
        except StoreError as exc:
            log.error("webhook admission failed, answering 500 so Telegram retries: %s", exc)
            return JSONResponse({"ok": False, "error": "not stored"}, status_code=500)
        asyncio.get_running_loop().create_task(ingress.after_commit(result))
        return JSONResponse({"ok": True})
    return Route(WEBHOOK_PATH, webhook, methods=["POST"])


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
        return self.server.servers[0].sockets[0].getsockname()[1]

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
