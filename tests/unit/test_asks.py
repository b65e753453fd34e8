"""What the owner is asked is one grammar (store/asks.py): the buttons and the press's verbs come from it, spelled as
the prompts and buttons already stored are (no migration), and no other module spells a callback."""
from __future__ import annotations

import re

import pytest

from store import asks
from tests.support import ROOT

# the verbs a press could carry before the grammar moved (producers/telegram/owner.py): rows stored then still decide
STORED_VERBS = {"unknown": {"resend", "delivered"}, "forget": {"forget", "keep"}, "proposal": {"approve", "reject"},
                "order": {"received", "not_arrived"}, "setting": {"apply", "keep"}}


def test_the_answers_are_the_buttons_already_stored():
    assert asks.VERBS == STORED_VERBS
    assert asks.answers("proposal", "n1", "#2") == [("Approve #2", "approve:n1"), ("Reject #2", "reject:n1")]
    assert asks.answers("proposal", "n1") == [("Approve", "approve:n1"), ("Reject", "reject:n1")]
    assert asks.answers("order", "n2", verbs=("received",)) == [("Received", "received:n2")]
    assert asks.answers("unknown", "n3", "r9") == [("Resend r9", "resend:n3"), ("I have it r9", "delivered:n3")]
    assert asks.answers("setting", "n4", "milk") == [("Apply milk", "apply:n4"), ("Keep milk", "keep:n4")]
    assert asks.answers("forget", "n5") == [("Forget it", "forget:n5"), ("Keep it", "keep:n5")]
    assert asks.parse_press("approve:n1") == ("approve", "n1") and asks.parse_press("junk") == ("junk", "")


def test_an_answer_a_question_does_not_have_is_refused():
    with pytest.raises(ValueError, match="not answered by"):
        asks.answers("order", "n", verbs=("approve",))
    with pytest.raises(KeyError):
        asks.answers("lottery", "n")


_ALL_VERBS = "|".join(sorted({v for vs in STORED_VERBS.values() for v in vs}))
CALLBACK = re.compile(r"""f["'](?:""" + _ALL_VERBS + r"""):\{""")


def spelled_callbacks(text: str) -> list[str]:
    return CALLBACK.findall(text)


def test_no_module_spells_a_callback_outside_the_grammar():
    found = {str(p.relative_to(ROOT)): hits for package in ("bot", "producers", "worker")
             for p in sorted((ROOT / package).rglob("*.py")) if (hits := spelled_callbacks(p.read_text()))}
    assert found == {}


def test_a_planted_callback_is_found():
    """Negative control for the check above."""
    assert spelled_callbacks('row = [("Approve", f"approve:{nonce}")]') == ['f"approve:{']
