"""Receipts (C19) through the Transaction and Receipts ports, for every store: written in the admission's
transaction, one per message, pending until set; an unknown outcome stays pending; set and failed are final."""
from __future__ import annotations

import pytest

from store import Admission, DueReceipts, IllegalTransition, ManualClock, Occurrence, Store, Transaction, WorkKind
from store.shared import store as store_module


def admit_with_receipt(chat_id: int, message_id: int, emoji: str = "👀"):  # type: ignore[no-untyped-def]
    def body(tx: Transaction) -> bool:
        tx.admit(Occurrence(f"tg:{chat_id}:{message_id}", f"tg:{chat_id}", "stock", WorkKind.AGENT, f"tg:{chat_id}"))
        return tx.add_receipt(chat_id, message_id, emoji)
    return body


async def test_a_receipt_is_written_once_per_message_and_set_once(store: Store):
    assert await store.atomic(admit_with_receipt(1, 7)) is True
    assert await store.atomic(admit_with_receipt(1, 7)) is False        # a redelivery: no second receipt
    due = await store.due_receipts()
    assert [(r.chat_id, r.message_id, r.emoji, r.state) for r in due] == [(1, 7, "👀", "pending")]
    await store.receipt_set(due[0].receipt_id)
    assert await store.due_receipts() == []
    [done] = await store.receipts(1)
    assert (done.state, done.attempts) == ("set", 1)
    with pytest.raises(IllegalTransition):                              # set is final
        await store.receipt_retry(done.receipt_id, "again", 1.0)


async def test_a_set_reads_the_receipts_due_next_in_its_own_transaction(store: Store):
    """Issue 31: the receipt relay's next look rides in the set it makes (`then`), so a receipt costs the read that
    woke the relay and one write; without `then` nothing is read."""
    for message_id in (20, 21, 22):
        await store.atomic(admit_with_receipt(2, message_id))
    first, second, third = await store.due_receipts()
    assert await store.receipt_set(first.receipt_id) == []
    assert [r.message_id for r in await store.receipt_set(second.receipt_id, then=5)] == [22]
    assert await store.receipt_set(third.receipt_id, then=5) == []
    assert [r.state for r in await store.receipts(2)] == ["set", "set", "set"]


async def test_an_unknown_outcome_stays_pending_and_is_due_after_its_wait(store: Store, clock: ManualClock):
    await store.atomic(admit_with_receipt(1, 8))
    [receipt] = await store.due_receipts()
    await store.receipt_retry(receipt.receipt_id, "may have been set: ReadTimeout", 2.0)
    assert await store.due_receipts() == []
    wake = await store.next_receipt_time()
    assert wake is not None and wake > clock.now()
    clock.advance(2.5)
    [again] = await store.due_receipts()
    assert (again.receipt_id, again.state, again.attempts) == (receipt.receipt_id, "pending", 1)
    await store.receipt_failed(again.receipt_id, "Bad Request: REACTION_INVALID")
    [failed] = await store.receipts()
    assert (failed.state, failed.reason) == ("failed", "Bad Request: REACTION_INVALID")
    with pytest.raises(IllegalTransition):                              # failed is final
        await store.receipt_set(failed.receipt_id)


async def test_a_rolled_back_admission_leaves_no_receipt(store: Store):
    """Negative control of "same transaction": an admission that fails after its receipt was written takes the
    receipt with it."""
    def body(tx: Transaction) -> None:
        admit_with_receipt(1, 9)(tx)
        raise RuntimeError("the commit never happens")
    with pytest.raises(RuntimeError):
        await store.atomic(body)
    assert await store.receipts() == []


