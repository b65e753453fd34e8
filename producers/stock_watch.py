"""The stock watcher: one reorder check per low-stock episode, and one notice per till count far from the expected
stock.

An episode of an item starts when its stock position (on hand plus on order: an approved order counts from its
approval until it is received) falls below the reorder point and ends when it is no longer below (position >=
reorder point). So an item whose order is on order is never checked again until that order is received, found not
arrived or fails. While an item is armed and low, a check admits `stock:<item>:<episode>` and disarms
the item in the same transaction (C2); however many checks see it low afterwards, nothing more is admitted. Once it
is no longer low, the item is re-armed for the next episode. A refusal for capacity leaves the item armed, so the
next check tries again.

The same transaction announces till counts: every count event after the stored mark whose counted figure differs
from the expected stock (the stock before the count) by more than `count_tolerance` gets one notice
`notice:count:<till_id>:<request_id>:<item>` naming the till, the item and both figures. The mark moves with the
notices, and the identity makes each notice once only, so a check that runs late (at startup, or on schedule after a
crash) still announces every count exactly once.

The same transaction tells the owner of every order a till count received (`notice:restock:<order>`, and the
order's card edited), and asks about late orders: every order still on order after the supplier's lead time gets one
notice `notice:order_due:<order>` with Received and Not arrived buttons (once: the identity makes it so).

`check()` runs on the watcher's schedule and should be called after every change of what it compares: after a till
turn (the worker), after an applied reorder point (the Apply press's Ingress, `shopbot settings reset`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from producers.telegram.owner import ask_order, edit_order_card
from store import Admission, Fence, Occurrence, Order, ReportDraft, Store, Transaction, WorkKind, telegram_chat, units

log = logging.getLogger("shopbot.stock")

# the watcher's read marks (ProducerRecords.get_mark): the last stock event announced of each kind
COUNT_NOTICES = "count_notices"
RESTOCK_NOTICES = "restock_notices"


@dataclass(frozen=True)
class StockCheck:
    """What one check decided (committed together)."""
    admitted: tuple[str, ...] = ()   # sources of new episodes
    refused: tuple[str, ...] = ()    # low items refused for capacity: still armed
    rearmed: tuple[str, ...] = ()    # items no longer below their reorder point
    notices: tuple[str, ...] = ()    # count notices admitted
    overdue: tuple[str, ...] = ()    # late-order notices admitted
    restocked: tuple[str, ...] = ()  # notices of orders a till count received


def reorder_prompt(item: str, unit: str, on_hand: int, reorder_point: int, on_order: int = 0) -> str:
    ordered = f" and {units.count(on_order, unit)} on order" if on_order else ""
    return (f"Reorder check for {item}: {units.count(on_hand, unit)} on hand{ordered}, below the reorder point of "
            f"{reorder_point}. Propose an order if needed.")


def overdue_notice(order: Order) -> str:
    quantity = units.count(order.quantity, order.unit)
    return (f"Order #{order.proposal_id} ({quantity} of {order.item}, approved "
            f"{order.approved_at.date().isoformat()}) was due by {order.due_at.date().isoformat()} and is still not "
            f"received; it is {order.status}. Has it arrived? Received adds {quantity} to the stock "
            f"(or send /received {order.proposal_id} <count> with the stock you counted); Not arrived stops "
            "counting it as on order.")


def count_notice(till_id: str, request_id: str, item: str, unit: str, expected: int, counted: int,
                 tolerance: int) -> str:
    return (f"Till {till_id} counted {units.count(counted, unit)} of {item}, but {units.count(expected, unit)} "
            f"{'was' if expected == 1 else 'were'} expected "
            f"(a difference of {counted - expected:+d}, more than the tolerance of {tolerance}; "
            f"request {request_id}). The stock is now {counted}.")


class StockWatcher:
    def __init__(self, store: Store, destination: str | None, *, count_tolerance: int | None = None) -> None:
        """`destination`: the owner's chat `tg:<chat_id>` for reorder checks and notices (None: stored only).
        `count_tolerance`: None leaves till counts unannounced."""
        self.store = store
        self.destination = destination
        self.count_tolerance = count_tolerance

    async def check(self, fence: Fence | None = None) -> StockCheck:
        """One check in one transaction; `fence` is the `producers` lease of the scheduled checks (C16). The check
        the worker runs after a till turn runs unfenced in whichever process ran the turn: every write it makes is
        idempotent by its identity (C1), so a check that overlaps the leader's admits nothing twice."""
        result = await self.store.atomic(self._check, fence=fence)
        for source in result.admitted:
            log.info("stock episode admitted source=%s", source)
        for source in result.refused:
            log.warning("stock episode refused for capacity source=%s: the item stays armed", source)
        for source in result.notices:
            log.info("count notice admitted source=%s", source)
        for source in result.overdue:
            log.info("late order notice admitted source=%s", source)
        return result

    def _check(self, tx: Transaction) -> StockCheck:
        notices = self._count_notices(tx) if self.count_tolerance is not None else ()
        admitted, refused, rearmed = [], [], []
        for row in tx.producers.stock_levels():
            item, episode = row.item, row.episode
            low = row.position < row.reorder_point
            if low and row.armed:
                source = f"stock:{item}:{episode}"
                result = tx.admit(Occurrence(
                    source, f"stock:{item}", reorder_prompt(item, row.unit, row.on_hand, row.reorder_point,
                                                            row.on_order),
                    WorkKind.AGENT, self.destination))
                if result.outcome is Admission.REFUSED:
                    refused.append(source)
                    continue
                if result.outcome is Admission.ACCEPTED:
                    admitted.append(source)
                # duplicate or conflict: this episode already has its work item
                tx.producers.set_watch(item, False, episode)
            elif not low and not row.armed:
                tx.producers.set_watch(item, True, episode + 1)
                rearmed.append(item)
        return StockCheck(tuple(admitted), tuple(refused), tuple(rearmed), notices, self._overdue(tx),
                          self._restocked(tx))

    def _restocked(self, tx: Transaction) -> tuple[str, ...]:
        mark = tx.producers.get_mark(RESTOCK_NOTICES)
        admitted = []
        for received in tx.restocked_orders_after(mark):
            order = received.order
            mark = order.event_id or mark
            if not self.destination:
                continue
            counted = units.count(received.new_on_hand, order.unit)
            text = (f"Order #{order.proposal_id} arrived: {received.source} counted "
                    f"{counted} of {order.item} (was {received.old_on_hand}), at least the "
                    f"{order.quantity} ordered. It is received and no longer on order.")
            source = f"notice:restock:{order.proposal_id}"
            result = tx.admit_answered(Occurrence(source, "notice:restock", text, WorkKind.NOTICE, self.destination),
                                       _answer(ReportDraft(text, destination=self.destination)))
            if result.outcome is Admission.ACCEPTED:
                admitted.append(source)
                edit_order_card(tx, order.proposal_id, f"Received: {text.split(': ', 1)[1]}", "received")
        tx.producers.set_mark(RESTOCK_NOTICES, mark)
        return tuple(admitted)

    def _overdue(self, tx: Transaction) -> tuple[str, ...]:
        destination = self.destination
        chat_id = telegram_chat(destination)
        if chat_id is None or destination is None:
            return ()
        admitted = []
        for order in tx.overdue_orders():
            text = overdue_notice(order)
            source = f"notice:order_due:{order.proposal_id}"
            result = tx.admit_answered(
                Occurrence(source, "notice:order_due", text, WorkKind.NOTICE, destination),
                partial(_overdue_answer, text, destination, order.proposal_id, chat_id))
            if result.outcome is Admission.ACCEPTED:
                admitted.append(source)
        return tuple(admitted)

    def _count_notices(self, tx: Transaction) -> tuple[str, ...]:
        assert self.count_tolerance is not None
        tolerance, destination = self.count_tolerance, self.destination
        mark = tx.producers.get_mark(COUNT_NOTICES)
        admitted = []
        for event in tx.producers.count_events_after(mark):
            mark = event.event_id
            expected, counted = event.old_on_hand, event.new_on_hand
            if expected is None or abs(counted - expected) <= tolerance:
                continue
            _, till_id, request_id = _till_source(event.source)
            text = count_notice(till_id, request_id, event.item, event.unit, expected, counted, tolerance)
            source = f"notice:count:{till_id}:{request_id}:{event.item}"
            result = tx.admit_answered(Occurrence(source, "notice:count", text, WorkKind.NOTICE, destination),
                                       _answer(ReportDraft(text, destination=destination)))
            if result.outcome is Admission.ACCEPTED:
                admitted.append(source)
        tx.producers.set_mark(COUNT_NOTICES, mark)
        return tuple(admitted)


def _answer(draft: ReportDraft) -> Callable[[Transaction, int], ReportDraft]:
    """An `admit_answered` answer that needs nothing of the transaction."""
    return lambda _tx, _work_id: draft


def _overdue_answer(text: str, destination: str, proposal_id: int, chat_id: int, tx: Transaction, work_id: int
                    ) -> ReportDraft:
    return ReportDraft(text, destination=destination, asks=[ask_order(tx, proposal_id, chat_id, late=True)])


def _till_source(source: str | None) -> tuple[str, str, str]:
    """`till:<till_id>:<request_id>` split in three (another source is shown whole as the request)."""
    parts = (source or "").split(":", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and parts[0] == "till" else ("", "?", source or "?")
