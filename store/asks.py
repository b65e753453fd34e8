"""What the owner is asked, in one grammar (C8): each kind of question (a prompt's kind) with its answers, each
answer a verb and the words on its button. A press carries `<verb>:<nonce>`, spelled as the prompts and buttons
already stored are, so nothing is migrated.

The worker and the producers ask with `Transaction.ask`, which stores the prompt and returns an `Ask`: the intent
("approve or reject proposal 2"), not its buttons. A report carries its asks; bot/relays/render.py `keyboard` is the
one place that turns them into Telegram's buttons. A press is decided in producers/telegram/owner.py against `VERBS`.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# kind -> (verb, label) for each answer, in the order of the buttons
CHOICES: dict[str, tuple[tuple[str, str], ...]] = {
    "proposal": (("approve", "Approve"), ("reject", "Reject")),
    "order": (("received", "Received"), ("not_arrived", "Not arrived")),
    "unknown": (("resend", "Resend"), ("delivered", "I have it")),
    "forget": (("forget", "Forget it"), ("keep", "Keep it")),
    "setting": (("apply", "Apply"), ("keep", "Keep")),
}
# the common asks, one tap each, in the persistent keyboard under the chat: a tap sends its label as a message
COMMON = (("Stock", "Low", "Brief"), ("Reorder", "Pending"))
VERBS: dict[str, frozenset[str]] = {kind: frozenset(verb for verb, _ in choices) for kind, choices in CHOICES.items()}
_SETTING = re.compile(r"(.*):-?\d+:-?\d+\Z", re.DOTALL)     # a setting's target: `item:reorder point:target`


@dataclass(frozen=True)
class Ask:
    """One question put to the owner: the prompt `nonce` (stored with its kind and target, C8) and the answers
    offered. `named`: the buttons say which target they answer (`Approve #2`), for a message asking several."""
    kind: str
    nonce: str
    target: str              # a proposal or order id, a report id, `item:point:target`, a chat's session
    verbs: tuple[str, ...]   # the answers offered, in the grammar's order
    named: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "verbs", offered(self.kind, self.verbs))

    @property
    def subject(self) -> str:
        """How a named ask names its target: `#2` (a proposal, an order), `r9` (a reply), `milk` (a setting)."""
        if self.kind in ("proposal", "order"):
            return f"#{self.target}"
        if self.kind == "setting" and (item := _SETTING.match(self.target)):
            return item.group(1)
        return self.target


def offered(kind: str, verbs: Sequence[str] | None = None) -> tuple[str, ...]:
    """The answers `verbs` (all of the kind's when None) in the grammar's order; a kind or a verb the grammar does
    not have is refused (KeyError, ValueError)."""
    order = [verb for verb, _ in CHOICES[kind]]
    if verbs is None:
        return tuple(order)
    if not verbs or set(verbs) - VERBS[kind]:
        raise ValueError(f"{kind} is not answered by {sorted(set(verbs) - VERBS[kind]) or 'nothing'}")
    return tuple(sorted(verbs, key=order.index))


def order_verbs(late: bool) -> tuple[str, ...] | None:
    """An order on order is answered Received; once its lead time passed (`late`), Not arrived too (None: all)."""
    return None if late else ("received",)


def press_data(verb: str, nonce: str) -> str:
    return f"{verb}:{nonce}"


def parse_press(data: str) -> tuple[str, str]:
    """(verb, nonce) of a press's callback data; ('', '') parts when it has none (decided as no longer valid)."""
    verb, _, nonce = data.partition(":")
    return verb, nonce


def to_json(asks: Sequence[Ask]) -> str | None:
    """The asks as stored in `reports.buttons` (None for none)."""
    return json.dumps([{"kind": a.kind, "nonce": a.nonce, "target": a.target, "verbs": list(a.verbs),
                        "named": a.named} for a in asks]) if asks else None


def from_json(text: str | None) -> tuple[Ask, ...]:
    """The asks of a stored report: objects as `to_json` writes them, or rows of [label, callback data] as reports
    stored before asks were kept hold them (read back as the ask they were made from)."""
    return tuple(_stored(entry) for entry in json.loads(text)) if text else ()


def _stored(entry: Any) -> Ask:
    if isinstance(entry, dict):
        return Ask(entry["kind"], entry["nonce"], entry["target"], tuple(entry["verbs"]), entry["named"])
    return _from_row([(str(label), str(data)) for label, data in entry])


def _from_row(row: Sequence[tuple[str, str]]) -> Ask:
    """A row of buttons stored as (label, data): every button of a row answers one prompt, so its verbs name the
    kind (only `keep` is shared, and never alone) and its first label, past the verb's words, names the target.
    The target of an unnamed row was never stored: it is ''."""
    pressed = [parse_press(data) for _, data in row]
    verbs = tuple(verb for verb, _ in pressed)
    [kind] = [k for k in CHOICES if set(verbs) <= VERBS[k]]
    words = dict(CHOICES[kind])[verbs[0]]
    subject = row[0][0][len(words):].strip()
    target = subject.removeprefix("#") if kind in ("proposal", "order") else subject
    return Ask(kind, pressed[0][1], target, verbs, named=bool(subject))
