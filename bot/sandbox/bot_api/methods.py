"""The Bot API methods the fake answers, as plain functions of the state, and the request/response helpers they use.

Each handler takes the `ApiState` and the parsed parameters and returns a `Response`; `HANDLERS` maps the
lower-cased method name to its handler. Reading parameters (`_parse_params`) lives here too because it carries
Telegram's conventions (JSON-encoded form values, except for the fields PTB sends as raw strings).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from telegram.constants import ReactionEmoji

from bot.sandbox.bot_api.entities import HtmlRefused, parse_html
from bot.sandbox.bot_api.photos import MAX_CAPTION, Upload, image_size, parse_multipart, photo_problem
from bot.sandbox.bot_api.state import CALLER, ApiState, Poll, SentMessage
from bot.sandbox.mini_http import Response as _Response

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

_CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)
_CONFLICT_POLL = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _json_response(status: int, obj: Any) -> _Response:
    return _Response(status, json.dumps(obj).encode())   # ASCII JSON: a lone surrogate stays a valid \\u escape


def _ok(result: Any) -> _Response:
    return _json_response(200, {"ok": True, "result": result})


def _err(code: int, description: str, parameters: dict[str, Any] | None = None) -> _Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return _json_response(code, body)


def _as_int(value: Any) -> Any:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)
    return value


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
        elif ctype == "multipart/form-data":      # sendPhoto's upload (bot/sandbox/bot_api/photos.py)
            fields, files = parse_multipart(content_type, body)
            pairs += fields
            params.update(files)
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


_UNPARSABLE = object()


def _preview(params: dict[str, Any]) -> bool:
    """Whether Telegram would show a link preview: unless `link_preview_options.is_disabled` (JSON-encoded by PTB)."""
    options = params.get("link_preview_options")
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            options = None
    return not (isinstance(options, dict) and options.get("is_disabled") is True)


def _checked_markup(params: dict[str, Any]) -> Any:
    """`reply_markup` read and checked as Telegram does: a dict or None, or the 400 answer saying what is wrong."""
    markup = _markup(params)
    if markup is _UNPARSABLE:
        return _err(400, "Bad Request: can't parse reply keyboard markup JSON object")
    problem = _check_markup(markup)
    return _err(400, problem) if problem else markup


def _markup(params: dict[str, Any]) -> Any:
    """`reply_markup` as a dict (PTB sends it JSON-encoded), None when absent, `_UNPARSABLE` when it is no object."""
    markup = params.get("reply_markup")
    if isinstance(markup, str):
        try:
            markup = json.loads(markup)
        except ValueError:
            return _UNPARSABLE
    return markup if markup is None or isinstance(markup, dict) else _UNPARSABLE


def _check_markup(markup: dict[str, Any] | None) -> str | None:
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
                return (
                    "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
                )
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "Bad Request: BUTTON_DATA_INVALID"
    return None


# ---------------------------------------------------------------------- Bot API methods


async def get_me(st: ApiState, params: dict[str, Any]) -> _Response:
    return _ok(
        {
            **st.bot_user,
            "can_join_groups": False,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
    )


async def get_updates(st: ApiState, params: dict[str, Any]) -> _Response:
    if st.webhook.get("url"):
        return _err(409, _CONFLICT_WEBHOOK)
    caller = CALLER.get()
    st._poll_generation += 1
    generation = st._poll_generation
    st._notify()  # wakes an older long poll, which is then terminated with 409 (as Telegram does)
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
        st._allowed_updates = [str(a) for a in allowed]
        st._store.set("allowed_updates", st._allowed_updates)
    st.offsets_requested.append(offset)
    st._store.log("offset", offset)
    loop = asyncio.get_running_loop()
    poll = Poll(caller.client, caller.connection, offset, timeout, loop.time())
    st.polls.append(poll)
    if offset is not None:
        st._apply_offset(offset)
    deadline = loop.time() + max(timeout, 0.0)

    def end(outcome: str, response: _Response, updates: int = 0) -> _Response:
        poll.ended, poll.outcome, poll.updates = loop.time(), outcome, updates
        return response

    while True:
        if caller.gone():
            return end("abandoned", _err(409, _CONFLICT_POLL))   # nobody reads it: the client went away
        if generation != st._poll_generation:
            poll.terminated_by = st.polls[-1].client if st.polls else None
            return end("conflict", _err(409, _CONFLICT_POLL))
        if st.webhook.get("url"):
            return end("webhook", _err(409, _CONFLICT_WEBHOOK))
        batch = st._deliverable(limit)
        remaining = deadline - loop.time()
        if batch or remaining <= 0:
            return end("updates" if batch else "empty", _ok(batch), len(batch))
        tick = st._tick
        with contextlib.suppress(TimeoutError):   # woken by any change, and every 0.1 s to see a client gone
            await asyncio.wait_for(tick.wait(), min(remaining, 0.1))


def _text(params: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str | None] | _Response:
    """The visible text and entities of `text` under its `parse_mode` (HTML parsed as strictly as Telegram does), or
    the 400 Telegram answers."""
    text = params.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        return _err(400, "Bad Request: message text is empty")
    text = str(text)
    mode = params.get("parse_mode")
    entities: list[dict[str, Any]] = []
    html = None
    if mode:
        if str(mode).lower() != "html":
            return _err(400, f"Bad Request: unsupported parse_mode {mode!r} (the local fake knows HTML only)")
        html = text
        try:
            text, entities = parse_html(text)
        except HtmlRefused as exc:
            return _err(400, f"Bad Request: can't parse entities: {exc}")
        if not text.strip():
            return _err(400, "Bad Request: message text is empty")
    if _utf16_len(text) > 4096:
        return _err(400, "Bad Request: message is too long")
    return text, entities, html


def _reply_to(st: ApiState, chat_id: Any, params: dict[str, Any]) -> int | None | _Response:
    raw = params.get("reply_parameters")
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return _err(400, "Bad Request: can't parse reply parameters JSON object")
    if not isinstance(raw, dict) or not isinstance(raw.get("message_id"), int):
        return _err(400, "Bad Request: can't parse reply parameters JSON object")
    if st.current(chat_id, raw["message_id"]) is None:
        if raw.get("allow_sending_without_reply"):
            return None
        return _err(400, "Bad Request: message to be replied not found")
    message_id: int = raw["message_id"]
    return message_id


async def send_message(st: ApiState, params: dict[str, Any]) -> _Response:
    chat_id = _as_int(params.get("chat_id"))
    if chat_id in (None, ""):
        return _err(400, "Bad Request: chat_id is empty")
    parsed = _text(params)
    if isinstance(parsed, _Response):
        return parsed
    text, entities, html = parsed
    markup = _checked_markup(params)
    if isinstance(markup, _Response):
        return markup
    reply_to = _reply_to(st, chat_id, params)
    if isinstance(reply_to, _Response):
        return reply_to
    message_id = st._next_message_id(chat_id)
    date = int(time.time())
    sent = SentMessage(chat_id=chat_id, text=text, reply_markup=markup, message_id=message_id, date=date,
                       entities=tuple(entities), reply_to=reply_to, html=html, client=CALLER.get().client,
                       preview=_preview(params))
    st._store.add_sent(sent)
    st.sent.append(sent)
    st.timeline.append(("sent", sent))
    st._messages[(json.dumps(chat_id), message_id)] = {"date": date, "text": text, "markup": markup, "bot": True,
                                                       "html": html}
    result: dict[str, Any] = {
        "message_id": message_id,
        "from": st.bot_user,
        "chat": st._chat_obj(chat_id),
        "date": date,
        "text": text,
    }
    if entities:
        result["entities"] = entities
    if markup and markup.get("inline_keyboard"):
        result["reply_markup"] = markup
    return _ok(result)


async def send_photo(st: ApiState, params: dict[str, Any]) -> _Response:
    """sendPhoto with an uploaded file, checked as Telegram checks it (bot/sandbox/bot_api/photos.py); the caption
    parsed like a message's text (at most 1,024 characters). Recorded as a sent message whose text is the caption,
    with the picture beside it (`SentMessage.photo`)."""
    chat_id = _as_int(params.get("chat_id"))
    if chat_id in (None, ""):
        return _err(400, "Bad Request: chat_id is empty")
    problem = photo_problem(params.get("photo"))
    if problem:
        return _err(400, problem)
    caption, html = "", None
    entities: list[dict[str, Any]] = []
    if params.get("caption"):
        parsed = _text({"text": params["caption"], "parse_mode": params.get("parse_mode")})
        if isinstance(parsed, _Response):
            return parsed
        caption, entities, html = parsed
        if _utf16_len(caption) > MAX_CAPTION:
            return _err(400, "Bad Request: message caption is too long")
    markup = _checked_markup(params)
    if isinstance(markup, _Response):
        return markup
    photo: Upload = params["photo"]
    message_id = st._next_message_id(chat_id)
    date = int(time.time())
    sent = SentMessage(chat_id=chat_id, text=caption, reply_markup=markup, message_id=message_id, date=date,
                       entities=tuple(entities), html=html, client=CALLER.get().client, photo=photo.data)
    st._store.add_sent(sent)
    st.sent.append(sent)
    st.timeline.append(("sent", sent))
    st._messages[(json.dumps(chat_id), message_id)] = {"date": date, "text": caption, "markup": markup, "bot": True,
                                                       "html": html}
    width, height = image_size(photo.data) or (0, 0)
    result: dict[str, Any] = {
        "message_id": message_id, "from": st.bot_user, "chat": st._chat_obj(chat_id), "date": date,
        "photo": [{"file_id": f"photo-{message_id}", "file_unique_id": f"p{message_id}", "width": width,
                   "height": height, "file_size": len(photo.data)}],
    }
    if caption:
        result["caption"] = caption
        if entities:
            result["caption_entities"] = entities
    return _ok(result)


async def edit_message_text(st: ApiState, params: dict[str, Any]) -> _Response:
    """Like Telegram: only the bot's own messages; the same text and markup again is 400 "message is not modified"."""
    if params.get("inline_message_id"):
        return _err(400, "Bad Request: inline messages are not supported by the local fake")
    chat_id = _as_int(params.get("chat_id"))
    message_id = _as_int(params.get("message_id"))
    if chat_id in (None, "") or not isinstance(message_id, int):
        return _err(400, "Bad Request: message identifier is not specified")
    known = st.current(chat_id, message_id)
    if known is None or not known["bot"]:
        return _err(400, "Bad Request: message to edit not found")
    parsed = _text(params)
    if isinstance(parsed, _Response):
        return parsed
    text, entities, html = parsed
    markup = _checked_markup(params)
    if isinstance(markup, _Response):
        return markup
    if markup is not None and not markup.get("inline_keyboard"):
        markup = None
    if text == known["text"] and (html or None) == (known.get("html") or None) \
            and (markup or None) == (known["markup"] or None):
        return _err(400, "Bad Request: message is not modified: specified new message content and reply markup are "
                         "exactly the same as a current content and reply markup of the message")
    known.update(text=text, markup=markup, html=html)
    entry = {"chat_id": chat_id, "message_id": message_id, "text": text, "html": html, "reply_markup": markup,
             "entities": entities, "preview": _preview(params)}
    st._store.log("edited_text", entry)
    st.edited_texts.append(entry)
    st.timeline.append(("edited", entry))
    result: dict[str, Any] = {"message_id": message_id, "from": st.bot_user, "chat": st._chat_obj(chat_id),
                              "date": known["date"], "edit_date": int(time.time()), "text": text}
    if entities:
        result["entities"] = entities
    if markup:
        result["reply_markup"] = markup
    return _ok(result)


