"""The supplier adapter: `POST <url>/orders` with an `Idempotency-Key` header, `GET <url>/orders/<key>` to reconcile.
Outcomes are classified like C7: never sent (retry), refused (failed), may have arrived (unknown).

The supplier is an outside server, so nothing it answers may stop the action relay (C21):
- every request runs under one total deadline (connect, send and read together: a body dripped a byte at a time
  trips it, which httpx's per-read timeout never does);
- a body is read through a cap (`BODY_CAP`) and the connection dropped past it (never held in memory whole);
- `Retry-After` is read only as ASCII digits or an HTTP-date (`str.isdigit()` and `float()` accept "²" and "٣") and
  capped before it becomes a duration;
- the supplier's order id must be 1-64 of `A-Za-z0-9._-` before anything stores, logs or shows it.
An answer that breaks these after the supplier may have taken the order is `UNKNOWN` with `held` set: the relay
keeps it for the operator's decision (C11: never resent blindly) instead of asking again and again."""
from __future__ import annotations

import asyncio
import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from store import redaction

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
BODY_CAP = 64 * 1024                   # bytes of a supplier answer read at most
DEADLINE_S = 10.0                      # one request, connect to last byte
RETRY_AFTER_CAP_S = 3600.0             # a longer Retry-After is read as this
RETRY_AFTER_DEFAULT_S = 30.0           # a 429 without Retry-After
ORDER_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_DIGITS = re.compile(r"[0-9]{1,40}")   # ASCII only; the length bound keeps int() cheap before the cap


class ActionOutcomeKind(enum.StrEnum):
    """What one order request did; compared by identity (`is`)."""
    DELIVERED = "delivered"    # the supplier took the order: the receipt is its order id
    NOT_SENT = "not_sent"      # never reached the supplier, or 429: send again later with the same key
    FAILED = "failed"          # the supplier refused the order (4xx), or refused it in a way we cannot read
    UNKNOWN = "unknown"        # it may have taken the order: reconcile by key, never resend blindly


class LookupKind(enum.StrEnum):
    """What asking the supplier about a key told; compared by identity (`is`)."""
    FOUND = "found"            # the supplier has the order (receipt: its order id)
    ABSENT = "absent"          # no order with this key: sending it again cannot order twice
    UNKNOWN = "unknown"        # no answer: ask again later


@dataclass(frozen=True)
class ActionOutcome:
    kind: ActionOutcomeKind
    receipt: str | None = None
    reason: str = ""
    retry_after: float | None = None
    held: bool = False          # UNKNOWN because the answer broke C21: kept for the operator, not asked again

    def __post_init__(self) -> None:   # a kind given as its text becomes the member, so `is` holds; any other fails
        object.__setattr__(self, "kind", ActionOutcomeKind(self.kind))


@dataclass(frozen=True)
class Lookup:
    kind: LookupKind
    receipt: str | None = None
    reason: str = ""
    held: bool = False          # the answer broke C21 (an unreadable order id, an oversized body)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LookupKind(self.kind))


class Oversized(Exception):
    """The supplier's body passed BODY_CAP."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> object:
        import json
        return json.loads(self.body)


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a `Retry-After` header: ASCII digits or an HTTP-date, at most RETRY_AFTER_CAP_S; None when
    absent; raises ValueError when it is neither."""
    if value is None:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return min(float(int(value)), RETRY_AFTER_CAP_S)
    if value.isascii() and len(value) <= 40:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None and when.tzinfo is not None:
            seconds = (when - (now or datetime.now(UTC))).total_seconds()
            return min(max(0.0, seconds), RETRY_AFTER_CAP_S)
    raise ValueError("a Retry-After that is neither ASCII digits nor an HTTP-date")


