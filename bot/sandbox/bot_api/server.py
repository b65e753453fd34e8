"""`LocalBotApi`, the fake Bot API server itself: the listener and its connections, the dispatch of `/bot<token>/...`
requests through the fault plan to the handlers in `methods`, the user side (`post_message`, ...), the control
endpoints under `/_control/`, and process mode (`serve`, `main`).

The records and the update queue it serves come from its base class `ApiState` (in `state`).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from bot.sandbox.bot_api.faults import FaultPlan, FloodLimit, _Drop, _Fault, flood_refusal
from bot.sandbox.bot_api.methods import HANDLERS, _err, _json_response, _parse_params, _utf16_len
from bot.sandbox.bot_api.state import CALLER, ApiState, Caller, Poll, _NoStore
from bot.sandbox.mini_http import BadHttp as _BadHttp
from bot.sandbox.mini_http import Response as _Response
from bot.sandbox.mini_http import read_request as _read_request
from bot.sandbox.mini_http import write_response as _write_response

_log = logging.getLogger("bot.sandbox.bot_api")  # the package's name, as before the split into modules


class LocalBotApi(ApiState):
    """A fake Telegram Bot API server. Use `async with LocalBotApi(token) as api:`; `api.base_url` is the root."""

    def __init__(
        self,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        state_path: Path | None = None,
        bot_user_id: int = 999,
        flood_per_s: float | None = None,
        flood_burst: float | None = None,
    ) -> None:
        if not token:
            raise ValueError("LocalBotApi needs a token")
        self._token = token
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._fault_plan = FaultPlan()
        self.flood = FloodLimit(flood_per_s, flood_burst) if flood_per_s else None   # 429 above a rate, if set
        super().__init__(state_path=state_path, bot_user_id=bot_user_id)

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """The root URL; the bot calls f"{base_url}/bot{token}/{method}"."""
        if not self.port:
            raise RuntimeError("LocalBotApi is not started (no port yet)")
        return f"http://{self.host}:{self.port}"

    def url_for(self, client: str) -> str:
        """A root URL that tags every call made through it with `client` (in `polls`, `SentMessage.client`,
        `by_caller`):
        several processes behind one server, each told apart. Telegram has one URL; the tag is the test's."""
        if not client or "/" in client:
            raise ValueError("a client label is a non-empty name without slashes")
        return f"{self.base_url}/{client}"

    def polls_by(self, client: str) -> list[Poll]:
        return [p for p in self.polls if p.client == client]

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self._close_listener()
        await self._close_connections()
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(BaseException):
                await task
        self._notify()
        self._store.close()
        self._store = _NoStore()

    async def __aenter__(self) -> LocalBotApi:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def revoke_token(self, new_token: str) -> None:
        """BotFather's /revoke: from now on the old token is refused (401 Unauthorized) and only `new_token` works."""
        if not new_token:
            raise ValueError("LocalBotApi needs a token")
        self._token = new_token

    async def refuse(self) -> None:
        """Close the listening socket and every open connection: connecting gives "connection refused"."""
        await self._close_listener()
        await self._close_connections()
        self._notify()

    async def accept(self) -> None:
        """Listen again on the same port."""
        if self._server is None:
            self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self._notify()

    async def _refuse_for(self, seconds: float) -> None:
        await self.refuse()
        await asyncio.sleep(seconds)
        await self.accept()

    async def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _close_connections(self) -> None:
        me = asyncio.current_task()
        victims = [(t, w) for t, w in self._conns.items() if t is not me]
        for task, writer in victims:
            writer.close()
            task.cancel()
        for task, writer in victims:
            with contextlib.suppress(BaseException):
                await task
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def state(self) -> dict[str, Any]:
        """What `/_control/state` answers, with the sendMessage calls the flood limit refused."""
        return {**super().state(), "flood_refused": self.flood.refused if self.flood else 0}

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until `predicate()` is true; woken on every request (and re-checked every 50 ms).

        Raises TimeoutError naming the condition and summarising what the server saw.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if predicate():
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"LocalBotApi.wait_for: condition {_describe(predicate)} still false after {timeout}s; "
                    f"{self.summary()}"
                )
            tick = self._tick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tick.wait(), min(remaining, 0.05))

    def summary(self) -> str:
        texts = [f"{m.chat_id}:{m.text[:40]!r}" for m in self.sent[-5:]]
        return (
            f"calls={self.calls}, sent({len(self.sent)}) last={texts}, "
            f"pending_update_ids={[u['update_id'] for u in self._pending]}, "
            f"offsets_requested(last 5)={self.offsets_requested[-5:]}, "
            f"callback_answers={len(self.callback_answers)}, chat_actions={len(self.chat_actions)}, "
            f"webhook={self.webhook.get('url')!r}, listening={self._server is not None}"
        )

    # ------------------------------------------------------------------ the user side

    def post_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        is_bot: bool = False,
        first_name: str = "Lucy",
    ) -> dict[str, Any]:
        """A user writes `text` in `chat_id`. Returns the stored update (with its update_id and message_id)."""
        if chat_type == "private":
            chat = {"id": chat_id, "type": "private", "first_name": first_name}
        else:
            chat = {"id": chat_id, "type": chat_type, "title": f"{chat_type.title()} chat"}
        self._chats[json.dumps(chat_id)] = chat
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "from": {"id": user_id, "is_bot": is_bot, "first_name": first_name, "language_code": "en"},
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if text.startswith("/"):
            command = text.split()[0]
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": _utf16_len(command)}]
        return self._store_update({"message": message})

    def post_callback(self, chat_id: int, user_id: int, data: str, message_id: int) -> dict[str, Any]:
        """A user presses an inline button with `data` under the bot's message `message_id`."""
        key = json.dumps(chat_id)
        known = self._messages.get((key, message_id))
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": self._chat_obj(chat_id),
            "date": known["date"] if known else int(time.time()),
        }
        if known and known.get("text") is not None:
            message["text"] = known["text"]
        if known and known.get("markup"):
            message["reply_markup"] = known["markup"]
        callback_id = str(secrets.randbits(62))
        update = {
            "callback_query": {
                "id": callback_id,
                "from": {"id": user_id, "is_bot": False, "first_name": "Lucy", "language_code": "en"},
                "message": message,
                "chat_instance": str(int.from_bytes(hashlib.sha256(key.encode()).digest()[:7], "big")),
                "data": data,
            }
        }
        self._callbacks[callback_id] = False
        return self._store_update(update)

    def post_edit(self, chat_id: int, user_id: int, message_id: int, text: str) -> dict[str, Any]:
        """A user edits their message `message_id`; `edit_date` strictly increases per message."""
        key = json.dumps(chat_id)
        known = self._messages.get((key, message_id))
        edit_date = max(int(time.time()), self._edit_dates.get((key, message_id), 0) + 1)
        self._edit_dates[(key, message_id)] = edit_date
        first_name = self._chats.get(key, {}).get("first_name", "Lucy")
        message = {
            "message_id": message_id,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"},
            "chat": self._chat_obj(chat_id),
            "date": known["date"] if known else edit_date,
            "edit_date": edit_date,
            "text": text,
        }
        return self._store_update({"edited_message": message})

    def post_raw_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue any JSON object as an update (malformed on purpose is fine); an update_id is assigned if missing."""
        if not isinstance(update, dict):
            raise TypeError("an update is a JSON object")
        return self._store_update(dict(update))

    def redeliver(self, update_id: int) -> None:
        """Deliver an already posted (typically already confirmed) update again: a duplicate delivery.

        The copy has the same content under a fresh update_id (Telegram's update_id is not a durable identity, and
        a copy under the old id would sit below the client's offset and be dropped unseen).
        """
        if update_id not in self._all_updates:
            raise KeyError(f"no update {update_id} was ever posted")
        original = self._all_updates[update_id]
        self._store_update({k: v for k, v in original.items() if k != "update_id"})

    # ------------------------------------------------------------------ faults

    def inject(
        self,
        method: str,
        fault: str,
        *,
        count: int = 1,
        retry_after: int = 1,
        delay: float = 0.0,
        description: str | None = None,
    ) -> None:
        """Apply `fault` to the next `count` calls of `method` (case-insensitive; "*" for any Bot API method)."""
        self._fault_plan.inject(
            method, fault, count=count, retry_after=retry_after, delay=delay, description=description
        )

    @property
    def _faults(self) -> list[_Fault]:
        """The queued faults (the drills read and clear this list)."""
        return self._fault_plan.faults

    # ------------------------------------------------------------------ HTTP

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        self.connections_opened += 1
        connection = self.connections_opened
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, target, headers, body, keep_alive = request
                # no client pipelines, so while a request is handled the reader only ever sees the client go away
                CALLER.set(Caller("", connection, lambda: reader.at_eof() or reader.exception() is not None))
                try:
                    response = await self._handle(method, target, headers, body)
                except _Drop:
                    return
                except Exception:  # a bug in the fake must not look like a transport fault
                    _log.exception("local_api: internal error")
                    response = _err(500, "Internal Server Error: local_api bug")
                await _write_response(writer, response, keep_alive)
                if response.after is not None:
                    response.after()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, _BadHttp):
            return
        except asyncio.CancelledError:
            # stop()/refuse() cancel connection tasks; ending quietly avoids Python 3.11's StreamReaderProtocol
            # callback reporting the cancellation as an error.
            return
        finally:
            self._conns.pop(task, None)
            writer.close()

    async def _handle(self, http_method: str, target: str, headers: dict[str, str], body: bytes) -> _Response:
        split = urlsplit(target)
        path = unquote(split.path)
        try:
            params = _parse_params(split.query, headers.get("content-type", ""), body)
        except ValueError as exc:
            return _err(400, f"Bad Request: {exc}")
        if path.startswith("/_control/"):
            try:
                return await self._control(http_method, path[len("/_control/") :], params)
            finally:
                self._notify()
        caller = None
        if path.count("/") == 3 and not path.startswith("/bot"):
            # `<base_url>/<caller>` as the client's base URL (url_for): the same API, each call recorded with who
            # made it (several bot processes on one fake, told apart from outside)
            caller, _, path = path[1:].partition("/")
            path = "/" + path
            CALLER.set(Caller(caller, CALLER.get().connection, CALLER.get().gone))
        if not path.startswith("/bot") or path.count("/") != 2:
            return _err(404, "Not Found")
        token, _, api_method = path[len("/bot") :].partition("/")
        if not secrets.compare_digest(token.encode(), self._token.encode()):
            return _err(401, "Unauthorized")
        self.calls[api_method] = self.calls.get(api_method, 0) + 1
        self.timeline.append(("call", api_method))
        self.by_caller.append((caller, api_method, dict(params), asyncio.get_running_loop().time()))
        try:
            response = await self._call_api(api_method.lower(), params)
            self.timeline.append(("answer", api_method))
            return response
        finally:
            self._notify()

    async def _call_api(self, method: str, params: dict[str, Any]) -> _Response:
        handler = HANDLERS.get(method)

        async def process() -> _Response:
            if method == "sendmessage" and self.flood is not None and not self.flood.admit():
                return flood_refusal()
            return _err(404, "Not Found") if handler is None else await handler(self, params)

        return await self._fault_plan.run(method, process, self._notify)

    # ------------------------------------------------------------------ control (process mode)

    async def _control(self, http_method: str, name: str, params: dict[str, Any]) -> _Response:
        try:
            if http_method == "GET" and name == "sent":
                return _json_response(200, [asdict(m) for m in self.sent])
            if http_method == "GET" and name == "state":
                return _json_response(200, self.state())
            if http_method != "POST":
                return _json_response(405, {"error": f"{http_method} /_control/{name} is not supported"})
            if name == "message":
                return _json_response(
                    200,
                    self.post_message(
                        int(params["chat_id"]),
                        int(params["user_id"]),
                        str(params["text"]),
                        chat_type=str(params.get("chat_type", "private")),
                        is_bot=bool(params.get("is_bot", False)),
                        first_name=str(params.get("first_name", "Lucy")),
                    ),
                )
            if name == "callback":
                return _json_response(
                    200,
                    self.post_callback(
                        int(params["chat_id"]), int(params["user_id"]), str(params["data"]), int(params["message_id"])
                    ),
                )
            if name == "edit":
                return _json_response(
                    200,
                    self.post_edit(
                        int(params["chat_id"]), int(params["user_id"]), int(params["message_id"]), str(params["text"])
                    ),
                )
            if name == "raw_update":
                update = params["update"] if set(params) == {"update"} else params
                return _json_response(200, self.post_raw_update(update))
            if name == "redeliver":
                self.redeliver(int(params["update_id"]))
                return _json_response(200, {"ok": True})
            if name == "inject":
                self.inject(
                    str(params["method"]),
                    str(params["fault"]),
                    count=int(params.get("count", 1)),
                    retry_after=int(params.get("retry_after", 1)),
                    delay=float(params.get("delay", 0.0)),
                    description=params.get("description"),
                )
                return _json_response(200, {"ok": True})
            if name == "refuse_for":
                seconds = float(params["seconds"])

                def later() -> None:
                    task = asyncio.get_running_loop().create_task(self._refuse_for(seconds))
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)

                response = _json_response(200, {"ok": True, "refusing_for": seconds})
                response.after = later
                return response
            return _json_response(404, {"error": f"unknown control endpoint /_control/{name}"})
        except (KeyError, TypeError, ValueError) as exc:
            return _json_response(400, {"error": f"{type(exc).__name__}: {exc}"})


def _describe(predicate: Callable[[], bool]) -> str:
    try:
        source = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        source = ""
    name = getattr(predicate, "__qualname__", repr(predicate))
    return f"{name} [{source[:200]}]" if source else name


# ---------------------------------------------------------------------- process mode


async def serve(token: str, host: str, port: int, state_path: Path | None, flood_per_s: float | None = None,
                flood_burst: float | None = None) -> None:
    """Run a LocalBotApi until cancelled. Prints one line `local_api listening on http://HOST:PORT` (no token)."""
    api = LocalBotApi(token, host=host, port=port, state_path=state_path, flood_per_s=flood_per_s,
                      flood_burst=flood_burst)
    await api.start()
    try:
        print(f"local_api listening on {api.base_url}", flush=True)
        await asyncio.Event().wait()
    finally:
        await api.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.sandbox.bot_api", description="A local fake Telegram Bot API server (never logs the token)."
    )
    parser.add_argument("--token", help="the bot token it accepts (default: $SHOPBOT_LOCAL_API_TOKEN)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", type=Path, default=None, help="SQLite file that keeps the server's state")
    parser.add_argument("--flood-per-s", type=float, default=None,
                        help="answer sendMessage 429 above this rate over all chats; default off")
    parser.add_argument("--flood-burst", type=float, default=None,
                        help="sendMessage calls the flood limit takes at once (default: the rate's one second)")
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("SHOPBOT_LOCAL_API_TOKEN")
    if not token:
        parser.error("a token is required (--token or $SHOPBOT_LOCAL_API_TOKEN)")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(token, args.host, args.port, args.state, args.flood_per_s, args.flood_burst))
    return 0