async def test_retention_removes_ended_receipts_only(store: Store, clock: ManualClock):
    await store.atomic(admit_with_receipt(1, 10))
    await store.atomic(admit_with_receipt(1, 11))
    first = next(r for r in await store.due_receipts() if r.message_id == 10)
    await store.receipt_set(first.receipt_id)
    clock.advance(3 * 86400)
    done = await store.prune(2)
    assert done["receipts"] == 1
    assert [(r.message_id, r.state) for r in await store.receipts()] == [(11, "pending")]   # the pending one stays
    # a redelivery after the prune is still a duplicate by its work row, so the router writes no second receipt
    again = await store.admit(Occurrence("tg:1:10", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    assert again.outcome is Admission.DUPLICATE


async def test_a_held_set_is_not_due_and_is_stored_with_the_next_commit_that_writes_anyway(
        store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch):
    """Issue 31: a set is held (`hold_set`), not a commit of its own: the receipt is no longer due at once, and its
    set is stored inside the next transaction that writes anyway (here an admission), or by `flush_held`. Until then
    the database holds it pending: what a crash leaves, so it is set again after a restart (the same reaction:
    harmless), never lost. The relay's look is one read, carrying the earliest not-before time still to come."""
    monkeypatch.setattr(store_module, "FLUSH_S", 60.0)   # no timed flush within the test: each store is shown
    for message_id in (30, 31):
        await store.atomic(admit_with_receipt(3, message_id))
    look = await store.due_receipts_or_wake()
    first, second = look.due
    assert look.next_wake is None
    store.hold_set(first.receipt_id)
    assert [r.message_id for r in await store.due_receipts()] == [31]
    assert [r.message_id for r in (await store.due_receipts_or_wake()).due] == [31]
    assert {r.message_id: r.state for r in await store.receipts(3)} == {30: "pending", 31: "pending"}
    await store.admit(Occurrence("tg:4:1", "tg:4", "stock", WorkKind.AGENT, "tg:4"))   # writes anyway
    assert {r.message_id: (r.state, r.attempts) for r in await store.receipts(3)} == {30: ("set", 1),
                                                                                    31: ("pending", 0)}
    await store.receipt_retry(second.receipt_id, "may have been set: ReadTimeout", 2.0)
    waiting = await store.due_receipts_or_wake()
    assert waiting.due == () and waiting.next_wake == await store.next_receipt_time()
    assert waiting.next_wake is not None and abs((waiting.next_wake - clock.now()).total_seconds() - 2.0) < 1e-3
    clock.advance(2.5)
    [again] = (await store.due_receipts_or_wake()).due
    store.hold_set(again.receipt_id)
    await store.flush_held()                                             # nothing else commits: flushed
    assert [(r.message_id, r.state, r.attempts) for r in await store.receipts(3)] == [(31, "set", 2), (30, "set", 1)]
    assert (await store.due_receipts_or_wake()) == DueReceipts((), None)
    # negative control: a transaction that fails does not store a held set (nor lose it): the next commit does
    await store.atomic(admit_with_receipt(3, 32))
    [third] = await store.due_receipts()
    store.hold_set(third.receipt_id)
    with pytest.raises(RuntimeError):
        await store.atomic(_failing_admission)
    assert [r.state for r in await store.receipts(3) if r.message_id == 32] == ["pending"]
    assert await store.due_receipts() == []
    await store.flush_held()
    assert [r.state for r in await store.receipts(3) if r.message_id == 32] == ["set"]


def _failing_admission(tx: Transaction) -> None:
    tx.admit(Occurrence("tg:5:1", "tg:5", "stock", WorkKind.AGENT, "tg:5"))
    raise RuntimeError("the commit never happens")


async def test_the_receipts_an_admission_wrote_are_handed_to_this_processs_relay(store: Store,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    """Issue 31: what `fresh_receipts` hands over is exactly what the committed admissions wrote (so the relay
    sets a new receipt with no read of its own, while the turn's claim commits): each as `due_receipts` reads it,
    once. Negative controls: a redelivery, a rolled-back admission and an admission undone in its savepoint hand
    over nothing; one whose set is held is left out; more than are kept (no relay takes them) is None: look."""
    assert store.fresh_receipts() == []
    await store.atomic(admit_with_receipt(6, 1))
    await store.atomic(admit_with_receipt(6, 1))                         # a redelivery: none
    with pytest.raises(RuntimeError):
        await store.atomic(_failing_admission_with_receipt)
    undone = await store.atomic(lambda tx: tx.isolated(lambda: _failing_admission_with_receipt(tx)))
    assert isinstance(undone, RuntimeError)
    await store.atomic(admit_with_receipt(6, 2))
    fresh = store.fresh_receipts()
    assert fresh == await store.due_receipts() and [r.message_id for r in fresh] == [1, 2]
    assert store.fresh_receipts() == []                                  # taken once
    await store.atomic(admit_with_receipt(6, 3))
    [third] = (await store.due_receipts())[2:]
    store.hold_set(third.receipt_id)
    assert store.fresh_receipts() == []                                  # its set is held: not handed over
    monkeypatch.setattr(store_module, "FRESH_MAX", 1)
    await store.atomic(admit_with_receipt(6, 4))
    await store.atomic(admit_with_receipt(6, 5))
    assert store.fresh_receipts() is None                                # dropped: the relay looks instead
    assert store.fresh_receipts() == []


def _failing_admission_with_receipt(tx: Transaction) -> None:
    admit_with_receipt(7, 1)(tx)
    raise RuntimeError("undone")
