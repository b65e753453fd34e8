"""The HTTP transport under python-telegram-bot's `Bot`: `AiohttpRequest`, a `telegram.request.BaseRequest` (PTB's
documented seam for its HTTP layer) on aiohttp's client.

Why not PTB's default `HTTPXRequest`: every Bot API call of the reply's path (the long poll's return, the receipt,
the send) runs on the one event loop, and httpx's layers (httpx, httpcore, anyio, h11, cookies, URL merging) cost
about 1.0-1.2 ms of CPU per call here against 0.45 ms for aiohttp (C-accelerated parser, one layer); measured and
recorded in bench/RESULTS.md (issue 31). PTB still builds every request and reads every answer (`Bot`, its error
mapping in `BaseRequest._request_wrapper`): only the bytes on the wire change hands, and the parameters travel as one
JSON object instead of form fields (the Bot API takes either; JSON is one encoding instead of one per field).

What it keeps of the HTTPX default, so nothing changes for the callers (bot/relays/sender.py `classify`):
- A failure to reach the server raises PTB's `NetworkError` (a timeout `TimedOut`) with aiohttp's exception as its
  cause; `NOT_SENT_CAUSES` names the causes that prove the request never left this machine (refused or unresolved
  connection, a connect or pool timeout, a URL it cannot send to). A client used after `shutdown` raises
  `RuntimeError("... not initialized ...")` before any I/O, as HTTPXRequest does.
- POST only; multipart when there are files (photos); one pool per request object (the poller's has one
  connection, the rest share eight).
- A proxy from the environment (`HTTPS_PROXY`/`HTTP_PROXY`, `NO_PROXY`), as httpx's `trust_env` read it: looked
  up once per host, not per call (aiohttp's own `trust_env` would read `.netrc` in a thread on every call).
- A 429 raises a plain `RetryAfter` in seconds (PTB 22.8's own 429 branch reads a deprecated property).

What it adds (C21, Telegram is an outside server): a total deadline per call (connect, pool wait, write and read
added up, so a server that dribbles its answer cannot hold a call open, which a per-read timeout allows), and a
bounded answer: more than `MAX_ANSWER_BYTES` fails the call (`NetworkError`, "may have been sent") instead of
filling memory. No cookies are kept.
"""
from __future__ import annotations

import json
import select
import urllib.request
import warnings
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from telegram.error import NetworkError, RetryAfter, TimedOut
from telegram.request import BaseRequest, RequestData
from telegram.warnings import PTBDeprecationWarning

__all__ = ["MAX_ANSWER_BYTES", "NOT_SENT_CAUSES", "AiohttpRequest", "AnswerTooLarge"]

# The largest answer read from the Bot API. The biggest legitimate one is a getUpdates of 100 updates, each a message
# of at most 4,096 characters with its entities and a reply it quotes: a few MB at most.
MAX_ANSWER_BYTES = 16 * 1024 * 1024

# Causes that prove a request never left this machine: nothing was written to a server.
NOT_SENT_CAUSES: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,     # refused, unreachable, unresolved (its DNS and TLS-handshake subclasses too)
    aiohttp.ConnectionTimeoutError,   # no connection within connect + pool time
    aiohttp.InvalidURL,               # a root it cannot even address
    aiohttp.NonHttpUrlClientError,    # ftp://, ... : never sent
)

_NOT_INITIALIZED = "This AiohttpRequest is not initialized!"


class _FreshConnector(aiohttp.TCPConnector):
    """A pool that drops the idle connections the server has closed before it hands one out, as httpcore does.

    aiohttp reuses a pooled connection while its transport looks open, and learns of the server's close only when
    the loop has read the FIN: a call made in between would write into a closed connection and fail as "may have
    been sent" (C7: `unknown`, an owner's decision) where nothing left this machine. An idle keep-alive connection
    has nothing to read unless the server closed it (or broke it), so a readable one is not reused: the call opens a
    new connection, and a refused one is `not_sent`. (tests/integration/test_sender.py
    `test_refused_port_is_not_sent` defends it; `_get` is aiohttp's own hook for taking a pooled connection.)"""

    async def _get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        pooled = self._conns.get(key)
        if pooled:
            stale = _closed_by_peer([protocol for protocol, _ in pooled])
            for entry in [e for e in pooled if e[0] in stale]:
                pooled.remove(entry)
                entry[0].close()
        return await super()._get(key, *args, **kwargs)


def _closed_by_peer(protocols: list[Any]) -> set[Any]:
    """The idle connections with something to read (the server's FIN or a reset): one `select` for all of them."""
    by_socket = {}
    for protocol in protocols:
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:          # not connected: aiohttp drops it itself
            by_socket[sock] = protocol
    if not by_socket:
        return set()
    try:
        readable, _, _ = select.select(list(by_socket), [], [], 0)
    except (OSError, ValueError):      # one is already closed underneath: none is trusted
        return set(by_socket.values())
    return {by_socket[sock] for sock in readable}


