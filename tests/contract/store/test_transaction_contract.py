"""The moves inside one write transaction (the Transaction port and its ProducerRecords), for every store: savepoints,
counters, answered admissions, forgetting, a report's parts and decisions, prompts, rejections and an order's card."""
from __future__ import annotations

from datetime import timedelta

import pytest

from store import (
    DecisionKind,
    IllegalTransition,
    ManualClock,
    MissedReason,
    Occurrence,
    ReportDraft,
    Store,
    Transaction,
    WorkKind,
)

from .test_outbox_contract import finished_report, proposed


class Planted(Exception):
    """A bug inside a savepoint (not a database error)."""


async def accepted(store: Store, source: str) -> bool:
    """Whether `source` is new to the store (then admitted now)."""
    return (await store.admit(Occurrence(source, "tg:9", "x", WorkKind.AGENT, "tg:9"))).outcome == "accepted"


async def test_isolated_undoes_only_its_own_writes_and_returns_the_error(store: Store):
    def batch(tx: Transaction) -> tuple[BaseException | None, BaseException | None]:
        tx.admit(Occurrence("tg:9:1", "tg:9", "kept", WorkKind.AGENT, "tg:9"))

        def bad() -> None:
            tx.admit(Occurrence("tg:9:2", "tg:9", "undone", WorkKind.AGENT, "tg:9"))
            raise Planted("bad update")
        return tx.isolated(bad), tx.isolated(lambda: tx.admit(Occurrence("tg:9:3", "tg:9", "kept", WorkKind.AGENT,
                                                                          "tg:9")))
    failed, fine = await store.atomic(batch)
    assert isinstance(failed, Planted) and fine is None
    assert [await accepted(store, s) for s in ("tg:9:1", "tg:9:2", "tg:9:3")] == [False, True, False]


async def test_counts_add_up_in_the_minute_and_a_tally_rides_along_with_a_write(store: Store):
    assert await store.atomic(lambda tx: (tx.count("stranger"), tx.count("stranger", 2))) == (1, 3)
    assert await store.count("stranger") == 4

    def tallied(tx: Transaction) -> None:
        tx.tally("bad_token", 2)
        tx.admit(Occurrence("tg:9:1", "tg:9", "x", WorkKind.AGENT, "tg:9"))
    await store.atomic(tallied)
    counters = (await store.status()).counters
    assert counters["stranger"] == 4 and counters["bad_token"] == 2


async def test_an_answered_admission_is_finished_in_its_transaction_and_a_duplicate_writes_nothing(store: Store):
    asked: list[int] = []

    def answer(tx: Transaction, work_id: int) -> ReportDraft:
        asked.append(work_id)
        return ReportDraft(f"pong {work_id}", destination="tg:1")
    control = Occurrence("tg:1:5", "tg:1", "/ping", WorkKind.CONTROL, "tg:1")
    first = await store.atomic(lambda tx: tx.admit_answered(control, answer))
    again = await store.atomic(lambda tx: tx.admit_answered(control, answer))
    assert (first.outcome, again.outcome) == ("accepted", "duplicate") and len(asked) == 1
    [view] = await store.reports()
    assert view.report == first.report_id and await store.atomic(
        lambda tx: tx.delivery_states(view.report)) == ["pending"]
    assert (await store.status()).work.finished == 1 and await store.claim("w") is None


async def test_forget_inside_a_transaction_empties_the_history_and_cancels_waiting_work(store: Store):
    await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w")
    assert claim is not None
    await store.finish(claim, ReportDraft("plenty", destination="tg:1"), user_text="stock")
    await store.admit(Occurrence("tg:1:2", "tg:1", "and more", WorkKind.AGENT, "tg:1"))
    assert await store.atomic(lambda tx: tx.forget("tg:1", "owner 1")) == (2, 1)
    assert await store.history("tg:1") == [] and await store.claim("w") is None
    assert (await store.status()).work.failed == 1


async def test_resolve_moves_unknown_parts_and_closes_the_reports_prompts(store: Store):
    report_id = await finished_report(store)
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_unknown(part.delivery_id, "timeout")

    def ask(tx: Transaction) -> tuple[list[str], bool, list[str]]:
        return tx.delivery_states(report_id), tx.unknown_prompt_open(report_id), \
            [tx.ask("unknown", report_id, 1).nonce for _ in range(2)]
    states, open_, nonces = await store.atomic(ask)
    assert states == ["unknown"] and open_

    def resend(tx: Transaction) -> tuple[list[int], list[str], bool, list[str | None]]:
        moved = tx.resolve(report_id, "resend", "owner 1")
        return moved, tx.delivery_states(report_id), tx.unknown_prompt_open(report_id), \
            [(tx.prompt(n) or pytest.fail(n)).decision for n in nonces]
    assert await store.atomic(resend) == ([part.delivery_id], ["pending"], False, ["resend", "resend"])
    with pytest.raises(IllegalTransition, match="no delivery awaiting a decision"):          # nothing awaits one
        await store.atomic(lambda tx: tx.resolve(report_id, "resend", "owner 1"))


