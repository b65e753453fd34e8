"""The owner's phone, end to end (issue 28): a reply's figures folded in one expandable quote, a stock reply short
enough to read outside it, no id listed as a figure, and the product's own texts (figures, cards, approvals,
/pending) in the shop's money with counts that agree with their unit."""
from __future__ import annotations

import html
import re

from bot.sandbox.local_setup import OWNER_ID, local_product

FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0"}
QUOTE = re.compile(r"<blockquote expandable>(.*?)</blockquote>", re.DOTALL)
BAD = re.compile(r"\bcents?\b|\b1 (?:tubs|boxes|bottles)\b|\bid: \d|open proposal: \d|(?<!on )order: \d")


def outside_quote(message_html: str) -> list[str]:
    return [line for line in html.unescape(QUOTE.sub("", message_html)).splitlines() if line.strip()]


def product_texts(message_html: str) -> list[str]:
    """What the product wrote itself in a message: its figures (the prose outside is the model's)."""
    return [html.unescape(block) for block in QUOTE.findall(message_html)]


async def test_the_owner_reads_folded_figures_money_and_units_as_a_phone_shows_them():
    async with local_product(FAST) as run:
        await run.api.wait_for(lambda: len([m for m in run.owner_messages() if m.text.startswith("Order proposal")])
                               >= 2, timeout=15)
        cards = {("vanilla" if "vanilla" in m.text.splitlines()[0] else "strawberry"): m
                 for m in run.owner_messages() if m.text.startswith("Order proposal")}
        run.seen = len(run.owner_messages())
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        [stock] = await run.replies(1)
        assert stock.html is not None and stock.html.count("<blockquote expandable>") == 1
        assert len(outside_quote(stock.html)) <= 6                     # the identity line included
        assert any(e["type"] == "expandable_blockquote" for e in stock.entities)
        run.api.post_message(OWNER_ID, OWNER_ID, "how much strawberry")
        [strawberry] = await run.replies(1)
        # the strawberry card's figures and the stock answer's: "1 tub", money, no id
        folded = [text for m in (cards["strawberry"], cards["vanilla"], stock, strawberry)
                  for text in product_texts(m.html or "")]
        assert any("strawberry on hand: 1 tub" in text for text in folded)
        assert not any(BAD.search(text) for text in folded), folded
        # an approval answer and /pending, in money
        data = next(b["callback_data"] for row in cards["vanilla"].reply_markup["inline_keyboard"] for b in row
                    if b["text"] == "Approve")
        run.api.post_callback(OWNER_ID, OWNER_ID, data, cards["vanilla"].message_id)
        await run.api.wait_for(lambda: any("Approved #" in t for t in run.owner_texts()), timeout=15)
        run.api.post_message(OWNER_ID, OWNER_ID, "/pending")
        await run.api.wait_for(lambda: any("Proposals awaiting your decision" in t for t in run.owner_texts()),
                               timeout=15)
        approved = next(t for t in run.owner_texts() if "Approved #" in t)
        pending = next(t for t in run.owner_texts() if "Proposals awaiting your decision" in t)
        assert "6 tubs of vanilla for $18.00" in approved and "for $8.00" in pending
        assert not BAD.search(approved) and not BAD.search(pending)
        assert [a["text"] for a in run.api.callback_answers if a["text"] and "Approved" in a["text"]]
        assert not any(BAD.search(a["text"] or "") for a in run.api.callback_answers)
    # negative control: the check catches what the owner used to read
    assert BAD.search("Approved #2: 6 vanilla for 1800 cents") and BAD.search("- strawberry draft id: 1")
    assert BAD.search("- strawberry on hand: 1 tubs") and BAD.search("- vanilla order: 2")
    assert not BAD.search("- vanilla on order: 0 tubs")
