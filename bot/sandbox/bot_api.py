"""A local fake of the Telegram Bot API on 127.0.0.1, for tests and `shopbot demo`.

The real client (python-telegram-bot over httpx) talks to it over real HTTP/1.1 with keep-alive, so PTB's own
error mapping is exercised end to end. The server is written on `asyncio.start_server` with a minimal HTTP/1.1
parser, which makes transport faults easy to produce: closing a connection after the request was accepted,
refusing the port, answering slowly, answering with HTML.

Bot API (at `/bot<token>/<method>`, method names case-insensitive; any other token gets 401 Unauthorized):
`getMe`, `getUpdates` (real offset semantics, long poll, `limit`, sticky `allowed_updates`, 409 while a webhook is
set, and a long poll is terminated with 409 by a newer `getUpdates` as Telegram does), `sendMessage`,
`sendChatAction`, `answerCallbackQuery`, `setMyCommands`, `getMyCommands`, `editMessageReplyMarkup`, `setWebhook`,
`deleteWebhook`, `getWebhookInfo`. Parameters are read from form-encoded bodies with JSON-encoded values (what PTB
sends), from JSON bodies and from the query string.

The user side (`post_message`, `post_callback`, `post_edit`, `post_raw_update`, `redeliver`), the records of what
the bot did (`sent`, `chat_actions`, ...) and fault injection (`inject`, `refuse`, `accept`) are Python methods; in
process mode (`serve`, `python -m bot.sandbox.bot_api`) the same operations are offered over HTTP under `/_control/`.

Fault semantics (each `inject` applies to the next `count` calls of one method, or of any method with "*"):

| fault              | effect on the call                                   | recorded (e.g. in `sent`)? |
|--------------------|------------------------------------------------------|----------------------------|
| drop_after_accept  | processed, then the connection closes, no reply      | yes                        |
| drop_before_accept | the connection closes, no reply                      | no                         |
| slow               | processed, the reply waits `delay` seconds           | yes (before the wait)      |
| non_json_200       | processed, answered 200 with an HTML body            | yes                        |
| 429                | 429 with `parameters.retry_after`                    | no                         |
| 400 / 403          | "Bad Request: chat not found" / "Forbidden: bot was blocked by the user" | no     |
| 500 / 502_html     | 500 JSON error / 502 with an nginx HTML page         | no                         |
| 409                | "Conflict: terminated by other getUpdates request"  | no                         |

Persistence: with `state_path` (a SQLite file owned by the server) every update (pending and confirmed), the
confirmed offset, sent messages, message-id counters, callback queries, webhook, commands and the logs survive a
kill -9 of the server; each change commits before the HTTP reply that reveals it is written.

The server never logs requests and never prints the token.
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
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from bot.sandbox.mini_http import BadHttp as _BadHttp
from bot.sandbox.mini_http import Response as _Response
from bot.sandbox.mini_http import read_request as _read_request
from bot.sandbox.mini_http import write_response as _write_response

__all__ = ["FAULTS", "LocalBotApi", "SentMessage", "main", "serve"]

_log = logging.getLogger(__name__)

FAULTS = frozenset(
    {
        "drop_after_accept",
        "drop_before_accept",
        "429",
        "400",
        "403",
        "500",
        "502_html",
        "non_json_200",
        "slow",
        "409",
    }
)

FIRST_UPDATE_ID = 10001  # distinct from message ids, so code that mixes the two up fails visibly

# Every kind of update Telegram has; those delivered when `allowed_updates` is empty or never given exclude the
# three Telegram leaves out by default.
_UPDATE_KINDS = (
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_connection",
    "business_message",
    "edited_business_message",
    "deleted_business_messages",
    "message_reaction",
    "message_reaction_count",
    "inline_query",
    "chosen_inline_result",
    "callback_query",
    "shipping_query",
    "pre_checkout_query",
    "purchased_paid_media",
    "poll",
    "poll_answer",
    "my_chat_member",
    "chat_member",
    "chat_join_request",
    "chat_boost",
    "removed_chat_boost",
)
_NOT_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

# Form values that PTB sends as raw strings (not JSON-encoded); "42" as a text must stay a string.
_RAW_STRING_PARAMS = frozenset(
    {
        "text",
        "callback_query_id",
        "url",
        "secret_token",
        "parse_mode",
        "action",
        "inline_message_id",
        "language_code",
        "business_connection_id",
        "message_effect_id",
        "ip_address",
        "caption",
        "emoji",
    }
)

_CONFLICT_WEBHOOK = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
_CONFLICT_POLL = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
_HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>"
    b"\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n"
)
_HTML_200 = b"<html><body>Service temporarily unavailable (this is not JSON)</body></html>"


@dataclass(frozen=True)
class SentMessage:
    chat_id: int | str
    text: str
    reply_markup: dict | None
    message_id: int
    date: int


@dataclass
class _Fault:
    method: str  # lower-case method name or "*"
    kind: str
    count: int
    retry_after: int
    delay: float
    description: str | None


class _Drop(Exception):
    """Close the connection without a reply."""


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _json_response(status: int, obj: Any) -> _Response:
    return _Response(status, json.dumps(obj).encode())   # ASCII JSON: a lone surrogate stays a valid \\u escape


def _ok(result: Any) -> _Response:
    return _json_response(200, {"ok": True, "result": result})


def _err(code: int, description: str, parameters: dict | None = None) -> _Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return _json_response(code, body)


def _update_kind(update: dict) -> str | None:
    for key in update:
        if key in _UPDATE_KINDS:
            return key
    return None


def _as_int(value: Any) -> Any:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)
    return value


class _Store:
    """The server's own SQLite file. Every write commits at once (before the reply that reveals it)."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS updates(update_id INTEGER PRIMARY KEY, body TEXT NOT NULL,
                                               confirmed INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS sent(seq INTEGER PRIMARY KEY AUTOINCREMENT, chat_id TEXT NOT NULL,
                                            message_id INTEGER NOT NULL, text TEXT NOT NULL,
                                            reply_markup TEXT, date INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS log(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
                                           body TEXT NOT NULL);
            """
        )

    def close(self) -> None:
        self._db.close()

    def add_update(self, update: dict) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO updates(update_id, body, confirmed) VALUES (?, ?, 0)",
            (update["update_id"], json.dumps(update)),
        )

    def confirm_ids(self, ids: list[int]) -> None:
        self._db.executemany("UPDATE updates SET confirmed = 1 WHERE update_id = ?", [(i,) for i in ids])

    def add_sent(self, m: SentMessage) -> None:
        self._db.execute(
            "INSERT INTO sent(chat_id, message_id, text, reply_markup, date) VALUES (?, ?, ?, ?, ?)",
            (json.dumps(m.chat_id), m.message_id, m.text, json.dumps(m.reply_markup), m.date),
        )

    def set(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def log(self, kind: str, body: Any) -> None:
        self._db.execute("INSERT INTO log(kind, body) VALUES (?, ?)", (kind, json.dumps(body)))

    def load(self) -> dict[str, Any]:
        db = self._db
        return {
            "updates": [
                (json.loads(b), bool(c))
                for b, c in db.execute("SELECT body, confirmed FROM updates ORDER BY update_id")
            ],
            "sent": [
                SentMessage(json.loads(c), t, json.loads(r) if r is not None else None, m, d)
                for c, m, t, r, d in db.execute(
                    "SELECT chat_id, message_id, text, reply_markup, date FROM sent ORDER BY seq"
                )
            ],
            "kv": {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM kv")},
            "log": [(k, json.loads(b)) for k, b in db.execute("SELECT kind, body FROM log ORDER BY seq")],
        }


class _NoStore:
    def close(self) -> None: ...
    def add_update(self, update: dict) -> None: ...
    def confirm_ids(self, ids: list[int]) -> None: ...
    def add_sent(self, m: SentMessage) -> None: ...
    def set(self, key: str, value: Any) -> None: ...
    def log(self, kind: str, body: Any) -> None: ...


class LocalBotApi:
    """A fake Telegram Bot API server. Use `async with LocalBotApi(token) as api:`; `api.base_url` is the root."""

    def __init__(
        self,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        state_path: Path | None = None,
        bot_user_id: int = 999,
    ) -> None:
        if not token:
            raise ValueError("LocalBotApi needs a token")
        self._token = token
        self.host = host
        self.port = port
        self.bot_user_id = bot_user_id
        self.bot_user = {
            "id": bot_user_id,
            "is_bot": True,
            "first_name": "Shopbot (local)",
            "username": "shopbot_local_bot",
        }
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._background: set[asyncio.Task] = set()
        self._tick = asyncio.Event()
        self._faults: list[_Fault] = []
        self._poll_generation = 0

        # Observable records.
        self.sent: list[SentMessage] = []
        self.chat_actions: list[dict] = []  # {"chat_id", "action"}
        self.callback_answers: list[dict] = []  # {"callback_query_id", "text", "show_alert"}
        self.commands: list[dict] = []  # the last setMyCommands list
        self.offsets_requested: list[int | None] = []  # the offset of every getUpdates that was processed
        self.edited_markups: list[dict] = []  # {"chat_id", "message_id", "reply_markup"}
        self.calls: dict[str, int] = {}  # requests per Bot API method (as named by the client), faults included
        self.connections_opened = 0  # TCP connections accepted (keep-alive reuse keeps this low)
        self.webhook: dict = {"url": ""}

        # Server state.
        self._pending: list[dict] = []  # unconfirmed updates, in update_id order
        self._all_updates: dict[int, dict] = {}  # every update ever posted (for redeliver)
        self._next_update_id = FIRST_UPDATE_ID
        self._confirmed_offset = 0
        self._allowed_updates: list[str] | None = None
        self._msg_counters: dict[str, int] = {}  # per chat (JSON-encoded chat id as key)
        self._chats: dict[str, dict] = {}
        self._messages: dict[tuple[str, int], dict] = {}  # (chat key, message_id) -> {"date","text","markup","bot"}
        self._callbacks: dict[str, bool] = {}  # callback query id -> answered
        self._edit_dates: dict[tuple[str, int], int] = {}

        self._state_path = state_path
        self._store: _Store | _NoStore = _NoStore()
        if state_path is not None:
            store = _Store(Path(state_path))
            self._restore(store.load())
            self._store = store

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """The root URL; the bot calls f"{base_url}/bot{token}/{method}"."""
        if not self.port:
            raise RuntimeError("LocalBotApi is not started (no port yet)")
        return f"http://{self.host}:{self.port}"

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

    # ------------------------------------------------------------------ waiting

    def _notify(self) -> None:
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

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

    def _chat_obj(self, chat_id: int | str) -> dict:
        key = json.dumps(chat_id)
        if key in self._chats:
            return dict(self._chats[key])
        if isinstance(chat_id, int) and chat_id < 0:
            return {"id": chat_id, "type": "group", "title": "Group"}
        return {"id": chat_id, "type": "private", "first_name": "Lucy"}

    def _next_message_id(self, chat_id: int | str) -> int:
        key = json.dumps(chat_id)
        n = self._msg_counters.get(key, 0) + 1
        self._msg_counters[key] = n
        self._store.set("msg_counters", self._msg_counters)
        return n

    def _store_update(self, update: dict) -> dict:
        if not isinstance(update.get("update_id"), int):
            update = {"update_id": self._next_update_id, **{k: v for k, v in update.items() if k != "update_id"}}
        uid = update["update_id"]
        self._next_update_id = max(self._next_update_id, uid + 1)
        self._store.set("next_update_id", self._next_update_id)
        self._store.add_update(update)
        self._all_updates[uid] = update
        self._pending.append(update)
        self._pending.sort(key=lambda u: u["update_id"])
        self._index_update(update)
        self._notify()
        return update

    def _index_update(self, update: dict) -> None:
        """Remember chats, user messages and callback ids an update carries (also on restore)."""
        msg = update.get("message") or update.get("edited_message")
        if isinstance(msg, dict) and isinstance(msg.get("chat"), dict) and "id" in msg["chat"]:
            key = json.dumps(msg["chat"]["id"])
            self._chats[key] = msg["chat"]
            if isinstance(msg.get("message_id"), int) and "message" in update:
                self._messages[(key, msg["message_id"])] = {
                    "date": msg.get("date", 0),
                    "text": msg.get("text"),
                    "markup": None,
                    "bot": False,
                }
            if "edited_message" in update and isinstance(msg.get("edit_date"), int):
                self._edit_dates[(key, msg.get("message_id"))] = msg["edit_date"]
        cq = update.get("callback_query")
        if isinstance(cq, dict) and isinstance(cq.get("id"), str):
            self._callbacks.setdefault(cq["id"], False)

    def post_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        is_bot: bool = False,
        first_name: str = "Lucy",
    ) -> dict:
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

    def post_callback(self, chat_id: int, user_id: int, data: str, message_id: int) -> dict:
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

    def post_edit(self, chat_id: int, user_id: int, message_id: int, text: str) -> dict:
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

    def post_raw_update(self, update: dict) -> dict:
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
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {sorted(FAULTS)}")
        if count < 1:
            raise ValueError("count must be >= 1")
        self._faults.append(_Fault(method.lower(), fault, count, int(retry_after), float(delay), description))

    def _take_fault(self, method: str) -> _Fault | None:
        for fault in self._faults:
            if fault.method in (method, "*"):
                fault.count -= 1
                if fault.count <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    # ------------------------------------------------------------------ state (for /_control/state and restore)

    @property
    def pending_updates(self) -> list[dict]:
        return list(self._pending)

    @property
    def confirmed_offset(self) -> int:
        return self._confirmed_offset

    def state(self) -> dict:
        return {
            "offsets_requested": self.offsets_requested,
            "confirmed_offset": self._confirmed_offset,
            "pending_updates": self._pending,
            "callback_answers": self.callback_answers,
            "chat_actions": self.chat_actions,
            "commands": self.commands,
            "edited_markups": self.edited_markups,
            "webhook": self.webhook,
            "allowed_updates": self._allowed_updates,
            "calls": self.calls,
            "sent_count": len(self.sent),
        }

    def _restore(self, data: dict) -> None:
        kv = data["kv"]
        for update, confirmed in data["updates"]:
            self._all_updates[update["update_id"]] = update
            self._index_update(update)
            if not confirmed:
                self._pending.append(update)
        self._next_update_id = max(
            [kv.get("next_update_id", FIRST_UPDATE_ID)] + [u + 1 for u in self._all_updates]
        )
        self._confirmed_offset = kv.get("confirmed_offset", 0)
        self._allowed_updates = kv.get("allowed_updates")
        self._msg_counters = dict(kv.get("msg_counters", {}))
        self.webhook = kv.get("webhook", {"url": ""})
        self.commands = kv.get("commands", [])
        for m in data["sent"]:
            self.sent.append(m)
            self._messages[(json.dumps(m.chat_id), m.message_id)] = {
                "date": m.date,
                "text": m.text,
                "markup": m.reply_markup,
                "bot": True,
            }
        for kind, body in data["log"]:
            if kind == "offset":
                self.offsets_requested.append(body)
            elif kind == "chat_action":
                self.chat_actions.append(body)
            elif kind == "callback_answer":
                self.callback_answers.append(body)
                self._callbacks[body["callback_query_id"]] = True
            elif kind == "edited_markup":
                self.edited_markups.append(body)
                m = self._messages.get((json.dumps(body["chat_id"]), body["message_id"]))
                if m is not None:
                    m["markup"] = body["reply_markup"]

    # ------------------------------------------------------------------ HTTP

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        self.connections_opened += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, target, headers, body, keep_alive = request
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
        if not path.startswith("/bot") or path.count("/") != 2:
            return _err(404, "Not Found")
        token, _, api_method = path[len("/bot") :].partition("/")
        if not secrets.compare_digest(token.encode(), self._token.encode()):
            return _err(401, "Unauthorized")
        self.calls[api_method] = self.calls.get(api_method, 0) + 1
        try:
            return await self._call_api(api_method.lower(), params)
        finally:
            self._notify()

    async def _call_api(self, method: str, params: dict[str, Any]) -> _Response:
        fault = self._take_fault(method)
        kind = fault.kind if fault else None
        if kind == "drop_before_accept":
            raise _Drop
        if kind is not None and fault is not None:
            desc = fault.description
            if kind == "429":
                return _err(
                    429,
                    desc or f"Too Many Requests: retry after {fault.retry_after}",
                    {"retry_after": fault.retry_after},
                )
            if kind == "400":
                return _err(400, desc or "Bad Request: chat not found")
            if kind == "403":
                return _err(403, desc or "Forbidden: bot was blocked by the user")
            if kind == "500":
                return _err(500, desc or "Internal Server Error")
            if kind == "502_html":
                return _Response(502, _HTML_502, "text/html")
            if kind == "409":
                return _err(409, desc or _CONFLICT_POLL)
        handler = _HANDLERS.get(method)
        response = _err(404, "Not Found") if handler is None else await handler(self, params)
        if kind == "drop_after_accept":
            self._notify()
            raise _Drop
        if kind == "slow" and fault is not None:
            self._notify()
            await asyncio.sleep(fault.delay)
        if kind == "non_json_200":
            return _Response(200, _HTML_200, "text/html")
        return response

    # ------------------------------------------------------------------ Bot API methods

    async def _get_me(self, params: dict) -> _Response:
        return _ok(
            {
                **self.bot_user,
                "can_join_groups": False,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
                "can_connect_to_business": False,
                "has_main_web_app": False,
            }
        )

    def _apply_offset(self, offset: int) -> None:
        if offset > 0:
            confirmed = [u["update_id"] for u in self._pending if u["update_id"] < offset]
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
        elif offset < 0:
            keep = -offset
            cut = max(0, len(self._pending) - keep)
            confirmed = [u["update_id"] for u in self._pending[:cut]]
            self._pending = self._pending[cut:]
        else:
            return
        if confirmed:
            self._store.confirm_ids(confirmed)
        if offset > 0 and offset > self._confirmed_offset:
            self._confirmed_offset = offset
            self._store.set("confirmed_offset", offset)

    def _deliverable(self, limit: int) -> list[dict]:
        allowed = self._allowed_updates
        if allowed:
            wanted = set(allowed)
        else:
            wanted = set(_UPDATE_KINDS) - _NOT_BY_DEFAULT
        out = []
        for update in self._pending:
            kind = _update_kind(update)
            if kind is None or kind in wanted:  # an unrecognisable (malformed) update is always delivered
                out.append(update)
            if len(out) >= limit:
                break
        return out

    async def _get_updates(self, params: dict) -> _Response:
        if self.webhook.get("url"):
            return _err(409, _CONFLICT_WEBHOOK)
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()  # wakes an older long poll, which is then terminated with 409 (as Telegram does)
        offset = params.get("offset")
        try:
            offset = int(offset) if offset is not None else None
            limit = int(params.get("limit") or 100)
            timeout = float(params.get("timeout") or 0)
        except (TypeError, ValueError):
            return _err(400, "Bad Request: invalid getUpdates parameters")
        limit = min(max(limit, 1), 100)
        if "allowed_updates" in params and params["allowed_updates"] is not None:
            allowed = params["allowed_updates"]
            if not isinstance(allowed, list):
                return _err(400, "Bad Request: can't parse allowed updates")
            self._allowed_updates = [str(a) for a in allowed]
            self._store.set("allowed_updates", self._allowed_updates)
        self.offsets_requested.append(offset)
        self._store.log("offset", offset)
        if offset is not None:
            self._apply_offset(offset)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if generation != self._poll_generation:
                return _err(409, _CONFLICT_POLL)
            if self.webhook.get("url"):
                return _err(409, _CONFLICT_WEBHOOK)
            batch = self._deliverable(limit)
            remaining = deadline - loop.time()
            if batch or remaining <= 0:
                return _ok(batch)
            tick = self._tick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tick.wait(), remaining)

    async def _send_message(self, params: dict) -> _Response:
        chat_id = _as_int(params.get("chat_id"))
        if chat_id in (None, ""):
            return _err(400, "Bad Request: chat_id is empty")
        text = params.get("text")
        if text is None or (isinstance(text, str) and not text.strip()):
            return _err(400, "Bad Request: message text is empty")
        text = str(text)
        if _utf16_len(text) > 4096:
            return _err(400, "Bad Request: message is too long")
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            try:
                markup = json.loads(markup)
            except ValueError:
                return _err(400, "Bad Request: can't parse reply keyboard markup JSON object")
        if markup is not None and not isinstance(markup, dict):
            return _err(400, "Bad Request: can't parse reply keyboard markup JSON object")
        problem = _check_markup(markup)
        if problem:
            return _err(400, problem)
        message_id = self._next_message_id(chat_id)
        date = int(time.time())
        sent = SentMessage(chat_id=chat_id, text=text, reply_markup=markup, message_id=message_id, date=date)
        self._store.add_sent(sent)
        self.sent.append(sent)
        self._messages[(json.dumps(chat_id), message_id)] = {"date": date, "text": text, "markup": markup, "bot": True}
        result: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": self._chat_obj(chat_id),
            "date": date,
            "text": text,
        }
        if markup and markup.get("inline_keyboard"):
            result["reply_markup"] = markup
        return _ok(result)

    async def _send_chat_action(self, params: dict) -> _Response:
        chat_id = _as_int(params.get("chat_id"))
        action = params.get("action")
        if chat_id in (None, ""):
            return _err(400, "Bad Request: chat_id is empty")
        if not action:
            return _err(400, "Bad Request: action is empty")
        entry = {"chat_id": chat_id, "action": str(action)}
        self._store.log("chat_action", entry)
        self.chat_actions.append(entry)
        return _ok(True)

    async def _answer_callback_query(self, params: dict) -> _Response:
        cid = params.get("callback_query_id")
        cid = None if cid is None else str(cid)
        if not cid or cid not in self._callbacks or self._callbacks[cid]:
            return _err(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        text = params.get("text")
        if text is not None and _utf16_len(str(text)) > 200:
            return _err(400, "Bad Request: MESSAGE_TOO_LONG")
        entry = {
            "callback_query_id": cid,
            "text": None if text is None else str(text),
            "show_alert": bool(params.get("show_alert") or False),
        }
        self._callbacks[cid] = True
        self._store.log("callback_answer", entry)
        self.callback_answers.append(entry)
        return _ok(True)

    async def _set_my_commands(self, params: dict) -> _Response:
        commands = params.get("commands")
        if isinstance(commands, str):
            try:
                commands = json.loads(commands)
            except ValueError:
                return _err(400, "Bad Request: can't parse commands JSON object")
        if not isinstance(commands, list) or not all(
            isinstance(c, dict) and isinstance(c.get("command"), str) and isinstance(c.get("description"), str)
            for c in commands
        ):
            return _err(400, "Bad Request: can't parse commands JSON object")
        self.commands = commands
        self._store.set("commands", commands)
        return _ok(True)

    async def _get_my_commands(self, params: dict) -> _Response:
        return _ok(self.commands)

    async def _edit_message_reply_markup(self, params: dict) -> _Response:
        if params.get("inline_message_id"):
            return _err(400, "Bad Request: inline messages are not supported by the local fake")
        chat_id = _as_int(params.get("chat_id"))
        message_id = _as_int(params.get("message_id"))
        if chat_id in (None, "") or not isinstance(message_id, int):
            return _err(400, "Bad Request: message identifier is not specified")
        known = self._messages.get((json.dumps(chat_id), message_id))
        if known is None or not known["bot"]:
            return _err(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            try:
                markup = json.loads(markup)
            except ValueError:
                return _err(400, "Bad Request: can't parse reply keyboard markup JSON object")
        if markup is not None and not isinstance(markup, dict):
            return _err(400, "Bad Request: can't parse reply keyboard markup JSON object")
        if markup is not None and not markup.get("inline_keyboard"):
            markup = None
        if (markup or None) == (known["markup"] or None):
            return _err(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are exactly "
                "the same as a current content and reply markup of the message",
            )
        known["markup"] = markup
        entry = {"chat_id": chat_id, "message_id": message_id, "reply_markup": markup}
        self._store.log("edited_markup", entry)
        self.edited_markups.append(entry)
        result: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": self._chat_obj(chat_id),
            "date": known["date"],
            "edit_date": int(time.time()),
        }
        if known.get("text") is not None:
            result["text"] = known["text"]
        if markup:
            result["reply_markup"] = markup
        return _ok(result)

    async def _set_webhook(self, params: dict) -> _Response:
        url = params.get("url") or ""
        if url and not str(url).startswith("https://"):
            return _err(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        if params.get("drop_pending_updates"):
            self._drop_pending()
        self.webhook = {"url": str(url)}
        if params.get("allowed_updates") is not None:
            self._allowed_updates = list(params["allowed_updates"])
            self._store.set("allowed_updates", self._allowed_updates)
        self._store.set("webhook", self.webhook)
        return _ok(True)

    async def _delete_webhook(self, params: dict) -> _Response:
        if params.get("drop_pending_updates"):
            self._drop_pending()
        self.webhook = {"url": ""}
        self._store.set("webhook", self.webhook)
        return _ok(True)

    def _drop_pending(self) -> None:
        self._store.confirm_ids([u["update_id"] for u in self._pending])
        self._pending = []

    async def _get_webhook_info(self, params: dict) -> _Response:
        info: dict[str, Any] = {
            "url": self.webhook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": len(self._pending),
        }
        if self.webhook.get("url") and self._allowed_updates is not None:
            info["allowed_updates"] = self._allowed_updates
        return _ok(info)

    # ------------------------------------------------------------------ control (process mode)

    async def _control(self, http_method: str, name: str, params: dict) -> _Response:
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

    async def _refuse_for(self, seconds: float) -> None:
        await self.refuse()
        await asyncio.sleep(seconds)
        await self.accept()


_HANDLERS: dict[str, Callable[[LocalBotApi, dict], Any]] = {
    "getme": LocalBotApi._get_me,
    "getupdates": LocalBotApi._get_updates,
    "sendmessage": LocalBotApi._send_message,
    "sendchataction": LocalBotApi._send_chat_action,
    "answercallbackquery": LocalBotApi._answer_callback_query,
    "setmycommands": LocalBotApi._set_my_commands,
    "getmycommands": LocalBotApi._get_my_commands,
    "editmessagereplymarkup": LocalBotApi._edit_message_reply_markup,
    "setwebhook": LocalBotApi._set_webhook,
    "deletewebhook": LocalBotApi._delete_webhook,
    "getwebhookinfo": LocalBotApi._get_webhook_info,
}


def _check_markup(markup: dict | None) -> str | None:
    if not markup:
        return None
    rows = markup.get("inline_keyboard")
    if rows is None:
        return None  # reply keyboards etc. are recorded as given
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return "Bad Request: field \"inline_keyboard\" of the InlineKeyboardMarkup should be an Array of Arrays"
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not button.get("text"):
                return "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "Bad Request: BUTTON_DATA_INVALID"
    return None


def _describe(predicate: Callable[[], bool]) -> str:
    try:
        source = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        source = ""
    name = getattr(predicate, "__qualname__", repr(predicate))
    return f"{name} [{source[:200]}]" if source else name


# ---------------------------------------------------------------------- minimal HTTP/1.1


def _parse_params(query: str, content_type: str, body: bytes) -> dict[str, Any]:
    params: dict[str, Any] = {}
    ctype = content_type.split(";")[0].strip().lower()
    pairs = parse_qsl(query, keep_blank_values=True)
    if body:
        if ctype == "application/json":
            try:
                obj = json.loads(body)
            except ValueError:
                raise ValueError("can't parse JSON body") from None
            if not isinstance(obj, dict):
                raise ValueError("JSON body must be an object")
            params.update({k: v for k, v in obj.items() if v is not None})
        elif ctype in ("application/x-www-form-urlencoded", ""):
            pairs += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        elif ctype == "multipart/form-data":
            raise ValueError("multipart uploads are not supported by the local fake")
        else:
            raise ValueError(f"unsupported content type {ctype}")
    for name, value in pairs:
        if name in _RAW_STRING_PARAMS:
            params[name] = value
            continue
        try:
            params[name] = json.loads(value)
        except ValueError:
            params[name] = value
    return params


# ---------------------------------------------------------------------- process mode


async def serve(token: str, host: str, port: int, state_path: Path | None) -> None:
    """Run a LocalBotApi until cancelled. Prints one line `local_api listening on http://HOST:PORT` (no token)."""
    api = LocalBotApi(token, host=host, port=port, state_path=state_path)
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
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("SHOPBOT_LOCAL_API_TOKEN")
    if not token:
        parser.error("a token is required (--token or $SHOPBOT_LOCAL_API_TOKEN)")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(token, args.host, args.port, args.state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
