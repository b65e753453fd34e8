"""The till's HTTP API (a public interface: keep it): `POST /till/counts` and `GET /till/counts/<request_id>`.

The bearer token decides the till id (C3); tokens are compared in constant time. A post is admitted as
`till:<till_id>:<request_id>` (session `till:<till_id>`, report back to the till) and answered 202 only after the
commit (C2); a failed commit answers 500 so the till sends it again, and the identity makes a repeat a duplicate.
The worker applies the counts without a model; the till reads the report back through the GET.

Every error body is `{"error": code, "detail": sentence, "field": JSON path or null}` (a 409 adds `work`).
"""
from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from store import Admission, Occurrence, Store, StoreError, WorkKind

from .refusals import Refusals
from .till_request import MAX_BODY_BYTES, TillCounts, TillError, parse_counts_body, request_id_error

log = logging.getLogger("shopbot.till")

DEFAULT_RETRY_AFTER_S = 30
MIN_TOKEN_CHARS = 16
_TILL_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")
_TOKEN = re.compile(r"[\x21-\x7e]+")   # printable ASCII, no spaces (it travels in a header)


def parse_till_tokens(text: str, key: str = "SHOPBOT_TILL_TOKENS") -> dict[str, str]:
    """`till_id:token` pairs, comma-separated, into {till_id: token}. A malformed pair, a repeated till id or a token
    used by two tills (the token must decide the till) raises ValueError naming the key, never the token."""
    tokens: dict[str, str] = {}
    for number, pair in enumerate(filter(None, (p.strip() for p in text.split(","))), start=1):
        till_id, sep, token = pair.partition(":")
        if not sep or not _TILL_ID.fullmatch(till_id):
            raise ValueError(f"{key}: pair {number} must be <till_id>:<token> with a till id of 1-32 characters of "
                             "A-Za-z0-9._-")
        if len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token) or "," in token:
            raise ValueError(f"{key}: the token of till {till_id} must be at least {MIN_TOKEN_CHARS} printable "
                             "characters without spaces or commas")
        if till_id in tokens:
            raise ValueError(f"{key}: till {till_id} is listed twice")
        if token in tokens.values():
            raise ValueError(f"{key}: till {till_id} has the token of another till; each till needs its own")
        tokens[till_id] = token
    return tokens


def _error(fault: TillError, headers: Mapping[str, str] | None = None, **extra: object) -> JSONResponse:
    return JSONResponse({**fault.body(), **extra}, status_code=fault.status, headers=dict(headers or {}))


UNAUTHORIZED = TillError(401, "unauthorized",
                         "a valid till token is required: send it as Authorization: Bearer <token>", None)


