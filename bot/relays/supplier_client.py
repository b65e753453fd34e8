"""The supplier adapter: `POST <url>/orders` with an `Idempotency-Key` header, `GET <url>/orders/<key>` to reconcile.
Outcomes are classified like C7: never sent (retry), refused (failed), may have arrived (unknown)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import httpx

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class ActionOutcomeKind(enum.StrEnum):
    """What one order request did; compared by identity (`is`)."""
    DELIVERED = "delivered"    # the supplier took the order: the receipt is its order id
    NOT_SENT = "not_sent"      # never reached the supplier, or 429: send again later with the same key
    FAILED = "failed"          # the supplier refused the order (4xx)
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

    def __post_init__(self) -> None:   # a kind given as its text becomes the member, so `is` holds; any other fails
        object.__setattr__(self, "kind", ActionOutcomeKind(self.kind))


@dataclass(frozen=True)
class Lookup:
    kind: LookupKind
    receipt: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LookupKind(self.kind))


class SupplierAdapter:
    """HTTP supplier. It can be asked about a key (`can_lookup`), so an unknown order is reconciled, not resent."""
    can_lookup = True
    drops_repeated_keys = False      # not assumed: reconciliation decides

    def __init__(self, base_url: str, token: str = "", *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=5.0))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def place(self, key: str, payload: dict) -> ActionOutcome:
        try:
            response = await self._client.post(f"{self.base_url}/orders", json=payload,
                                               headers={"Idempotency-Key": key})
        except NOT_SENT as exc:
            return ActionOutcome(ActionOutcomeKind.NOT_SENT, reason=f"never reached the supplier: {type(exc).__name__}")
        except httpx.HTTPError as exc:
            return ActionOutcome(ActionOutcomeKind.UNKNOWN,
                                 reason=f"may have reached the supplier: {type(exc).__name__}")
        status = response.status_code
        if status in (200, 201):
            try:
                order_id = str(response.json()["order_id"])
            except (ValueError, KeyError, TypeError):
                return ActionOutcome(ActionOutcomeKind.UNKNOWN, reason=f"{status} without an order id")
            return ActionOutcome(ActionOutcomeKind.DELIVERED, receipt=order_id)
        if status == 429:
            retry = response.headers.get("retry-after", "")
            return ActionOutcome(ActionOutcomeKind.NOT_SENT, reason="429 from the supplier",
                                 retry_after=float(retry) if retry.isdigit() else 30.0)
        if 400 <= status < 500 and status not in (408,):
            return ActionOutcome(ActionOutcomeKind.FAILED,
                                 reason=f"the supplier refused the order ({status}: {_detail(response)})")
        return ActionOutcome(ActionOutcomeKind.UNKNOWN,
                             reason=f"{status} from the supplier: it may have taken the order")

    async def lookup(self, key: str) -> Lookup:
        try:
            response = await self._client.get(f"{self.base_url}/orders/{key}")
        except httpx.HTTPError as exc:
            return Lookup(LookupKind.UNKNOWN, reason=f"could not ask the supplier: {type(exc).__name__}")
        if response.status_code == 200:
            try:
                return Lookup(LookupKind.FOUND, receipt=str(response.json()["order_id"]))
            except (ValueError, KeyError, TypeError):
                return Lookup(LookupKind.UNKNOWN, reason="200 without an order id")
        if response.status_code == 404:
            return Lookup(LookupKind.ABSENT, reason="the supplier has no order with this key")
        return Lookup(LookupKind.UNKNOWN, reason=f"{response.status_code} from the supplier")


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("error") or body.get("detail") or body)[:200]
    except ValueError:
        return response.text[:200]
