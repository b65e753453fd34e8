"""A spending limit's refusal reads as the owner reads money, wherever it is shown: the store records its kind and
amounts (PolicyRefusal), and worker/proposals.py words it: the card, the tool result the model reads, the offline
model's reply (English and Spanish). No product text says "cents"; a row refused before migration 0020 keeps its
stored words."""
from __future__ import annotations

import re

from store import LimitKind, Occurrence, Policy, PolicyRefusal, Store, WorkKind
from worker.models.offline import _limit_reason
from worker.money import ShopFormat
from worker.proposals import card_body, limit_words, proposal_line, proposal_message, refusal_text
from worker.tools.registry import typed_result
from worker.tools.shop import OrderArgs, TurnContext, propose_order

from .test_insights import ItemSpec

BAD = re.compile(r"\bcents?\b|\b1 (?:tubs|boxes|bottles)\b")      # what no product text may say (test_wording)
FORMATS = [ShopFormat("USD", "en_US"), ShopFormat("EUR", "de_DE"), ShopFormat("KWD", "en_US"),
           ShopFormat("JPY", "es_ES")]
REFUSALS = [PolicyRefusal(LimitKind.ORDER_LIMIT, 1800, 1500), PolicyRefusal(LimitKind.DAY_LIMIT, 1800, 2000, 1400)]


async def refused(store: Store, policy: Policy, locale: str = "en_US") -> tuple[dict, TurnContext]:
    await store.seed_shop([ItemSpec("vanilla", "tubs", 2, 8, 12, 300)], "shop.toml")
    await store.admit(Occurrence("tg:1:1", "tg:1", "order vanilla", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    ctx = TurnContext(store, claim.run_id, "Dairy Direct", policy=policy, locale=locale, current_call="c1")
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    return await propose_order(OrderArgs(item="vanilla", quantity=6), ctx), ctx


async def test_the_tool_result_the_card_and_the_offline_reply_word_the_refusal_in_money(store: Store):
    result, ctx = await refused(store, Policy("Dairy Direct", order_max_cents=1500))
    assert result["reason"] == "the total of $18.00 is over the limit of $15.00 per order"
    payload, figures = typed_result(result, ShopFormat())
    assert (payload["total"], payload["refusal_limit"], payload["refusal"]) == ("$18.00", "$15.00", "order_limit")
    assert {f.label for f in figures} >= {"vanilla total", "vanilla refusal limit"}    # citable figures (C13)
    assert _limit_reason(payload, "es") == "el total de $18.00 supera el límite de $15.00 por pedido"
    [row] = await store.atomic(lambda tx: tx.run_proposals(ctx.run_id))
    line = proposal_line(row, ShopFormat())
    assert "rejected by the shop's rules: the total of $18.00 is over the limit of $15.00 per order." in line
    euro = proposal_line(row, ShopFormat("EUR", "de_DE"))
    assert "the total of 18,00\u00a0€ is over the limit of 15,00\u00a0€ per order" in euro
    texts = [line, euro, result["reason"], str(payload), card_body([row], "", ShopFormat()),
             proposal_message(row, ShopFormat())]
    assert not any(BAD.search(t) or "1800" in t or "1500" in t for t in texts)


async def test_a_tool_result_in_the_shops_locale(store: Store):
    result, _ = await refused(store, Policy("Dairy Direct", day_max_cents=1000), "de_DE")
    assert result["reason"] == "the total of 18,00\u00a0$ would go over today's limit of 10,00\u00a0$ (0,00\u00a0$ " \
        "already approved)"


def test_every_refusal_in_every_format_and_language_reads_in_money():
    texts = [refusal_text(r, fmt, lang) for r in REFUSALS for fmt in FORMATS for lang in ("en", "es")]
    assert "the total of KWD1.800 is over the limit of KWD1.500 per order" in texts   # 3 places: fils, never cents
    assert ("el total de 1.800\u00a0JPY superaría el límite de hoy de 2.000\u00a0JPY (1.400\u00a0JPY ya aprobado)"
            in texts)                                                  # yen have no minor units
    assert not any(BAD.search(t) for t in texts)
    # negative control: the check catches minor units, as the store wrote them before
    assert BAD.search(limit_words(LimitKind.ORDER_LIMIT, "1800 cents", "1500 cents", "0 cents"))
    assert BAD.search(refusal_text(REFUSALS[0], ShopFormat()).replace("$18.00", "1800 cents"))


async def test_a_row_refused_before_0020_keeps_its_stored_words(store: Store, raw):
    _, ctx = await refused(store, Policy("Dairy Direct", order_max_cents=1500))
    old = "the total of $18.00 is over the limit of $15.00 per order"       # what the store wrote then
    raw.execute("UPDATE proposals SET refusal = NULL, refusal_limit_cents = NULL, refusal_spent_cents = NULL, "
                "reason = ?", (old,))
    [row] = await store.atomic(lambda tx: tx.run_proposals(ctx.run_id))
    assert row.refusal is None
    assert f"rejected by the shop's rules: {old}." in proposal_line(row, ShopFormat())
