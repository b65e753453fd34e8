"""The one renderer of everything the bot sends to Telegram (C7): a stored part, plain text, becomes HTML, and
what a report asks the owner (store/asks.py `Ask`) becomes its inline keyboard (`keyboard`); a message that asks
nothing carries the persistent keyboard of the common asks (`COMMON_ASKS`).

Why here, at send time, and not when the report is made: a report and its delivery parts are stored as the plain
text the owner reads (immutable, C6/C7; readable in `shopbot reports`, /pending previews and notices). C13's
replacement of numbers no record backs runs on the raw prose when the report is made (worker/figures.py), so it never
sees an HTML entity (`&#x27;` holds digits it would replace); the escaping here runs after it, on the whole part.
Escaping changes no visible character, so the part limit, counted on the plain text in UTF-16 code units as
Telegram counts the visible text (store/shared/outbox.py `split_parts`), holds for the rendered part too, and a part can
never be cut inside a tag or an entity: the tags and entities are made per part, after the split.

Rules:
- every character of the part is escaped with `html.escape(..., quote=True)`: whatever came from records (item names
  such as `a<b>`) or the model (`<`, `&`, `"`) is shown as typed, and no tag or URL is ever taken from it;
- the only markup is made here from what the store added itself: the part's identity on its last line
  (`r12.1` or `r12.1 (2/3)`, appended by `split_parts`) becomes `<code>r12.1 (2/3)</code>`, small and last;
- the Figures block C13 appends (worker/figures.py `render_report`: a `Figures:` line then `- label: value` lines,
  last in the body) is folded into one `<blockquote expandable>`, so on a phone the answer stays on the screen
  and the figures open with a tap; its text is escaped like the rest. A part holding only the block's tail (a long
  report split inside it) is left unfolded, never guessed at;
- a lone surrogate (not a character, Telegram refuses it as bad UTF-8) becomes U+FFFD.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, ReplyKeyboardMarkup

from store import Ask, asks

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_IDENTITY = re.compile(r"\n\n(r\d+\.\d+(?: \(\d+/\d+\))?)\Z")
_FIGURES = re.compile(r"(?:\A|\n\n)(Figures:(?:\n- [^\n]*)+)\Z")


def render_part(text: str, report_id: str | None = None) -> str:
    """HTML for one stored part. With `report_id`, a last line `<report_id>` or `<report_id> (i/n)` is the
    identity the store appended and is set in `<code>`; nothing else gets a tag."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    match = _IDENTITY.search(text)
    if match and report_id and (match.group(1) == report_id or match.group(1).startswith(f"{report_id} (")):
        body = text[:match.start()]
        return f"{fold_figures(body)}\n\n<code>{escape(match.group(1))}</code>"
    return fold_figures(text)


def fold_figures(body: str) -> str:
    """The body escaped, its trailing Figures block (if any) in one expandable blockquote."""
    figures = _FIGURES.search(body)
    if figures is None:
        return escape(body)
    prose = body[:figures.start()]
    quote = f"<blockquote expandable>{escape(figures.group(1))}</blockquote>"
    return f"{escape(prose)}\n\n{quote}" if prose else quote


def escape(text: str) -> str:
    """`<`, `>`, `&`, `"` and `'` as entities (Telegram's HTML mode accepts numeric entities and &lt; &gt; &amp;
    &quot;)."""
    return html.escape(text, quote=True)


# The common asks under the chat (Stock, Low, Brief, Reorder, Pending), sent with every message that carries no
# inline buttons (a message holds one keyboard or the other), so the keyboard stays even after a chat is cleared.
COMMON_ASKS = ReplyKeyboardMarkup([list(row) for row in asks.COMMON], is_persistent=True, resize_keyboard=True)


def keyboard(questions: Sequence[Ask]) -> InlineKeyboardMarkup | None:
    """One row of buttons per ask, one button per answer: the answer's words (followed by the ask's subject when
    it is named: `Approve #2`) and `<verb>:<nonce>` as the press's data. None when the report asks nothing."""
    if not questions:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(text=label, callback_data=data) for label, data in row]
                                 for row in (answers(ask) for ask in questions)])


def answers(ask: Ask) -> list[tuple[str, str]]:
    """(label, callback data) for each answer the ask offers."""
    words = dict(asks.CHOICES[ask.kind])
    return [(f"{words[verb]} {ask.subject}" if ask.named else words[verb], asks.press_data(verb, ask.nonce))
            for verb in ask.verbs]