class AnswerTooLarge(aiohttp.ClientPayloadError):
    """The Bot API's answer was longer than MAX_ANSWER_BYTES (the call may have had its effect)."""


def _seconds(value: Any, default: float | None) -> float | None:
    return default if isinstance(value, type(BaseRequest.DEFAULT_NONE)) else value


class AiohttpRequest(BaseRequest):
    """One connection pool of `pool_size` keep-alive connections; the timeouts are PTB's four, each a default a call
    may override (PTB adds the long poll's wait to `read_timeout` for getUpdates)."""

    def __init__(self, *, pool_size: int, read_timeout: float, write_timeout: float, connect_timeout: float,
                 pool_timeout: float, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self._pool_size = pool_size
        self._read, self._write = read_timeout, write_timeout
        self._connect, self._pool = connect_timeout, pool_timeout
        self._max_answer = max_answer_bytes
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}     # (scheme, host) -> the proxy, read once

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=_FreshConnector(limit=self._pool_size),
                cookie_jar=aiohttp.DummyCookieJar())

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError(_NOT_INITIALIZED)
        read = _seconds(read_timeout, self._read)
        write = _seconds(write_timeout, self._write)
        connect = _seconds(connect_timeout, self._connect)
        pool = _seconds(pool_timeout, self._pool)
        phases = (read, write, connect, pool)
        total = None if None in phases else sum(p for p in phases if p is not None)
        waiting = None if connect is None or pool is None else connect + pool    # a pooled connection, or a new one
        timeout = aiohttp.ClientTimeout(total=total, connect=waiting, sock_connect=connect, sock_read=read)
        try:
            async with session.request(method, url, data=_body(request_data), timeout=timeout,
                                       headers={"User-Agent": self.USER_AGENT}, proxy=self._proxy(url)) as response:
                payload = await self._bounded(response)
                code = response.status
        except TimeoutError as exc:      # aiohttp's timeouts are TimeoutErrors (connect, read, total)
            raise TimedOut(f"aiohttp.{type(exc).__name__}: timed out") from exc
        except aiohttp.ClientError as exc:       # its message may quote the URL, which holds the bot token
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {str(exc).replace(url, _without_token(url))}") from exc
        if code == 429:
            _raise_retry_after(payload)
        return code, payload

    def _proxy(self, url: str) -> str | None:
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            proxy = urllib.request.getproxies().get(parts.scheme)
            self._proxies[key] = None if not proxy or urllib.request.proxy_bypass(key[1]) else proxy
        return self._proxies[key]

    async def _bounded(self, response: aiohttp.ClientResponse) -> bytes:
        if response.content_length is not None and response.content_length > self._max_answer:
            raise AnswerTooLarge(f"the answer's Content-Length {response.content_length} is over "
                                 f"{self._max_answer} bytes")
        chunks: list[bytes] = []
        size = 0
        while chunk := await response.content.read(65536):
            size += len(chunk)
            if size > self._max_answer:
                raise AnswerTooLarge(f"the answer is longer than {self._max_answer} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def _without_token(url: str) -> str:
    """`<root>/bot<token>/<method>` as `<root>/bot****/<method>` (the last `/bot` before the method: a root may hold
    `/bot` itself)."""
    head, _, method = url.rpartition("/")
    root, sep, _ = head.rpartition("/bot")
    return f"{root}{sep}****/{method}" if sep else url


def _body(request_data: RequestData | None) -> aiohttp.FormData | aiohttp.BytesPayload | None:
    """PTB's parameters as one JSON object (the Bot API takes `application/json` for every call that uploads nothing:
    one `json.dumps` instead of a JSON text per parameter, form-encoded), or multipart when the call uploads files."""
    if request_data is None:
        return None
    files = request_data.multipart_data
    if not files:
        return aiohttp.BytesPayload(json.dumps(request_data.parameters).encode(), content_type="application/json")
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, file in files.items():
        if isinstance(file, tuple):       # (file name, content, MIME type), as PTB's InputFile gives it
            filename, content, *rest = file
            form.add_field(name, content, filename=filename, content_type=rest[0] if rest else None)
        else:
            form.add_field(name, file)
    return form


def _raise_retry_after(payload: bytes) -> None:
    """A 429 with `retry_after` as a plain RetryAfter, PTB's deprecation warning silenced only inside this synchronous
    block (PTB 22.8's `RetryAfter.__init__` reads its own deprecated property, which under `-W error` would surface
    as a warning instead, and be misread as "unknown"). Without it PTB's own branch raises."""
    try:
        body = json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return
    params = body.get("parameters") if isinstance(body, dict) else None
    if not isinstance(params, dict) or params.get("migrate_to_chat_id"):
        return
    retry_after = params.get("retry_after")
    if isinstance(retry_after, int) and retry_after:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PTBDeprecationWarning)
            exc = RetryAfter(retry_after)
        raise exc
