"""The python-telegram-bot client both Telegram edges use: `make_bot` builds the `Bot` that ingestion polls with and the
relay sends with, pointed at any Bot API root (Telegram, a self-hosted server, the sandbox's fake).

Its HTTP transport is producers/telegram/transport.py's `AiohttpRequest` (PTB's `BaseRequest` seam; why there).
PTB 22.8's `RetryAfter` reads its own deprecated property, which would turn a 429 into a warning under `-W error`;
the transport and `retry_after_seconds` keep flood control a plain `RetryAfter` with seconds.
"""
from __future__ import annotations

import datetime as dtm
import warnings

from telegram import Bot
from telegram.error import RetryAfter
from telegram.warnings import PTBDeprecationWarning

from .transport import AiohttpRequest

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
    request = AiohttpRequest(
        pool_size=8,
        read_timeout=read_timeout,
        write_timeout=read_timeout,
        connect_timeout=connect_timeout,
        pool_timeout=connect_timeout,
    )
    get_updates_request = AiohttpRequest(
        pool_size=1,
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
