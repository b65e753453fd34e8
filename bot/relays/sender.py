"""The PTB adapter the delivery relay uses: one HTTP request per send, errors mapped to delivery outcomes (C7).

Outcomes (docs/contracts.md, "Facts at the edges"; the checks are ordered because `BadRequest` and `TimedOut` subclass
`NetworkError`):

| exception                                                                 | outcome       |
|---------------------------------------------------------------------------|---------------|
| `InvalidToken` (401/404: the bot's own configuration)                     | config_fault  |
| `RetryAfter` (429)                                                        | retry_later   |
| `ChatMigrated`, `BadRequest` (400), `Forbidden` (403)                     | failed        |
| `NetworkError`/`TimedOut` caused by one of the transport's `NOT_SENT_CAUSES` (producers/telegram/transport.py: \
a refused or unresolved connection, a connect or pool timeout, a URL it cannot send to), or by a closed HTTP client | \
not_sent |
| anything else: read/write timeout, dropped connection, 5xx, a 200 that is not JSON, `CancelledError` mid-request, \
`Conflict`, unexpected exceptions | unknown |

Cancellation: `TelegramSender.send` never swallows `asyncio.CancelledError`; it propagates, because the task that
was cancelled must stop. The request may or may not have reached Telegram, so the report must not be resent by
itself. The relay should do one of two things:

    try:
        outcome = await sender.send(chat_id, text, asks)
    except asyncio.CancelledError as exc:
        outcome = classify(exc)                  # kind is OutcomeKind.UNKNOWN
        await asyncio.shield(record(report, outcome))   # optional, best effort
        raise

or simply leave the report in `sending`: startup recovery turns every `sending` report into `unknown` (C7, C10),
which is the same answer. Either way the cancellation is re-raised.

`send` never retries and PTB never retries on its own, so a send is at most one HTTP request. The caller
initialises the bot (`await bot.initialize()` or `async with bot:`), which costs one getMe.
"""
from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import (
    Bot,
    LinkPreviewOptions,
    ReplyParameters,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from bot.relays.render import COMMON_ASKS, keyboard
from producers.telegram.client import retry_after_seconds
from producers.telegram.transport import NOT_SENT_CAUSES
from store import Ask, redaction

__all__ = ["OutcomeKind", "SendOutcome", "TelegramSender", "classify"]

_log = logging.getLogger(__name__)



class OutcomeKind(enum.StrEnum):
    """What one Bot API request did (C7); compared by identity (`is`). A StrEnum: logs and metric labels show the
    value."""
    CONFIRMED = "confirmed"        # Telegram answered with the message: the receipt is its message_id
    NOT_SENT = "not_sent"          # provably never left this machine: send again
    RETRY_LATER = "retry_later"    # 429: send again after retry_after
    FAILED = "failed"              # a definite refusal about this message (400, 403, migrated chat)
    UNKNOWN = "unknown"            # may have reached Telegram: never resent without a recorded decision
    CONFIG_FAULT = "config_fault"  # the bot's own token was refused: stop the relay, keep the deliveries


_MAX_REASON = 200


@dataclass(frozen=True)
class SendOutcome:
    kind: OutcomeKind
    receipt: str | None = None  # Telegram message_id as text when confirmed
    retry_after: float | None = None  # seconds, for retry_later
    reason: str = ""  # short human reason, never containing the token

    def __post_init__(self) -> None:   # a kind given as its text becomes the member, so `is` holds; any other fails
        object.__setattr__(self, "kind", OutcomeKind(self.kind))


def _clean(text: str, token: str | None = None) -> str:
    """A failed send's reason: outside text (Telegram's words), cut, one line, redacted (store/redaction.py)."""
    text = redaction.outside(text, 4 * _MAX_REASON)
    if token:
        text = text.replace(token, "****")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc.__cause__
    while cur is not None and cur not in chain and len(chain) < 5:
        chain.append(cur)
        cur = cur.__cause__
    return chain


def classify(exc: BaseException) -> SendOutcome:
    """Map an exception raised by one Bot API request to a delivery outcome (never `confirmed`)."""
    if isinstance(exc, asyncio.CancelledError):
        return SendOutcome(OutcomeKind.UNKNOWN, reason="cancelled mid-request; it may have reached Telegram")
    if isinstance(exc, InvalidToken):
        return SendOutcome(OutcomeKind.CONFIG_FAULT, reason=_clean(f"Telegram rejected the bot token: {exc.message}"))
    if isinstance(exc, RetryAfter):
        seconds = retry_after_seconds(exc)
        return SendOutcome(OutcomeKind.RETRY_LATER, retry_after=seconds,
                           reason=f"flood control: retry after {seconds:g} s")
    if isinstance(exc, ChatMigrated):
        return SendOutcome(OutcomeKind.FAILED, reason=f"chat migrated to {exc.new_chat_id}")
    if isinstance(exc, Forbidden):  # PTB keeps Telegram's "Forbidden: " prefix
        message = exc.message if exc.message.lower().startswith("forbidden") else f"Forbidden: {exc.message}"
        return SendOutcome(OutcomeKind.FAILED, reason=_clean(message))
    if isinstance(exc, BadRequest):  # PTB strips Telegram's "Bad Request: " prefix
        return SendOutcome(OutcomeKind.FAILED, reason=_clean(f"Bad Request: {exc.message}"))
    if isinstance(exc, NetworkError):
        cause = exc.__cause__
        if isinstance(cause, NOT_SENT_CAUSES):
            return SendOutcome(OutcomeKind.NOT_SENT, reason=_clean(f"not sent: {type(cause).__name__}: {cause}"))
        if isinstance(cause, RuntimeError) and "not initialized" in str(cause):
            # The transport raises this before any I/O once the client was shut down.
            return SendOutcome(OutcomeKind.NOT_SENT, reason="not sent: the HTTP client is closed")
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        return SendOutcome(OutcomeKind.UNKNOWN, reason=_clean(f"may have been sent: {type(exc).__name__} ({detail})"))
    if isinstance(exc, TelegramError):
        causes = _cause_chain(exc)
        detail = f" ({type(causes[0]).__name__})" if causes else ""
        return SendOutcome(OutcomeKind.UNKNOWN,
                           reason=_clean(f"may have been sent: {type(exc).__name__}: {exc.message}{detail}"))
    return SendOutcome(OutcomeKind.UNKNOWN,
                       reason=_clean(f"may have been sent: unexpected {type(exc).__name__}: {exc}"))


def _cut_utf16(text: str, limit: int) -> str:
    """At most `limit` UTF-16 code units (how Telegram counts), never splitting a character."""
    if len(text) <= limit // 2 or len(text.encode("utf-16-le")) // 2 <= limit:
        return text
    out, used = [], 0
    for ch in text:
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            break
        out.append(ch)
    return "".join(out)


# Every text may carry outside content (the model's words, a supplier's reason, an item name), and a link preview
# would fetch and show what such a link points to: previews are off for every message and edit (C21).
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


class TelegramSender:
    """Sends report parts and the small best-effort calls around them."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot

    @property
    def bot(self) -> Bot:
        return self._bot

    async def send(
        self, chat_id: int, text: str, asks: Sequence[Ask] = (), *, reply_to: int | None = None,
    ) -> SendOutcome:
        """Send `text`, HTML made by bot/relays/render.py, in HTML parse mode with the inline keyboard of what it
        `asks` (bot/relays/render.py `keyboard`; the common asks' keyboard when it asks nothing). With `reply_to`
        the message quotes that message of the chat, and still goes out if it was deleted
        (`allow_sending_without_reply`: a deleted original is no refusal).

        Exactly one HTTP request, never a retry. Returns an outcome; `asyncio.CancelledError` propagates (see the
        module docstring).
        """
        reply = (ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
                 if reply_to is not None else None)
        try:
            message = await self._bot.send_message(chat_id=chat_id, text=text, parse_mode=ParseMode.HTML,
                                                   reply_markup=keyboard(asks) or COMMON_ASKS, reply_parameters=reply,
                                                   link_preview_options=NO_PREVIEW)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            outcome = classify(exc)
            outcome = SendOutcome(outcome.kind, outcome.receipt, outcome.retry_after,
                                  _clean(outcome.reason, self._bot.token))
            log = _log.error if outcome.kind is OutcomeKind.CONFIG_FAULT else _log.info
            log("send to chat %s: %s (%s)", chat_id, outcome.kind, outcome.reason)
            return outcome
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message.message_id))

    async def edit(
        self, chat_id: int, message_id: int, text: str, asks: Sequence[Ask] = ()
    ) -> SendOutcome:
        """Edit a message the bot sent (a card updated in place): `text` is HTML, `asks` what it asks now (none
        removes its inline keyboard). The same outcomes as a send (C7), the receipt being the edited message's id;
        Telegram's 400 "message is not modified" means the content is already there (a lost reply's edit was
        applied), so it is `confirmed`. Exactly one HTTP request."""
        try:
            await self._bot.edit_message_text(text=text, chat_id=chat_id, message_id=message_id,
                                              parse_mode=ParseMode.HTML, reply_markup=keyboard(asks),
                                              link_preview_options=NO_PREVIEW)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            if isinstance(exc, BadRequest) and "message is not modified" in exc.message.lower():
                return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id), reason="already as requested")
            outcome = classify(exc)
            outcome = SendOutcome(outcome.kind, outcome.receipt, outcome.retry_after,
                                  _clean(outcome.reason, self._bot.token))
            log = _log.error if outcome.kind is OutcomeKind.CONFIG_FAULT else _log.info
            log("edit of message %s in chat %s: %s (%s)", message_id, chat_id, outcome.kind, outcome.reason)
            return outcome
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id))

    async def react(self, chat_id: int, message_id: int, emoji: str) -> SendOutcome:
        """Set `emoji` as the bot's reaction on the owner's message (a receipt, C19): exactly one HTTP request, the
        outcomes of a send. Setting the same reaction again changes nothing, so the caller may retry any outcome but
        a definite refusal."""
        try:
            await self._bot.set_message_reaction(chat_id=chat_id, message_id=message_id, reaction=emoji)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            outcome = classify(exc)
            return SendOutcome(outcome.kind, outcome.receipt, outcome.retry_after,
                               _clean(outcome.reason, self._bot.token))
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message_id))

    async def draft(self, chat_id: int, draft_id: int, text: str) -> bool:
        """Best effort progress draft (C20, `sendMessageDraft`, private chats): True when Telegram took it; a failure
        is logged at debug and changes nothing."""
        try:
            return bool(await self._bot.send_message_draft(chat_id=chat_id, draft_id=draft_id, text=text))
        except Exception as exc:
            self._best_effort_failed("sendMessageDraft", exc)
            return False

    async def send_photo(self, chat_id: int, photo: bytes, caption: str) -> SendOutcome:
        """Send a picture (a report's photo part) with its caption, HTML made by bot/relays/render.py: one multipart
        request, never a retry, the same outcomes as a send (C7); the receipt is the photo message's id."""
        try:
            message = await self._bot.send_photo(chat_id=chat_id, photo=photo, caption=caption,
                                                 parse_mode=ParseMode.HTML)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            outcome = classify(exc)
            outcome = SendOutcome(outcome.kind, outcome.receipt, outcome.retry_after,
                                  _clean(outcome.reason, self._bot.token))
            log = _log.error if outcome.kind is OutcomeKind.CONFIG_FAULT else _log.info
            log("photo to chat %s: %s (%s)", chat_id, outcome.kind, outcome.reason)
            return outcome
        return SendOutcome(OutcomeKind.CONFIRMED, receipt=str(message.message_id))

    async def typing(self, chat_id: int) -> None:
        """Best effort "typing…" indicator."""
        try:
            await self._bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING)
        except Exception as exc:
            self._best_effort_failed("sendChatAction", exc)

    async def answer_callback(self, callback_id: str, text: str) -> None:
        """Best effort answer to a button press (stops the client's progress bar); text cut to 200 UTF-16 units."""
        try:
            await self._bot.answer_callback_query(callback_query_id=callback_id, text=_cut_utf16(text, 200) or None)
        except Exception as exc:
            self._best_effort_failed("answerCallbackQuery", exc)

    def _best_effort_failed(self, method: str, exc: Exception) -> None:
        reason = _clean(f"{type(exc).__name__}: {exc}", self._bot.token)
        if isinstance(exc, InvalidToken):
            _log.warning("%s failed: %s", method, reason)
        else:
            _log.debug("%s failed (best effort, ignored): %s", method, reason)