async def test_a_decision_through_one_prompt_closes_the_others_for_its_target_only(store: Store):
    def three(tx: Transaction) -> list[str]:
        return [tx.ask("setting", "vanilla", 1).nonce, tx.ask("setting", "vanilla", 1).nonce,
                tx.ask("setting", "chocolate", 1).nonce]
    vanilla, other, chocolate = await store.atomic(three)

    def close(tx: Transaction) -> list[tuple[str | None, bool]]:
        tx.decide_prompt(vanilla, "apply", "owner 1")
        tx.close_prompts("setting", "vanilla", "apply", "owner 1")
        prompts = [tx.prompt(n) or pytest.fail(n) for n in (other, chocolate)]
        return [(p.decision, p.decided_at is not None) for p in prompts]
    assert await store.atomic(close) == [("apply", True), (None, False)]
    assert not await store.atomic(lambda tx: tx.decide_prompt(other, "apply", "owner 2"))   # closed: decided once


async def test_a_rejected_proposal_cannot_be_rejected_again_nor_approved(store: Store):
    proposal_id, _ = await proposed(store)

    def reject(tx: Transaction) -> list[DecisionKind]:
        return [tx.reject_proposal(proposal_id, "owner 1").kind, tx.reject_proposal(proposal_id, "owner 1").kind,
                tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=None,
                                    destination="supplier:dairy").kind, tx.reject_proposal(404, "owner 1").kind]
    assert await store.atomic(reject) == [DecisionKind.REJECTED, DecisionKind.NOT_AWAITING,
                                          DecisionKind.NOT_AWAITING, DecisionKind.NOT_FOUND]
    assert await store.due_actions() == []


async def test_an_orders_card_is_remembered_while_it_is_on_order(store: Store):
    proposal_id, _ = await proposed(store)

    def approve_with_card(tx: Transaction) -> tuple[object, object]:
        assert tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=None,
                                   destination="supplier:dairy").ok
        tx.set_order_card(proposal_id, 111, 222)
        tx.set_order_card(404, 111, 223)                   # no such order: nothing to remember
        order = tx.order(proposal_id)
        assert order is not None
        return order.card_chat, order.card_message
    assert await store.atomic(approve_with_card) == (111, 222)


async def test_a_schedules_cursor_and_refused_key_commit_with_the_transaction(store: Store, clock: ManualClock):
    fired = clock.now() - timedelta(minutes=5)
    assert await store.atomic(lambda tx: tx.producers.get_cursor("daily")) == (None, None)

    def move_then_fail(tx: Transaction) -> None:
        tx.producers.set_cursor("daily", fired, None)
        raise Planted("the admission failed")
    with pytest.raises(Planted):
        await store.atomic(move_then_fail)
    assert await store.atomic(lambda tx: tx.producers.get_cursor("daily")) == (None, None)
    await store.atomic(lambda tx: tx.producers.set_cursor("daily", fired, "daily:2027-03-01"))
    cursor, refused = await store.atomic(lambda tx: tx.producers.get_cursor("daily"))
    assert cursor == fired and cursor is not None and cursor.tzinfo is not None and refused == "daily:2027-03-01"
    assert await store.atomic(lambda tx: tx.producers.get_cursor("weekly")) == (None, None)


async def test_a_missed_occurrence_is_recorded_once_and_shown_in_status(store: Store, clock: ManualClock):
    fired = clock.now() - timedelta(hours=2)
    record = lambda tx: tx.producers.record_missed("daily", "daily:1", MissedReason.LATE, fired)  # noqa: E731
    assert (await store.atomic(record), await store.atomic(record)) == (True, False)
    [missed] = (await store.status()).extra.missed
    assert (missed.schedule, missed.key, missed.reason, missed.fire_time) == (
        "daily", "daily:1", MissedReason.LATE, fired)


async def test_a_producers_mark_starts_at_zero_and_moves(store: Store):
    assert await store.atomic(lambda tx: tx.producers.get_mark("count_notices_test")) == 0
    await store.atomic(lambda tx: tx.producers.set_mark("count_notices_test", 41))
    await store.atomic(lambda tx: tx.producers.set_mark("count_notices_test", 42))
    assert await store.atomic(lambda tx: tx.producers.get_mark("count_notices_test")) == 42


async def test_the_stock_watchers_episode_of_an_item_is_kept(store: Store):
    await proposed(store)                                   # the shop's items seeded
    await store.atomic(lambda tx: tx.producers.set_watch("vanilla", False, 3))
    watched = {w.item: (w.armed, w.episode) for w in await store.stock_watch()}
    assert watched["vanilla"] == (False, 3)
    await store.atomic(lambda tx: tx.producers.set_watch("vanilla", True, 4))
    watched = {w.item: (w.armed, w.episode) for w in await store.stock_watch()}
    assert watched["vanilla"] == (True, 4)
