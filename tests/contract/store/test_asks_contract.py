"""What a report asks the owner (store/asks.py `Ask`) on every store: made by `Transaction.ask` with a stored
prompt, kept with the report, handed to the relay under the last part only (`due_deliveries`), and read back from
the message it was sent as (`sent_message`); reports stored as label/data rows, before asks were kept, read back as
the asks they were made from."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from store import Ask, Occurrence, Policy, ReportDraft, Store, Transaction, WorkKind, asks

from .conftest import START
from .test_outbox_contract import SHOP

CHAT = 7


async def finished(store: Store, source: str, draft_of) -> str:  # type: ignore[no-untyped-def]
    """Admit one turn for the chat and finish it with the draft `draft_of(tx)` makes inside the transaction."""
    await store.admit(Occurrence(source, f"tg:{CHAT}", "hello", WorkKind.AGENT, f"tg:{CHAT}"))
    claim = await store.claim("w1")
    assert claim is not None
    made: list[ReportDraft] = []

    def apply(tx: Transaction) -> None:
        made[:] = [draft_of(tx)]
    return (await store.finish(claim, lambda: made[0], apply=apply)).report_id


async def test_a_reports_asks_reach_the_relay_under_its_last_part(store: Store):
    def draft(tx: Transaction) -> ReportDraft:
        return ReportDraft("line\n" * 1500, destination=f"tg:{CHAT}", asks=[
            tx.ask("proposal", "2", CHAT, named=True), tx.ask("order", "3", CHAT, verbs=("received",)),
            tx.ask("setting", "milk:7:15", CHAT, named=True)])
    report_id = await finished(store, "tg:7:1", draft)
    first, = await store.due_deliveries()
    assert first.parts == 2 and first.asks == ()
    await store.mark_sending(first.delivery_id)
    await store.mark_confirmed(first.delivery_id, "101")
    last, = await store.due_deliveries()
    assert [(a.kind, a.target, a.verbs, a.named) for a in last.asks] == [
        ("proposal", "2", ("approve", "reject"), True), ("order", "3", ("received",), False),
        ("setting", "milk:7:15", ("apply", "keep"), True)]

    def prompts(tx: Transaction) -> list[tuple[str, str, int]]:
        found = [tx.prompt(a.nonce) for a in last.asks]
        return [(p.kind, p.target, p.chat_id) for p in found if p is not None and p.decided_at is None]
    assert await store.atomic(prompts) == [("proposal", "2", CHAT), ("order", "3", CHAT),
                                           ("setting", "milk:7:15", CHAT)]
    await store.mark_sending(last.delivery_id)
    await store.mark_confirmed(last.delivery_id, "102")
    sent = await store.atomic(lambda tx: tx.sent_message(CHAT, 102))
    assert sent is not None and sent.report_id == report_id and sent.asks == last.asks


async def test_a_report_that_asks_nothing_carries_no_asks(store: Store):
    await finished(store, "tg:7:2", lambda tx: ReportDraft("just words", destination=f"tg:{CHAT}"))
    only, = await store.due_deliveries()
    assert only.asks == ()


async def test_a_proposals_prompt_expires_with_the_proposal(store: Store):
    """A press on Approve after the proposal's expiry changes nothing: the prompt carries the proposal's expiry."""
    await store.seed_shop(SHOP, "shop.toml")
    await store.admit(Occurrence("tg:7:4", f"tg:{CHAT}", "order vanilla", WorkKind.AGENT, f"tg:{CHAT}"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 6}, "external")
    expiry = START + timedelta(days=1)
    proposal = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", "vanilla", 6,
                                           Policy("Dairy Direct", expires_at=expiry))

    def ask_both(tx: Transaction) -> list[object]:
        made = [tx.ask("proposal", str(proposal.proposal_id), CHAT), tx.ask("order", "3", CHAT)]
        return [(p.expires_at if (p := tx.prompt(a.nonce)) is not None else "missing") for a in made]
    assert await store.atomic(ask_both) == [expiry, None]


async def test_an_answer_the_grammar_lacks_is_refused_before_a_prompt_is_stored(store: Store):
    with pytest.raises(ValueError, match="not answered by"):
        await store.atomic(lambda tx: tx.ask("order", "3", CHAT, verbs=("approve",)))


def stored_as_rows(made: tuple[Ask, ...]) -> str | None:
    """How a report's buttons were stored before reports kept their asks: rows of [label, callback data]."""
    words = {kind: dict(choices) for kind, choices in asks.CHOICES.items()}
    return json.dumps([[[f"{words[a.kind][v]} {a.subject}" if a.named else words[a.kind][v],
                         asks.press_data(v, a.nonce)] for v in a.verbs] for a in made]) if made else None


async def test_a_report_stored_as_label_rows_reads_back_as_its_asks(store: Store, monkeypatch):
    """Rows written by the code before asks (the `buttons` column keeps its name: nothing migrated) still come back
    as asks, so the renderer builds the same buttons with the same data."""
    monkeypatch.setattr(asks, "to_json", stored_as_rows)

    def draft(tx: Transaction) -> ReportDraft:
        return ReportDraft("Approve?", destination=f"tg:{CHAT}", asks=[
            tx.ask("proposal", "2", CHAT), tx.ask("unknown", "r1.1", CHAT, named=True),
            tx.ask("setting", "dark chocolate:7:15", CHAT, named=True)])
    await finished(store, "tg:7:3", draft)
    only, = await store.due_deliveries()
    assert [(a.kind, a.target, a.verbs, a.named) for a in only.asks] == [
        ("proposal", "", ("approve", "reject"), False), ("unknown", "r1.1", ("resend", "delivered"), True),
        ("setting", "dark chocolate", ("apply", "keep"), True)]      # an unnamed row never stored its target
    n1, n2, n3 = (a.nonce for a in only.asks)
    assert stored_as_rows(only.asks) == json.dumps([
        [["Approve", f"approve:{n1}"], ["Reject", f"reject:{n1}"]],
        [["Resend r1.1", f"resend:{n2}"], ["I have it r1.1", f"delivered:{n2}"]],
        [["Apply dark chocolate", f"apply:{n3}"], ["Keep dark chocolate", f"keep:{n3}"]]])
