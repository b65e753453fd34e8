"""What the owner is asked, in one grammar (C8): each kind of question (a prompt's kind) with its answers, each
answer a verb and the words on its button. A press carries `<verb>:<nonce>`, spelled as the prompts and buttons
already stored are, so nothing is migrated. The worker and the producers ask through `answers`; the press is
decided in producers/telegram/owner.py against `VERBS`.
"""
from __future__ import annotations

from collections.abc import Sequence

# kind -> (verb, label) for each answer, in the order of the buttons
CHOICES: dict[str, tuple[tuple[str, str], ...]] = {
    "proposal": (("approve", "Approve"), ("reject", "Reject")),
    "order": (("received", "Received"), ("not_arrived", "Not arrived")),
    "unknown": (("resend", "Resend"), ("delivered", "I have it")),
    "forget": (("forget", "Forget it"), ("keep", "Keep it")),
    "setting": (("apply", "Apply"), ("keep", "Keep")),
}
VERBS: dict[str, frozenset[str]] = {kind: frozenset(verb for verb, _ in choices) for kind, choices in CHOICES.items()}


def press_data(verb: str, nonce: str) -> str:
    return f"{verb}:{nonce}"


def parse_press(data: str) -> tuple[str, str]:
    """(verb, nonce) of a press's callback data; ('', '') parts when it has none (decided as no longer valid)."""
    verb, _, nonce = data.partition(":")
    return verb, nonce


def answers(kind: str, nonce: str, subject: str = "", *, verbs: Sequence[str] | None = None
            ) -> list[tuple[str, str]]:
    """One keyboard row answering the prompt `nonce` of `kind`: (label, callback data) for each answer (or only
    `verbs`), the label followed by `subject` when one is given (`Approve #2`, `Apply milk`)."""
    chosen = [(verb, label) for verb, label in CHOICES[kind] if verbs is None or verb in verbs]
    if verbs is not None and len(chosen) != len(verbs):
        raise ValueError(f"{kind} is not answered by {sorted(set(verbs) - VERBS[kind])}")
    return [(f"{label} {subject}" if subject else label, press_data(verb, nonce)) for verb, label in chosen]
