"""The python-telegram-bot client both Telegram edges use: `make_bot` builds the `Bot` that ingestion polls with and the
relay sends with, pointed at any Bot API root (Telegram, a self-hosted server, the sandbox's fake).

PTB 22.8's `RetryAfter` reads its own deprecated property, which would turn a 429 into a warning under
`-W error`; `_Request` and `retry_after_seconds` keep flood control a plain `RetryAfter` with seconds.
"""
from __future__ import annotations

import datetime as dtm
import json
import warnings
from typing import Any

from telegram import Bot
from telegram.error import RetryAfter
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

__all__ = ["make_bot", "retry_after_seconds"]


def retry_after_seconds(exc: RetryAfter) -> float:
    """`RetryAfter.retry_after` in seconds without triggering PTB's deprecation warning."""
    value = getattr(exc, "_retry_after", None)  # the timedelta PTB 22.2+ stores
    if isinstance(value, dtm.timedelta):
        return value.total_seconds()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    if isinstance(value, dtm.timedelta):
        return value.total_seconds()
    return float(value)


class _Request(HTTPXRequest):
    """HTTPXRequest that raises `RetryAfter` for a 429 itself, with PTB's deprecation warning silenced.

    PTB 22.8's `RetryAfter.__init__` reads its own deprecated `retry_after` property, so under
    `-W error::DeprecationWarning` (or pytest `filterwarnings = error`) a 429 would surface as a
    `PTBDeprecationWarning` instead of `RetryAfter`, and be misread as "unknown". This replicates PTB's 429
    branch of `BaseRequest._request_wrapper` (which lets any `TelegramError` from `do_request` through unchanged);
    the warning filter is changed only inside a synchronous block, so no other task can observe it.
    """

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        code, payload = await super().do_request(*args, **kwargs)
        if code == 429:
            retry_after = _parameters(payload).get("retry_after")
            if isinstance(retry_after, int) and retry_after and not _parameters(payload).get("migrate_to_chat_id"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PTBDeprecationWarning)
                    exc = RetryAfter(retry_after)
                raise exc
        return code, payload


def _parameters(payload: bytes) -> dict[str, object]:
    try:
        body = json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return {}
    params = body.get("parameters") if isinstance(body, dict) else None
    return params if isinstance(params, dict) else {}


def make_bot(
    token: str, api_base_url: str, *, read_timeout: float = 10.0, connect_timeout: float = 5.0
) -> Bot:
    """A PTB Bot pointed at `api_base_url` (the root, e.g. "https://api.telegram.org" or a LocalBotApi.base_url).

    Calls go to f"{root}/bot{token}/{method}". Regular calls share one pool; `get_updates` has its own
    one-connection pool whose read timeout has 5 s of slack (PTB adds the long-poll `timeout` on top of it).
    """
    root = api_base_url.rstrip("/")
    if root.endswith("/bot"):
        root = root[: -len("/bot")]
    request = _Request(
        connection_pool_size=8,
        read_timeout=read_timeout,
        write_timeout=read_timeout,
        connect_timeout=connect_timeout,
        pool_timeout=connect_timeout,
    )
    get_updates_request = _Request(
        connection_pool_size=1,
        read_timeout=read_timeout + 5.0,
        write_timeout=read_timeout,
        connect_timeout=connect_timeout,
        pool_timeout=connect_timeout,
    )
    return Bot(
        token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        request=request,
        get_updates_request=get_updates_request,
    )