def order_id(answer: Answer) -> str:
    """The supplier's order id from a JSON body, checked (ValueError when missing or malformed)."""
    try:
        body = answer.json()
    except ValueError:
        raise ValueError("a body that is not JSON") from None
    value = body.get("order_id") if isinstance(body, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not ORDER_ID.fullmatch(value):
        raise ValueError("no order id of 1-64 letters, digits, '.', '_' or '-'")
    return value


class SupplierAdapter:
    """HTTP supplier. It can be asked about a key (`can_lookup`), so an unknown order is reconciled, not resent."""
    can_lookup = True
    drops_repeated_keys = False      # not assumed: reconciliation decides

    def __init__(self, base_url: str, token: str = "", *, deadline: float = DEADLINE_S,
                 body_cap: int = BODY_CAP) -> None:
        self.base_url = base_url.rstrip("/")
        self.deadline = deadline
        self.body_cap = body_cap
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(deadline, connect=min(5.0, deadline)))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, url: str, *, json: object = None, headers: dict[str, str] | None = None
                    ) -> Answer:
        """One request under the total deadline (TimeoutError past it), its body read through the cap."""
        async with asyncio.timeout(self.deadline):
            async with self._client.stream(method, url, json=json, headers=headers) as response:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_raw():
                    size += len(chunk)
                    if size > self.body_cap:
                        raise Oversized(f"an answer over {self.body_cap // 1024} KiB")
                    chunks.append(chunk)
                return Answer(response.status_code, response.headers, b"".join(chunks))

    async def place(self, key: str, payload: dict[str, object]) -> ActionOutcome:
        try:
            answer = await self._call("POST", f"{self.base_url}/orders", json=payload,
                                      headers={"Idempotency-Key": key})
        except NOT_SENT as exc:
            return ActionOutcome(ActionOutcomeKind.NOT_SENT, reason=f"never reached the supplier: {type(exc).__name__}")
        except TimeoutError:
            return ActionOutcome(ActionOutcomeKind.UNKNOWN, reason=f"the supplier did not answer within "
                                 f"{self.deadline:g} s: it may have taken the order")
        except Oversized as exc:
            return ActionOutcome(ActionOutcomeKind.UNKNOWN, held=True,
                                 reason=f"the supplier sent {exc}: it may have taken the order")
        except httpx.HTTPError as exc:
            return ActionOutcome(ActionOutcomeKind.UNKNOWN,
                                 reason=f"may have reached the supplier: {type(exc).__name__}")
        status = answer.status
        if status in (200, 201):
            try:
                return ActionOutcome(ActionOutcomeKind.DELIVERED, receipt=order_id(answer))
            except ValueError as exc:
                return ActionOutcome(ActionOutcomeKind.UNKNOWN, held=True,
                                     reason=f"the supplier answered {status} with {exc}: it may have taken the order")
        if status == 429:
            try:
                delay = retry_after(answer.headers.get("retry-after"))
            except ValueError as exc:
                return ActionOutcome(ActionOutcomeKind.FAILED, reason=f"the supplier answered 429 with {exc}")
            return ActionOutcome(ActionOutcomeKind.NOT_SENT, reason="429 from the supplier",
                                 retry_after=RETRY_AFTER_DEFAULT_S if delay is None else delay)
        if 400 <= status < 500 and status not in (408,):
            return ActionOutcome(ActionOutcomeKind.FAILED,
                                 reason=f"the supplier refused the order ({status}: {_detail(answer)})")
        return ActionOutcome(ActionOutcomeKind.UNKNOWN,
                             reason=f"{status} from the supplier: it may have taken the order")

    async def lookup(self, key: str) -> Lookup:
        try:
            answer = await self._call("GET", f"{self.base_url}/orders/{key}")
        except TimeoutError:
            return Lookup(LookupKind.UNKNOWN, reason=f"the supplier did not answer within {self.deadline:g} s")
        except Oversized as exc:
            return Lookup(LookupKind.UNKNOWN, held=True, reason=f"the supplier sent {exc}")
        except httpx.HTTPError as exc:
            return Lookup(LookupKind.UNKNOWN, reason=f"could not ask the supplier: {type(exc).__name__}")
        if answer.status == 200:
            try:
                return Lookup(LookupKind.FOUND, receipt=order_id(answer))
            except ValueError as exc:
                return Lookup(LookupKind.UNKNOWN, held=True, reason=f"the supplier answered 200 with {exc}")
        if answer.status == 404:
            return Lookup(LookupKind.ABSENT, reason="the supplier has no order with this key")
        return Lookup(LookupKind.UNKNOWN, reason=f"{answer.status} from the supplier")


def _detail(answer: Answer) -> str:
    """A short piece of the supplier's own words (outside text: cut here, stripped and redacted downstream)."""
    try:
        body = answer.json()
        text = str(body.get("error") or body.get("detail") or body) if isinstance(body, dict) else str(body)
    except ValueError:
        text = answer.body[:400].decode("utf-8", "replace")
    return redaction.outside(text, 200)
