"""The owner's words for the store's typed decisions: money in the shop's format, never cents; a count agrees with
its unit ("1 tub"). The store returns what happened (DecisionKind), never a sentence."""
from __future__ import annotations

import re

import pytest

from producers.telegram.wording import decision_text
from store import Decision, DecisionKind, ProposalState, units
from worker.figures import Figure, figure_line
from worker.money import ShopFormat

FMT = ShopFormat("USD", "en_US")
KWD = ShopFormat("KWD", "en_US")
ONE_TUB = dict(item="strawberry", quantity=1, unit="tubs", total_cents=200)
DECISIONS = [Decision(DecisionKind.APPROVED, 2, 7, **ONE_TUB), Decision(DecisionKind.REJECTED, 2, **ONE_TUB),
             Decision(DecisionKind.NOT_FOUND, 9),
             Decision(DecisionKind.NOT_AWAITING, 2, state=ProposalState.APPROVED, **ONE_TUB),
             Decision(DecisionKind.EXPIRED, 2, **ONE_TUB),
             Decision(DecisionKind.OVER_DAY_LIMIT, 2, day_max_cents=1500, reserved_cents=1400, **ONE_TUB)]
BAD = re.compile(r"\bcents?\b|\b1 (?:tubs|boxes|bottles)\b")      # what no product text may say


def test_every_decision_reads_in_money_and_agreeing_units():
    texts = [decision_text(d, FMT.cents) for d in DECISIONS]
    assert texts[0].startswith("Approved #2: 1 tub of strawberry for $2.00.")
    assert "over today's spending limit of $15.00 ($14.00 already approved)" in texts[-1]
    assert not any(BAD.search(t) for t in texts)
    assert decision_text(DECISIONS[0], KWD.cents).startswith("Approved #2: 1 tub of strawberry for KWD0.200")
    # negative control: the words the store used to write are caught by the same check
    assert BAD.search("Approved #2: 1 tubs strawberry for 200 cents.")
    assert BAD.search(decision_text(DECISIONS[0], lambda c: f"{c} cents"))


def test_a_decision_is_typed_and_its_kind_is_a_member():
    assert Decision("approved", 2).kind is DecisionKind.APPROVED and Decision("approved", 2).ok
    assert not Decision(DecisionKind.OVER_DAY_LIMIT, 2).ok
    with pytest.raises(ValueError):
        Decision("Approved #2: 6 vanilla for 1800 cents", 2)


@pytest.mark.parametrize("count,unit,shown", [(1, "tubs", "1 tub"), (6, "tubs", "6 tubs"), (1, "boxes", "1 box"),
                                              (1, "kg", "1 kg"), (2.5, "kg", "2.5 kg"), (1.0, "tubs", "1.0 tub"),
                                              (0, "tubs", "0 tubs"), (3, "", "3")])
def test_counts_agree_with_their_unit(count, unit, shown):
    assert units.count(count, unit) == shown


def test_the_figures_block_says_1_tub():
    assert figure_line(Figure("strawberry on hand", 1, "tubs", "strawberry")) == "- strawberry on hand: 1 tub"
    assert figure_line(Figure("strawberry unit cost", FMT.money_of(200), "", "strawberry"), FMT) == \
        "- strawberry unit cost: $2.00"
