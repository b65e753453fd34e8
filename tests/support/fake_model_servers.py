"""A loopback fake HTTP server for the model adapters, on stdlib asyncio (no extra dependency).

It speaks just enough HTTP/1.1 for the SDKs (one request per connection, `Connection: close`), answers
`POST /v1/chat/completions` and `POST /v1/messages` from a script of responses, and records every request
it got. When the script runs out it answers 599 and counts the request, so an unexpected call shows up in
`requests` (the tests assert how many requests were made: no SDK retry).

    async with FakeModelServer([openai_text("hi")]) as server:
        model = OpenAIChatModel("m", base_url=server.openai_base_url, api_key="k")

It also holds the other test doubles shared by the agent-loop, offline-model and adapter tests: `FakeShop`
(in-memory fakes of the shop's tool functions) and `RecordingJournal`.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from worker.tools.registry import Tool, ToolError, ToolRegistry

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable", 529: "Overloaded", 599: "Unscripted"}


@dataclass(frozen=True)
class FakeResponse:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer (the client's timeout must fire)
    raw: bytes | None = None  # a body sent as is (e.g. not JSON)
    delay_s: float = 0.0      # answer after this long (a slow model)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


# --- OpenAI chat-completions responses -------------------------------------------------------------------

def openai_completion(message: dict, *, finish_reason: str = "stop", usage: dict | None = None) -> FakeResponse:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return FakeResponse(200, body)


def openai_text(text: str, *, finish_reason: str = "stop", usage: dict | None = None) -> FakeResponse:
    return openai_completion({"content": text}, finish_reason=finish_reason, usage=usage)


def openai_tool_calls(*calls: tuple[str | None, str, str], text: str | None = None,
                      usage: dict | None = None) -> FakeResponse:
    """calls: (id or None, name, arguments JSON text)."""
    wire = []
    for call_id, name, arguments in calls:
        entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
        if call_id is not None:
            entry["id"] = call_id
        wire.append(entry)
    return openai_completion({"content": text, "tool_calls": wire}, finish_reason="tool_calls", usage=usage)


def openai_error(status: int, message: str, *, headers: dict[str, str] | None = None) -> FakeResponse:
    return FakeResponse(status, {"error": {"message": message, "type": "fake_error", "code": None}}, headers or {})


# --- Anthropic messages responses ---------------------------------------------------------------------------

def anthropic_message(content: list[dict], *, stop_reason: str = "end_turn",
                      usage: dict | None = None) -> FakeResponse:
    return FakeResponse(200, {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": content,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": usage or {"input_tokens": 0, "output_tokens": 0},
    })


def anthropic_text(text: str, *, stop_reason: str = "end_turn", usage: dict | None = None) -> FakeResponse:
    return anthropic_message([{"type": "text", "text": text}], stop_reason=stop_reason, usage=usage)


def anthropic_tool_use(*calls: tuple[str, str, dict], text: str | None = None,
                       usage: dict | None = None) -> FakeResponse:
    """calls: (id, name, input dict)."""
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in calls]
    return anthropic_message(content, stop_reason="tool_use", usage=usage)


def anthropic_error(status: int, message: str, *, headers: dict[str, str] | None = None) -> FakeResponse:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return FakeResponse(status, {"type": "error", "error": {"type": kind, "message": message}}, headers or {})


# --- the server -------------------------------------------------------------------------------------------

class FakeModelServer:
    """`respond(body)`, when given, answers a request first (e.g. the producers' turns of a whole app); when it
    returns None the script's next response answers."""

    def __init__(self, script: Sequence[FakeResponse] = (), *,
                 respond: Callable[[Any], FakeResponse | None] | None = None) -> None:
        self.script = list(script)
        self.respond = respond
        self._scripted = 0
        self.requests: list[RecordedRequest] = []
        self._server: asyncio.base_events.Server | None = None
        self._hanging: set[asyncio.Task] = set()
        self._changed = asyncio.Condition()
        self.port = 0

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    async def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.requests) >= count), timeout)

    async def __aenter__(self) -> FakeModelServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._hanging):
            task.cancel()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    key, value = line.split(":", 1)
                    headers[key.strip().lower()] = value.strip()
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            self.requests.append(RecordedRequest(method, path.split("?", 1)[0], headers, body))
            async with self._changed:
                self._changed.notify_all()
            if path.split("?", 1)[0] not in (OPENAI_PATH, ANTHROPIC_PATH) or method != "POST":
                response = FakeResponse(404, {"error": {"message": f"no route {method} {path}"}})
            elif self.respond is not None and (answer := self.respond(body)) is not None:
                response = answer
            elif self._scripted < len(self.script):
                response = self.script[self._scripted]
                self._scripted += 1
            else:
                response = FakeResponse(599, {"error": {"message": "unscripted request"}})
            if response.hang:
                self._hanging.add(asyncio.current_task())  # type: ignore[arg-type]
                await asyncio.Event().wait()
            if response.delay_s:
                await asyncio.sleep(response.delay_s)
            payload = response.raw if response.raw is not None else json.dumps(response.body).encode()
            out_headers = {"content-type": "application/json", "content-length": str(len(payload)),
                           "connection": "close", **response.headers}
            status_line = f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Status')}\r\n"
            writer.write(status_line.encode() + "".join(f"{k}: {v}\r\n" for k, v in out_headers.items()).encode()
                         + b"\r\n" + payload)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


