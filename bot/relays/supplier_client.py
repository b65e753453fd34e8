"""The supplier adapter: `POST <url>/orders` with an `Idempotency-Key` header, `GET <url>/orders/<key>` to reconcile.
Outcomes are classified like C7: never sent (retry), refused (failed), may have arrived (unknown)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


@dataclass(frozen=True)
class ActionOutcome:
    kind: Literal["delivered", "not_sent", "failed", "unknown"]
    receipt: str | None = None
    reason: str = ""
    retry_after: float | None = None


@dataclass(frozen=True)
class Lookup:
    kind: Literal["found", "absent", "unknown"]
    receipt: str | None = None
    reason: str = ""


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
            return ActionOutcome("not_sent", reason=f"never reached the supplier: {type(exc).__name__}")
        except httpx.HTTPError as exc:
            return ActionOutcome("unknown", reason=f"may have reached the supplier: {type(exc).__name__}")
        status = response.status_code
        if status in (200, 201):
            try:
                order_id = str(response.json()["order_id"])
            except (ValueError, KeyError, TypeError):
                return ActionOutcome("unknown", reason=f"{status} without an order id")
            return ActionOutcome("delivered", receipt=order_id)
        if status == 429:
            retry = response.headers.get("retry-after", "")
            return ActionOutcome("not_sent", reason="429 from the supplier",
                                 retry_after=float(retry) if retry.isdigit() else 30.0)
        if 400 <= status < 500 and status not in (408,):
            return ActionOutcome("failed", reason=f"the supplier refused the order ({status}: {_detail(response)})")
        return ActionOutcome("unknown", reason=f"{status} from the supplier: it may have taken the order")

    async def lookup(self, key: str) -> Lookup:
        try:
            response = await self._client.get(f"{self.base_url}/orders/{key}")
        except httpx.HTTPError as exc:
            return Lookup("unknown", reason=f"could not ask the supplier: {type(exc).__name__}")
        if response.status_code == 200:
            try:
                return Lookup("found", receipt=str(response.json()["order_id"]))
            except (ValueError, KeyError, TypeError):
                return Lookup("unknown", reason="200 without an order id")
        if response.status_code == 404:
            return Lookup("absent", reason="the supplier has no order with this key")
        return Lookup("unknown", reason=f"{response.status_code} from the supplier")


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("error") or body.get("detail") or body)[:200]
    except ValueError:
        return response.text[:200]
