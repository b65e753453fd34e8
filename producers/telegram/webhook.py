"""The Telegram webhook: 200 only after the commit (C2), Telegram's secret-token header checked in constant time (C3).

Malformed updates, strangers and refusals are counted and answered 200 (Telegram retries every non-2xx and holds
back the updates behind it); only a failed commit gets 5xx, so Telegram retries.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from store import StoreError, faults

from ..refusals import Refusals
from .polling import Ingress

log = logging.getLogger("shopbot.http")

WEBHOOK_PATH = "/telegram/webhook"    # never carries the token: the token stays out of every path
MAX_WEBHOOK_BYTES = 1 << 20


def webhook_route(ingress: Ingress, secret: str) -> Route:
    expected = secret.encode()
    refusals = Refusals()          # a flood of wrong secrets: one log line a second at most

    async def webhook(request: Request) -> Response:
        given = request.headers.get("x-telegram-bot-api-secret-token", "").encode()
        if not hmac.compare_digest(given, expected):       # constant time (C3)
            if (more := refusals.refused()) is not None:
                log.warning("webhook call with a wrong or missing secret from %s%s",
                            request.client.host if request.client else "?", more)
            ingress.store.tally("webhook_unauthorized")    # in memory: a flood costs no commit (C1)
            return JSONResponse({"ok": False, "error": "unauthorized"}, status_code=401)
        body = await request.body()
        try:
            raw = json.loads(body) if len(body) <= MAX_WEBHOOK_BYTES else None
        except (ValueError, UnicodeDecodeError, RecursionError):   # malformed: counted, answered 200
            raw = None
        faults.reached("K1")        # the update is read, its admission not committed: Telegram will send it again
        try:
            # malformed, strangers and refusals are counted and answered 200 (Telegram retries every non-2xx
            # and holds back the updates behind it); only a failed commit gets 5xx so Telegram retries.
            result = await ingress.admit_raw([raw if isinstance(raw, dict) else {"update_id": None}])
        except StoreError as exc:
            log.error("webhook admission failed, answering 500 so Telegram retries: %s", exc)
            return JSONResponse({"ok": False, "error": "not stored"}, status_code=500)
        faults.reached("K2")        # committed, not yet answered: the retry is a duplicate (C1)
        asyncio.get_running_loop().create_task(ingress.after_commit(result))
        return JSONResponse({"ok": True})
    return Route(WEBHOOK_PATH, webhook, methods=["POST"])