# --- a fake shop: in-memory fakes of the lead's shop tools (the tool layer, not a database) -------------------
# Shapes as in the brief: list_stock, get_item, reorder_need, draft_order, propose_order.


class NoArgs(pydantic.BaseModel):
    pass


class ItemArgs(pydantic.BaseModel):
    item: str


class NeedArgs(pydantic.BaseModel):  # the lead's shape: no item means every item below its reorder point
    item: str | None = None


class OrderArgs(pydantic.BaseModel):
    item: str
    quantity: int = pydantic.Field(gt=0, le=1000)


def stock_item(on_hand: int, reorder_point: int, target: int, unit_cost_cents: int, unit: str = "tubs",
               open_proposal: str | None = None) -> dict:
    return {"on_hand": on_hand, "reorder_point": reorder_point, "target": target,
            "unit_cost_cents": unit_cost_cents, "unit": unit, "open_proposal": open_proposal}


def lucy_stock() -> dict[str, dict]:
    return {
        "vanilla": stock_item(2, 8, 8, 300),
        "chocolate": stock_item(12, 6, 12, 250),
        "strawberry": stock_item(1, 5, 5, 200),
    }


class FakeShop:
    """Tool fns over a dict; `events` records every run (shared with RecordingJournal for ordering)."""

    def __init__(self, stock: dict[str, dict] | None = None, events: list | None = None, *,
                 need_for_all: bool = True) -> None:
        self.stock = lucy_stock() if stock is None else stock
        self.need_for_all = need_for_all  # False: reorder_need requires an item (the brief's first shape)
        self.events: list[tuple] = [] if events is None else events
        self.proposals: list[dict] = []
        self._drafts = 0

    def _item(self, name: str) -> dict:
        if name not in self.stock:
            raise ToolError(f"unknown item {name!r}")
        return {"item": name, **self.stock[name]}

    async def list_stock(self, args: NoArgs, context) -> dict:
        self.events.append(("run", "list_stock", {}))
        return {"items": [self._item(n) for n in self.stock], "currency": "USD"}

    async def get_item(self, args: ItemArgs, context) -> dict:
        self.events.append(("run", "get_item", args.model_dump()))
        return self._item(args.item)

    async def reorder_need(self, args: NeedArgs | ItemArgs, context) -> dict:
        self.events.append(("run", "reorder_need", args.model_dump()))
        if args.item is None:
            needs = [self._need(self._item(n)) for n, i in self.stock.items() if i["on_hand"] < i["reorder_point"]]
            return {"items": needs, "total_cents": sum(n["cost_cents"] for n in needs), "currency": "USD"}
        return self._need(self._item(args.item))

    @staticmethod
    def _need(i: dict) -> dict:
        quantity = max(0, i["target"] - i["on_hand"])
        return {"item": i["item"], "on_hand": i["on_hand"], "reorder_point": i["reorder_point"], "target": i["target"],
                "quantity": quantity,
                "unit_cost_cents": i["unit_cost_cents"], "cost_cents": quantity * i["unit_cost_cents"],
                "below_reorder_point": i["on_hand"] < i["reorder_point"], "unit": i["unit"]}

    async def draft_order(self, args: OrderArgs, context) -> dict:
        self.events.append(("run", "draft_order", args.model_dump()))
        i = self._item(args.item)
        self._drafts += 1
        return {"draft_id": f"d{self._drafts}", "item": i["item"], "quantity": args.quantity,
                "cost_cents": args.quantity * i["unit_cost_cents"], "unit": i["unit"]}

    async def propose_order(self, args: OrderArgs, context) -> dict:
        self.events.append(("run", "propose_order", args.model_dump()))
        i = self._item(args.item)
        if i["open_proposal"]:
            raise ToolError(f"{args.item} already has an open proposal")
        proposal_id = f"p{len(self.proposals) + 1}"
        self.stock[args.item]["open_proposal"] = proposal_id
        proposal = {"proposal_id": proposal_id, "item": i["item"], "quantity": args.quantity,
                    "total_cents": args.quantity * i["unit_cost_cents"], "state": "awaiting_approval",
                    "reason": None}
        self.proposals.append(proposal)
        return proposal

    def registry(self) -> ToolRegistry:
        """The tools; their figures are collected by the registry from the results (C13), none chosen here."""
        return ToolRegistry([
            Tool("list_stock", "All items with stock levels.", NoArgs, self.list_stock, "read"),
            Tool("get_item", "One item's stock level.", ItemArgs, self.get_item, "read"),
            Tool("reorder_need", "How much of an item to reorder; without an item, every low item and the total.",
                 NeedArgs if self.need_for_all else ItemArgs, self.reorder_need, "read"),
            Tool("draft_order", "Draft an order (no effect).", OrderArgs, self.draft_order, "internal"),
            Tool("propose_order", "Propose an order for the owner's approval.", OrderArgs, self.propose_order,
                 "external"),
        ])


class RecordingJournal:
    def __init__(self, events: list) -> None:
        self.events = events

    async def started(self, call_id: str, tool: str, arguments: dict, effect: str) -> None:
        self.events.append(("started", call_id, tool, arguments, effect))

    async def finished(self, call_id: str, status: str, result: dict) -> None:
        self.events.append(("finished", call_id, status, result))
