"""Routing of Telegram updates: authentication at the adapter (C3), then admission of each update inside the
batch's one transaction (C1).

Strangers, groups, bots and malformed updates are counted and logged by id, their text never stored, and create no
work. Each update is routed in a savepoint, so one that fails is dropped and counted without undoing its batch.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from telegram import Bot, Chat, Update, User

from store import Admission, AdmissionTx, Destination, Occurrence, ReportDraft, Transaction, WorkKind

from . import owner

log = logging.getLogger("shopbot.ingress")

ALLOWED_UPDATES = ["message", "edited_message", "callback_query", "my_chat_member"]
MAX_TEXT = 4096          # Telegram's own limit; anything longer is not a real message


@dataclass
class BatchResult:
    outcomes: dict[str, int] = field(default_factory=dict)
    presses: list[tuple[owner.Press, owner.PressResult]] = field(default_factory=list)

    def bump(self, key: str) -> None:
        self.outcomes[key] = self.outcomes.get(key, 0) + 1

    @property
    def stock_changed(self) -> bool:
        """A press of the batch moved what the stock watcher compares (an applied reorder point)."""
        return any(pressed.stock_changed for _, pressed in self.presses)


def parse(raw: object, bot: Bot) -> Update | None:
    """One update alone: a malformed one must never stop ingestion (docs/contracts.md, Facts at the edges). PTB does
    not check types, so the fields that make an identity are checked here: integer ids, string texts and button
    data."""
    if not isinstance(raw, dict) or not _is_int(raw.get("update_id")):
        return None
    cleaned = _clean(raw)
    if not isinstance(cleaned, dict):   # it is: _clean keeps a dict a dict (this narrows the type)
        return None
    try:
        update = Update.de_json(cleaned, bot)
    except Exception:
        return None
    return update if update is not None and _well_formed(update) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _clean(value: object) -> object:
    """Lone surrogates (valid JSON escapes, not valid text) become U+FFFD, so no text breaks the database."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _well_formed(update: Update) -> bool:
    for message in (update.message, update.edited_message):
        if message is not None:
            return (_is_int(message.message_id) and message.chat is not None and _is_int(message.chat.id)
                    and (message.from_user is None or _is_int(message.from_user.id))
                    and (message.text is None or isinstance(message.text, str)))
    query = update.callback_query
    if query is not None:
        return (isinstance(query.id, str) and bool(query.id) and query.from_user is not None
                and _is_int(query.from_user.id) and (query.data is None or isinstance(query.data, str))
                and (query.message is None or (_is_int(query.message.message_id)
                                               and _is_int(query.message.chat.id))))
    if update.my_chat_member is not None:
        return update.my_chat_member.chat is not None and _is_int(update.my_chat_member.chat.id)
    return True