class TillApi:
    def __init__(self, store: Store, tokens: Mapping[str, str], *,
                 retry_after_s: int = DEFAULT_RETRY_AFTER_S) -> None:
        self.store = store
        self._tokens = [(till_id, token.encode()) for till_id, token in tokens.items()]
        self.retry_after_s = retry_after_s
        self._refused = Refusals()
        if not self._tokens:
            log.warning("no till tokens configured (SHOPBOT_TILL_TOKENS): every till request is answered 401")

    def routes(self) -> list[Route]:
        return [Route("/till/counts", self.post_counts, methods=["POST"]),
                Route("/till/counts/{request_id:str}", self.get_counts, methods=["GET"])]

    # ---- authentication (C3) -------------------------------------------------------------------------------
    def till_of(self, authorization: str | None) -> str | None:
        """The till whose token this is; every configured token is compared, in constant time each."""
        scheme, _, given = (authorization or "").partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            return None
        found = None
        candidate = given.encode()
        for till_id, token in self._tokens:
            if hmac.compare_digest(candidate, token):
                found = till_id
        return found

    async def _unauthorized(self, request: Request) -> Response:
        """401, counted in memory and logged at most once a second (a flood of bad tokens costs no commit and no
        log line per request)."""
        if (more := self._refused.refused()) is not None:
            log.warning("till request without a valid token from %s%s", request.client.host if request.client else "?",
                        more)
        self.store.tally("till_unauthorized")   # in memory: a flood of bad tokens costs no commit (C1)
        return _error(UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})

    # ---- POST /till/counts ---------------------------------------------------------------------------------
    async def post_counts(self, request: Request) -> Response:
        till_id = self.till_of(request.headers.get("authorization"))
        if till_id is None:
            return await self._unauthorized(request)
        content_type = request.headers.get("content-type")
        wrong_type = parse_counts_body(b"", content_type, ())   # its first check is the content type (415)
        if isinstance(wrong_type, TillError) and wrong_type.status == 415:
            return _error(wrong_type)
        raw = await _read_limited(request, MAX_BODY_BYTES)
        if isinstance(raw, TillError):
            return _error(raw)
        try:
            items = await self.store.item_names()
        except StoreError as exc:
            return self._not_stored(till_id, exc)
        parsed = parse_counts_body(raw, content_type, items)
        if isinstance(parsed, TillError):
            return _error(parsed)
        return await self._admit(till_id, parsed)

    async def _admit(self, till_id: str, counts: TillCounts) -> Response:
        source = f"till:{till_id}:{counts.request_id}"
        try:
            result = await self.store.admit(Occurrence(source, f"till:{till_id}", counts.canonical_payload(),
                                                       WorkKind.AGENT, f"till:{till_id}"))
        except StoreError as exc:
            return self._not_stored(till_id, exc)
        log.info("till post source=%s outcome=%s work_id=%s", source, result.outcome.value, result.work_id)
        if result.outcome in (Admission.ACCEPTED, Admission.DUPLICATE):
            return JSONResponse({"outcome": result.outcome.value, "work": str(result.work_id)}, status_code=202)
        if result.outcome is Admission.CONFLICT:
            return _error(TillError(409, "conflict", f"request_id {counts.request_id} was already used by this till "
                                    "with other content; send new counts under a new request_id", "$.request_id"),
                          work=str(result.work_id))
        return _error(TillError(503, "busy", "the shop's queue is full and the counts were not taken; send the same "
                                f"request again after {self.retry_after_s} seconds", None),
                      {"Retry-After": str(self.retry_after_s)})

    def _not_stored(self, till_id: str, exc: StoreError) -> Response:
        log.error("till request not stored till=%s, answering 500 so the till sends it again: %s", till_id, exc)
        return _error(TillError(500, "not_stored", "the counts could not be stored; send the same request again",
                                None))

    # ---- GET /till/counts/<request_id> ---------------------------------------------------------------------
    async def get_counts(self, request: Request) -> Response:
        till_id = self.till_of(request.headers.get("authorization"))
        if till_id is None:
            return await self._unauthorized(request)
        request_id = request.path_params["request_id"]
        bad = request_id_error(request_id)
        if bad is not None:
            return _error(bad)
        try:
            found = await self.store.work_with_report(f"till:{till_id}:{request_id}")
        except StoreError as exc:
            log.error("till read failed till=%s: %s", till_id, exc)
            return _error(TillError(500, "not_read", "the request could not be read; try again", None))
        if found is None:   # another till's request id answers exactly like an unknown one
            return _error(TillError(404, "not_found", f"this till has no request {request_id}", None))
        report = found.report
        return JSONResponse({"request_id": request_id, "work": str(found.work_id), "state": found.state.value,
                             "report": None if report is None else
                             {"id": report.report_id, "body": report.body, "is_error": report.is_error}})


async def _read_limited(request: Request, limit: int) -> bytes | TillError:
    """The body, or a 413 as soon as it is known to be over `limit` (never read whole into memory)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        return TillError(413, "too_large", f"the body is {int(length)} bytes, at most {limit} are accepted", None)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return TillError(413, "too_large", f"the body is over {limit} bytes, at most {limit} are accepted", None)
        chunks.append(chunk)
    return b"".join(chunks)
