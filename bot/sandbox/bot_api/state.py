"""What the fake Bot API remembers, apart from HTTP: the update queue, the chats and messages it has seen, the records
of what the bot did (`sent`, `chat_actions`, ...) and the SQLite state file that makes all of it survive a kill -9.

`ApiState` is the base class of `LocalBotApi` (in `server`); the Bot API handlers in `methods` take it as their
first argument, so they depend on this module only and never on the listener.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class SentMessage:
    chat_id: int | str
    text: str                      # the visible text, as Telegram keeps it (HTML tags parsed into `entities`)
    reply_markup: dict[str, Any] | None
    message_id: int
    date: int
    entities: tuple[dict[str, Any], ...] = ()   # dicts of type, offset, length (UTF-16 units)
    reply_to: int | None = None    # the message it quotes
    html: str | None = None        # the text as sent in HTML parse mode
    client: str = ""               # the caller's label (`/<label>/bot...`, url_for), "" without one; not persisted
    photo: bytes | None = None     # a sendPhoto's picture (its caption is `text`); not persisted
    preview: bool = True           # a link preview would show (no `link_preview_options.is_disabled`); not persisted


@dataclass(frozen=True)
class Caller:
    """Who makes the call being handled: the label of its URL and its TCP connection (set per request)."""
    client: str = ""
    connection: int = 0
    gone: Callable[[], bool] = field(default=lambda: False)   # the client closed (or reset) its connection


NOBODY = Caller()
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("bot_api_caller", default=NOBODY)


@dataclass
class Poll:
    """One processed `getUpdates`, as the server saw it. Times are `time.monotonic()` (the event loop's clock).

    outcome: "open" while it waits; "updates" or "empty" when answered; "conflict" when a newer `getUpdates`
    ended it with 409 while its client was still connected (two pollers at once: `terminated_by` names the newer
    one's client); "abandoned" when its client closed the connection first (a killed or cancelled poller: nobody
    polls any more, so a later poll is no overlap); "webhook" when a webhook set meanwhile ended it with 409."""
    client: str
    connection: int
    offset: int | None
    timeout: float
    arrived: float
    ended: float | None = None
    outcome: str = "open"
    updates: int = 0
    terminated_by: str | None = None


def _update_kind(update: dict[str, Any]) -> str | None:
    for key in update:
        if key in _UPDATE_KINDS:
            return key
    return None


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

    def add_update(self, update: dict[str, Any]) -> None:
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
    def add_update(self, update: dict[str, Any]) -> None: ...
    def confirm_ids(self, ids: list[int]) -> None: ...
    def add_sent(self, m: SentMessage) -> None: ...
    def set(self, key: str, value: Any) -> None: ...
    def log(self, kind: str, body: Any) -> None: ...


class ApiState:
    """The records and the update queue of one fake Bot API, restored from `state_path` when one is given."""

    def __init__(self, *, state_path: Path | None, bot_user_id: int) -> None:
        self.bot_user_id = bot_user_id
        self.bot_user = {
            "id": bot_user_id,
            "is_bot": True,
            "first_name": "Shopbot (local)",
            "username": "shopbot_local_bot",
        }
        self._tick = asyncio.Event()
        self._poll_generation = 0

        # Observable records.
        self.sent: list[SentMessage] = []
        self.chat_actions: list[dict[str, Any]] = []  # {"chat_id", "action"}
        self.reaction_calls: list[dict[str, Any]] = []  # each setMessageReaction: {"chat_id", "message_id", "emoji"}
        self.reactions: dict[tuple[str, int], str | None] = {}   # (chat key, message_id) -> the bot's reaction now
        self.drafts: list[dict[str, Any]] = []  # each sendMessageDraft: {"chat_id", "draft_id", "text", "html", "at"}
        self.callback_answers: list[dict[str, Any]] = []  # {"callback_query_id", "text", "show_alert"}
        self.commands: list[dict[str, Any]] = []  # the last setMyCommands list
        self.offsets_requested: list[int | None] = []  # the offset of every getUpdates that was processed
        self.polls: list[Poll] = []  # every processed getUpdates with its client, times and outcome (not persisted)
        self.edited_markups: list[dict[str, Any]] = []  # {"chat_id", "message_id", "reply_markup"}
        self.edited_texts: list[dict[str, Any]] = []    # {"chat_id", "message_id", "text", "html", "reply_markup"}
        # (caller, method, params, loop time) of every Bot API call; caller is the `/<caller>` prefix of the client's
        # base URL, or None
        self.by_caller: list[tuple[str | None, str, dict[str, Any], float]] = []
        # in arrival order: ("sent", SentMessage), ("edited" | "reaction" | "draft", its entry), and ("call", method)
        # when a Bot API request arrived and ("answer", method) when its reply was ready (method names as the client
        # spelt them; shows what waited for what)
        self.timeline: list[tuple[str, SentMessage | dict[str, Any] | str]] = []
        self.calls: dict[str, int] = {}  # requests per Bot API method (as named by the client), faults included
        self.connections_opened = 0  # TCP connections accepted (keep-alive reuse keeps this low)
        self.webhook: dict[str, Any] = {"url": ""}

        # Server state.
        self._pending: list[dict[str, Any]] = []  # unconfirmed updates, in update_id order
        self._all_updates: dict[int, dict[str, Any]] = {}  # every update ever posted (for redeliver)
        self._next_update_id = FIRST_UPDATE_ID
        self._confirmed_offset = 0
        self._allowed_updates: list[str] | None = None
        self._msg_counters: dict[str, int] = {}  # per chat (JSON-encoded chat id as key)
        self._chats: dict[str, dict[str, Any]] = {}
        # (chat key, message id) -> {"date", "text", "markup", "bot"}
        self._messages: dict[tuple[str, int], dict[str, Any]] = {}
        self._callbacks: dict[str, bool] = {}  # callback query id -> answered
        self._edit_dates: dict[tuple[str, int], int] = {}

        self._state_path = state_path
        self._store: _Store | _NoStore = _NoStore()
        if state_path is not None:
            store = _Store(Path(state_path))
            self._restore(store.load())
            self._store = store

    def _notify(self) -> None:
        """Wake everything waiting for a change (a long poll, `wait_for`)."""
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    # ------------------------------------------------------------------ chats, messages, updates

    def reaction(self, chat_id: int | str, message_id: int) -> str | None:
        """The bot's reaction on a message now (setMessageReaction), or None."""
        return self.reactions.get((json.dumps(chat_id), message_id))

    def current(self, chat_id: int | str, message_id: int) -> dict[str, Any] | None:
        """A message as it reads now (after edits): {"text", "markup", "html", ...}, or None."""
        return self._messages.get((json.dumps(chat_id), message_id))

    def _chat_obj(self, chat_id: int | str) -> dict[str, Any]:
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

    def _store_update(self, update: dict[str, Any]) -> dict[str, Any]:
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

    def _index_update(self, update: dict[str, Any]) -> None:
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
            if "edited_message" in update and isinstance(msg.get("message_id"), int) \
                    and isinstance(msg.get("edit_date"), int):
                self._edit_dates[(key, msg["message_id"])] = msg["edit_date"]
        cq = update.get("callback_query")
        if isinstance(cq, dict) and isinstance(cq.get("id"), str):
            self._callbacks.setdefault(cq["id"], False)

    # ------------------------------------------------------------------ the pending queue, and the state view

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        return list(self._pending)

    @property
    def confirmed_offset(self) -> int:
        return self._confirmed_offset

    @property
    def poll_conflicts(self) -> list[Poll]:
        """Polls a newer `getUpdates` ended with 409 while their client still listened: two pollers at once."""
        return [p for p in self.polls if p.outcome == "conflict"]

    def state(self) -> dict[str, Any]:
        """What `/_control/state` answers."""
        return {
            "offsets_requested": self.offsets_requested,
            "confirmed_offset": self._confirmed_offset,
            "pending_updates": self._pending,
            "callback_answers": self.callback_answers,
            "chat_actions": self.chat_actions,
            "reaction_calls": self.reaction_calls,
            "drafts": self.drafts,
            "commands": self.commands,
            "edited_markups": self.edited_markups,
            "edited_texts": self.edited_texts,
            "webhook": self.webhook,
            "allowed_updates": self._allowed_updates,
            "calls": self.calls,
            "sent_count": len(self.sent),
            "polls": [vars(p) for p in self.polls],
        }

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

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
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

    def _drop_pending(self) -> None:
        self._store.confirm_ids([u["update_id"] for u in self._pending])
        self._pending = []

    # ------------------------------------------------------------------ restore from the state file

    def _restore(self, data: dict[str, Any]) -> None:
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
            elif kind == "reaction":
                self.reaction_calls.append(body)
                self.reactions[(json.dumps(body["chat_id"]), body["message_id"])] = body["emoji"]
            elif kind == "draft":
                self.drafts.append(body)
            elif kind == "callback_answer":
                self.callback_answers.append(body)
                self._callbacks[body["callback_query_id"]] = True
            elif kind == "edited_text":
                self.edited_texts.append(body)
                m = self._messages.get((json.dumps(body["chat_id"]), body["message_id"]))
                if m is not None:
                    m.update(text=body["text"], markup=body["reply_markup"], html=body.get("html"))
            elif kind == "edited_markup":
                self.edited_markups.append(body)
                m = self._messages.get((json.dumps(body["chat_id"]), body["message_id"]))
                if m is not None:
                    m["markup"] = body["reply_markup"]
