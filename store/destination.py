"""Where a report goes, as one value: the grammar of a destination (`tg:<chat_id>` is a Telegram chat; anything
else, such as `supplier:<name>`, is stored only) lives here and nowhere else.

A `Destination` is a `str` (the text stored in `reports.destination`, `work.session` and the rows already written),
so it passes through the store unchanged; code asks it `chat_id` instead of cutting a prefix.
"""
from __future__ import annotations

TELEGRAM = "tg:"


class Destination(str):
    """A report's destination. `Destination.telegram(1001)` is the owner chat 1001; `Destination(text).chat_id`
    is the Telegram chat of a stored destination, or None for one that is stored only."""

    @classmethod
    def telegram(cls, chat_id: int) -> Destination:
        if isinstance(chat_id, bool) or not isinstance(chat_id, int):
            raise TypeError(f"a Telegram chat id is an int, not {type(chat_id).__name__}")
        return cls(f"{TELEGRAM}{chat_id}")

    @classmethod
    def of(cls, text: str | None) -> Destination | None:
        """The stored text as a Destination (None stays None: a report with nowhere to go)."""
        return None if text is None else cls(text)

    @property
    def chat_id(self) -> int | None:
        """The Telegram chat this destination is, or None when it is not a Telegram chat (or malformed)."""
        if not self.startswith(TELEGRAM):
            return None
        number = self[len(TELEGRAM):]
        digits = number[1:] if number.startswith("-") else number      # groups have negative ids
        return int(number) if digits.isascii() and digits.isdigit() else None


def telegram_chat(destination: str | None) -> int | None:
    """The Telegram chat of a stored destination, or None: the one way to read a `tg:` destination."""
    return None if destination is None else Destination(destination).chat_id