async def send_chat_action(st: ApiState, params: dict[str, Any]) -> _Response:
    chat_id = _as_int(params.get("chat_id"))
    action = params.get("action")
    if chat_id in (None, ""):
        return _err(400, "Bad Request: chat_id is empty")
    if not action:
        return _err(400, "Bad Request: action is empty")
    entry = {"chat_id": chat_id, "action": str(action)}
    st._store.log("chat_action", entry)
    st.chat_actions.append(entry)
    return _ok(True)


# The emoji a bot may react with (Bot API `ReactionTypeEmoji`): the list python-telegram-bot carries.
REACTION_EMOJI = frozenset(e.value for e in ReactionEmoji)


async def set_message_reaction(st: ApiState, params: dict[str, Any]) -> _Response:
    """As Telegram checks it: the message must exist in the chat; `reaction` is a list of ReactionType of which a
    bot may set at most one (it replaces the bot's earlier one; an empty list removes it); only emoji of Telegram's
    list (custom emoji must already be on the message, paid reactions are never a bot's: both refused here)."""
    chat_id = _as_int(params.get("chat_id"))
    message_id = _as_int(params.get("message_id"))
    if chat_id in (None, "") or not isinstance(message_id, int):
        return _err(400, "Bad Request: message identifier is not specified")
    if st.current(chat_id, message_id) is None:
        return _err(400, "Bad Request: MESSAGE_ID_INVALID")
    reaction = params.get("reaction", [])
    if isinstance(reaction, str):
        try:
            reaction = json.loads(reaction)
        except ValueError:
            return _err(400, "Bad Request: can't parse reaction types JSON object")
    if not isinstance(reaction, list) or not all(isinstance(r, dict) for r in reaction):
        return _err(400, "Bad Request: can't parse reaction types JSON object")
    if len(reaction) > 1:
        return _err(400, "Bad Request: REACTIONS_TOO_MANY")
    emoji = [r.get("emoji") for r in reaction]
    if any(r.get("type") != "emoji" for r in reaction) or not all(e in REACTION_EMOJI for e in emoji):
        return _err(400, "Bad Request: REACTION_INVALID")
    entry = {"chat_id": chat_id, "message_id": message_id, "emoji": emoji[0] if emoji else None,
             "at": time.perf_counter()}
    st.reactions[(json.dumps(chat_id), message_id)] = entry["emoji"]
    st._store.log("reaction", entry)
    st.reaction_calls.append(entry)
    st.timeline.append(("reaction", entry))
    return _ok(True)