class Router:
    """Turns parsed updates into admissions inside one transaction."""

    def __init__(self, owner_ids: Callable[[], frozenset[int]], rules: owner.ApprovalRules | None = None,
                 receipt: str = "") -> None:
        self.owner_ids = owner_ids
        self.rules = rules or owner.ApprovalRules()
        self.receipt = receipt      # C19: the reaction for each admitted owner message; "" for none

    def _sender_ok(self, tx: Transaction, result: BatchResult, update_id: int, chat: Chat | None,
                   user: User | None) -> bool:
        """C3: private chats of allow-listed users whose chat id equals the sender id, never bots."""
        if user is None or chat is None:
            reason = "no_sender"
        elif user.is_bot:
            reason = "bot"
        elif chat.type != "private" or chat.id != user.id:
            reason = "not_private"
        elif user.id not in self.owner_ids():
            reason = "stranger"
        else:
            return True
        tx.tally(reason)
        result.bump(reason)
        log.warning("update refused update_id=%s reason=%s sender=%s chat=%s", update_id, reason,
                    getattr(user, "id", None), getattr(chat, "id", None))
        return False

    def route(self, tx: Transaction, parsed: Sequence[tuple[int | None, Update | None]]) -> BatchResult:
        result = BatchResult()
        for update_id, update in parsed:
            failure = tx.isolated(partial(self._route_one, tx, result, update)) if update is not None else None
            if update is None or failure is not None:
                # a malformed update, or one this code could not handle: counted and confirmed as dropped,
                # never allowed to stop ingestion; its own writes were undone
                tx.tally("malformed")
                result.bump("malformed")
                log.warning("malformed update dropped update_id=%s%s", update_id,
                            f" ({type(failure).__name__})" if failure is not None else "")
        return result

    def _route_one(self, tx: Transaction, result: BatchResult, update: Update) -> None:
        if update.message is not None:
            message = update.message
            if not self._sender_ok(tx, result, update.update_id, message.chat, message.from_user):
                return
            self._message(tx, result, message.chat.id, message.message_id, message.text)
        elif update.edited_message is not None:
            message = update.edited_message
            if not self._sender_ok(tx, result, update.update_id, message.chat, message.from_user):
                return
            edit_date = int(message.edit_date.timestamp()) if message.edit_date else 0
            source = f"edit:{message.chat.id}:{message.message_id}:{edit_date}"
            result.bump(owner.admit_reply(tx, source, message.chat.id, "edited", owner.EDITED).outcome.value)
        elif update.callback_query is not None:
            query = update.callback_query
            chat = query.message.chat if query.message is not None else None
            if not self._sender_ok(tx, result, update.update_id, chat, query.from_user) or chat is None:
                return
            press = owner.Press(query.id, chat.id, query.from_user.id, query.data or "",
                                query.message.message_id if query.message is not None else None)
            pressed = owner.admit_press(tx, press, self.rules)
            result.presses.append((press, pressed))
            result.bump(pressed.admission.outcome.value)
        elif update.my_chat_member is not None:
            member = update.my_chat_member
            status = member.new_chat_member.status if member.new_chat_member else "unknown"
            tx.tally(f"chat_member_{status}")
            result.bump("chat_member")
            log.warning("chat member update chat=%s status=%s (a blocked bot cannot deliver to this chat)",
                        member.chat.id, status)
        else:
            tx.tally("unsupported_update")
            result.bump("unsupported")
            log.info("unsupported update kind dropped update_id=%s", update.update_id)

    def _message(self, tx: Transaction, result: BatchResult, chat_id: int, message_id: int, text: str | None) -> None:
        source = f"tg:{chat_id}:{message_id}"
        keyboard = owner.KEYBOARD_COMMANDS.get(text.strip().lower()) if text is not None else None
        if text is None:
            outcome = owner.admit_reply(tx, source, chat_id, "(not text)", owner.NOT_TEXT).outcome
        elif text.startswith("/") or keyboard:
            command = keyboard or (text[1:].split(maxsplit=1)[0].split("@")[0].lower() if len(text) > 1 else "")
            if command == "brief":
                outcome = self._agent(tx, chat_id, source, owner.BRIEF_PROMPT)
            else:
                outcome = owner.admit_command(tx, source, chat_id, text[:MAX_TEXT], command, self.rules).outcome
        else:
            outcome = self._agent(tx, chat_id, source, text[:MAX_TEXT])
        if outcome is Admission.ACCEPTED and self.receipt:
            # C19: the receipt is an outbox row of this same transaction, set later by the receipt relay (only the
            # relays send): stored means a receipt comes; a duplicate, a refusal or a rollback means none
            tx.add_receipt(chat_id, message_id, self.receipt)
        result.bump(outcome.value)

    def _agent(self, tx: AdmissionTx, chat_id: int, source: str, text: str) -> Admission:
        chat = Destination.telegram(chat_id)        # the owner's session and where its answers go
        admitted = tx.admit(Occurrence(source, chat, text, WorkKind.AGENT, chat))
        if admitted.outcome is Admission.REFUSED:
            log.warning("refused for capacity chat=%s source=%s", chat_id, source)
            busy = ("I'm busy right now and could not take your message. Nothing was started; please send it "
                    "again in a few minutes.")
            # at most one "busy" notice per chat per minute: the identity carries the minute
            tx.admit_answered(Occurrence(f"notice:busy:{chat_id}:{tx.at:%Y-%m-%dT%H:%M}", "notice:busy", busy,
                                         WorkKind.NOTICE, chat),
                              lambda t, work_id: ReportDraft(busy, destination=chat))
        elif admitted.outcome is Admission.CONFLICT:
            log.error("conflicting redelivery source=%s: kept the first, refused this one", source)
        return admitted.outcome
