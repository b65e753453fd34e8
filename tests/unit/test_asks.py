"""What the owner is asked is one grammar (store/asks.py): an Ask's buttons (rendered by bot/relays/render.py) and the
press's verbs come from it, spelled as the prompts and buttons already stored are (no migration; rows stored as
buttons read back as asks), and no other module spells a callback."""
from __future__ import annotations

import json
import re

import pytest

from bot.relays.render import answers
from store import Ask, asks
from tests.support import ROOT

# the verbs a press could carry before the grammar moved (producers/telegram/owner.py): rows stored then still decide
STORED_VERBS = {"unknown": {"resend", "delivered"}, "forget": {"forget", "keep"}, "proposal": {"approve", "reject"},
                "order": {"received", "not_arrived"}, "setting": {"apply", "keep"}}


def test_the_answers_are_the_buttons_already_stored():
    assert asks.VERBS == STORED_VERBS
    assert answers(Ask("proposal", "n1", "2", ("approve", "reject"), named=True)) == [
        ("Approve #2", "approve:n1"), ("Reject #2", "reject:n1")]
    assert answers(Ask("proposal", "n1", "2", ("reject", "approve"))) == [("Approve", "approve:n1"),
                                                                          ("Reject", "reject:n1")]
    assert answers(Ask("order", "n2", "3", ("received",))) == [("Received", "received:n2")]
    assert answers(Ask("order", "n2", "3", ("received", "not_arrived"), named=True)) == [
        ("Received #3", "received:n2"), ("Not arrived #3", "not_arrived:n2")]
    assert answers(Ask("unknown", "n3", "r9", ("resend", "delivered"), named=True)) == [
        ("Resend r9", "resend:n3"), ("I have it r9", "delivered:n3")]
    assert answers(Ask("setting", "n4", "milk:7:15", ("apply", "keep"), named=True)) == [
        ("Apply milk", "apply:n4"), ("Keep milk", "keep:n4")]
    assert answers(Ask("forget", "n5", "tg:1", ("forget", "keep"))) == [("Forget it", "forget:n5"),
                                                                          ("Keep it", "keep:n5")]
    assert asks.parse_press("approve:n1") == ("approve", "n1") and asks.parse_press("junk") == ("junk", "")


def test_an_answer_a_question_does_not_have_is_refused():
    with pytest.raises(ValueError, match="not answered by"):
        Ask("order", "n", "2", ("approve",))
    with pytest.raises(ValueError, match="not answered by"):
        Ask("order", "n", "2", ())
    with pytest.raises(KeyError):
        Ask("lottery", "n", "2", ("approve",))


# every row the grammar made before reports kept their asks, as stored in `reports.buttons`: [label, data] rows
OLD_ROWS = [
    [["Approve", "approve:n1"], ["Reject", "reject:n1"]],
    [["Approve #12", "approve:n2"], ["Reject #12", "reject:n2"]],
    [["Received", "received:n3"]],
    [["Received #4", "received:n4"], ["Not arrived #4", "not_arrived:n4"]],
    [["Resend", "resend:n5"], ["I have it", "delivered:n5"]],
    [["Resend r12.1", "resend:n6"], ["I have it r12.1", "delivered:n6"]],
    [["Apply dark chocolate", "apply:n7"], ["Keep dark chocolate", "keep:n7"]],
    [["Forget it", "forget:n8"], ["Keep it", "keep:n8"]],
]


def test_rows_stored_before_asks_read_back_as_the_asks_they_were_made_from():
    """A report stored as label/data rows still renders: the same labels and data reach Telegram."""
    read = asks.from_json(json.dumps(OLD_ROWS))
    assert [(a.kind, a.nonce, a.target, a.named) for a in read] == [
        ("proposal", "n1", "", False), ("proposal", "n2", "12", True), ("order", "n3", "", False),
        ("order", "n4", "4", True), ("unknown", "n5", "", False), ("unknown", "n6", "r12.1", True),
        ("setting", "n7", "dark chocolate", True), ("forget", "n8", "", False)]
    assert [[list(button) for button in answers(a)] for a in read] == OLD_ROWS


def test_asks_round_trip_through_their_stored_form():
    made = (Ask("proposal", "n1", "2", ("approve", "reject"), named=True), Ask("order", "n2", "3", ("received",)),
            Ask("setting", "n3", "a:b:7:15", ("apply", "keep"), named=True))
    assert asks.from_json(asks.to_json(made)) == made
    assert asks.to_json(()) is None and asks.from_json(None) == ()
    assert made[2].subject == "a:b"          # an item name may hold a colon: only the two numbers are cut


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