DRAFT_LIMIT = 4096     # a draft's text: 1-4096 characters after entities parsing, as a message's


async def send_message_draft(st: ApiState, params: dict[str, Any]) -> _Response:
    """As Telegram checks it (Bot API 9.3, every bot since 9.5): private chats only, a non-zero `draft_id`, a text of
    1-4096 characters after entities parsing. A draft is shown for a while and never becomes a message."""
    chat_id = _as_int(params.get("chat_id"))
    if not isinstance(chat_id, int):
        return _err(400, "Bad Request: chat_id is empty")
    if st._chat_obj(chat_id).get("type") != "private":
        return _err(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
    draft_id = _as_int(params.get("draft_id"))
    if not isinstance(draft_id, int) or draft_id == 0:
        return _err(400, "Bad Request: draft_id must be non-zero")
    parsed = _text(params)
    if isinstance(parsed, _Response):
        return parsed
    text, entities, html = parsed
    entry = {"chat_id": chat_id, "draft_id": draft_id, "text": text, "html": html, "at": time.monotonic()}
    st._store.log("draft", entry)
    st.drafts.append(entry)
    st.timeline.append(("draft", entry))
    return _ok(True)


async def answer_callback_query(st: ApiState, params: dict[str, Any]) -> _Response:
    cid = params.get("callback_query_id")
    cid = None if cid is None else str(cid)
    if not cid or cid not in st._callbacks or st._callbacks[cid]:
        return _err(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
    text = params.get("text")
    if text is not None and _utf16_len(str(text)) > 200:
        return _err(400, "Bad Request: MESSAGE_TOO_LONG")
    entry = {
        "callback_query_id": cid,
        "text": None if text is None else str(text),
        "show_alert": bool(params.get("show_alert") or False),
    }
    st._callbacks[cid] = True
    st._store.log("callback_answer", entry)
    st.callback_answers.append(entry)
    return _ok(True)


async def set_my_commands(st: ApiState, params: dict[str, Any]) -> _Response:
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
    st.commands = commands
    st._store.set("commands", commands)
    return _ok(True)


async def get_my_commands(st: ApiState, params: dict[str, Any]) -> _Response:
    return _ok(st.commands)


async def edit_message_reply_markup(st: ApiState, params: dict[str, Any]) -> _Response:
    if params.get("inline_message_id"):
        return _err(400, "Bad Request: inline messages are not supported by the local fake")
    chat_id = _as_int(params.get("chat_id"))
    message_id = _as_int(params.get("message_id"))
    if chat_id in (None, "") or not isinstance(message_id, int):
        return _err(400, "Bad Request: message identifier is not specified")
    known = st._messages.get((json.dumps(chat_id), message_id))
    if known is None or not known["bot"]:
        return _err(400, "Bad Request: message to edit not found")
    markup = _markup(params)
    if markup is _UNPARSABLE:
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
    st._store.log("edited_markup", entry)
    st.edited_markups.append(entry)
    result: dict[str, Any] = {
        "message_id": message_id,
        "from": st.bot_user,
        "chat": st._chat_obj(chat_id),
        "date": known["date"],
        "edit_date": int(time.time()),
    }
    if known.get("text") is not None:
        result["text"] = known["text"]
    if markup:
        result["reply_markup"] = markup
    return _ok(result)


async def set_webhook(st: ApiState, params: dict[str, Any]) -> _Response:
    url = params.get("url") or ""
    if url and not str(url).startswith("https://"):
        return _err(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
    if params.get("drop_pending_updates"):
        st._drop_pending()
    st.webhook = {"url": str(url)}
    if params.get("allowed_updates") is not None:
        st._allowed_updates = list(params["allowed_updates"])
        st._store.set("allowed_updates", st._allowed_updates)
    st._store.set("webhook", st.webhook)
    return _ok(True)


async def delete_webhook(st: ApiState, params: dict[str, Any]) -> _Response:
    if params.get("drop_pending_updates"):
        st._drop_pending()
    st.webhook = {"url": ""}
    st._store.set("webhook", st.webhook)
    return _ok(True)


async def get_webhook_info(st: ApiState, params: dict[str, Any]) -> _Response:
    info: dict[str, Any] = {
        "url": st.webhook.get("url", ""),
        "has_custom_certificate": False,
        "pending_update_count": len(st._pending),
    }
    if st.webhook.get("url") and st._allowed_updates is not None:
        info["allowed_updates"] = st._allowed_updates
    return _ok(info)


HANDLERS: dict[str, Callable[[ApiState, dict[str, Any]], Awaitable[_Response]]] = {
    "getme": get_me,
    "getupdates": get_updates,
    "sendmessage": send_message,
    "sendphoto": send_photo,
    "sendchataction": send_chat_action,
    "setmessagereaction": set_message_reaction,
    "sendmessagedraft": send_message_draft,
    "answercallbackquery": answer_callback_query,
    "setmycommands": set_my_commands,
    "getmycommands": get_my_commands,
    "editmessagereplymarkup": edit_message_reply_markup,
    "editmessagetext": edit_message_text,
    "setwebhook": set_webhook,
    "deletewebhook": delete_webhook,
    "getwebhookinfo": get_webhook_info,
}
