"""What the owner can do besides talking to the agent: commands and inline-button presses (control items).

Each runs inside the admission transaction of its own occurrence and is answered there with a report that goes
through the outbox; only the callback answer itself (the button's little spinner) is sent directly, after commit.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from store import (
    Admission,
    AdmitResult,
    Ask,
    Destination,
    Occurrence,
    OrderState,
    ReportDraft,
    Status,
    Transaction,
    UnknownTarget,
    WorkKind,
    asks,
    units,
)

from . import wording

BRIEF_PROMPT = "Prepare the opening brief"

COMMANDS = {
    "start": "start and see what I can do",
    "help": "what I can do",
    "status": "queue and delivery figures",
    "pending": "everything waiting for you: proposals, unsure replies, orders to receive",
    "brief": "the opening brief, now",
    "forget": "forget this conversation (asks first)",
    "received": "an order arrived: /received 2, or /received 2 11 with the stock you counted",
}

# the common asks under the chat (store/asks.py COMMON) whose label is answered as the command of the same name
KEYBOARD_COMMANDS = {"pending": "pending", "brief": "brief"}

HELP = ("Hello! I look after the shop's stock with you.\n"
        "Ask me things like: stock, how much vanilla, count chocolate, brief, reorder.\n"
        "Commands: " + ", ".join(f"/{name} ({what})" for name, what in COMMANDS.items()) + ".\n"
        "The buttons under the chat ask the common things in one tap ("
        + ", ".join(label for row in asks.COMMON for label in row) + ").\n"
        "Every reply ends with its number (like r12.1) so you can spot one that came twice.")

NOT_TEXT = "I can only read text messages for now. Please type your request."
EDITED = ("I saw that you edited a message. Edits are not re-run: I answered what you sent first. "
          "Send a new message if you want a new answer.")
NO_LONGER_VALID = "This button is no longer valid."


@dataclass(frozen=True)
class Press:
    """A button press, authenticated by the adapter: the presser is an allow-listed owner."""
    callback_id: str
    chat_id: int
    user_id: int
    data: str
    message_id: int | None


@dataclass(frozen=True)
class PressResult:
    admission: AdmitResult
    answer: str             # the callback answer (after commit)
    decided: bool           # a decision was recorded: remove the buttons
    stock_changed: bool = False   # a reorder point moved: the stock watcher checks after the commit (Ingress)


def status_text(status: Status) -> str:
    work, deliveries, law = status.agent_work, status.deliveries, status.littles_law
    lines = [f"Requests: {work.pending} waiting, {work.running} running, {work.finished} done, "
             f"{work.failed} failed.",
             f"Replies: {deliveries.pending} to send, {deliveries.confirmed} delivered, "
             f"{deliveries.unknown} unsure, {deliveries.failed + deliveries.denied} not sent.",
             f"Last hour: {law.arrivals} requests, {law.refused} turned away for being busy."]
    if status.unknown:
        lines.append("Unsure replies: " + ", ".join(sorted({u.report_id for u in status.unknown}))
                     + " (see /pending).")
    return "\n".join(lines)


def received_reply(tx: Transaction, text: str, chat_id: int, by: str) -> str:
    """`/received <order> [count]`: the order arrived; with a count, the stock counted after the delivery."""
    args = text.split()[1:]
    if not 1 <= len(args) <= 2 or not all(a.lstrip("#").isdigit() for a in args):
        return ("Tell me which order arrived: /received 2 (adds the quantity ordered), or /received 2 11 with the "
                "stock you counted after the delivery. /pending lists the orders on their way.")
    proposal_id, counted = int(args[0].lstrip("#")), (int(args[1]) if len(args) == 2 else None)
    order = tx.order(proposal_id)
    if order is None or order.state is not OrderState.ON_ORDER:
        state = "" if order is None else f" (it is {order.state.replace('_', ' ')})"
        return f"Order #{proposal_id} is not on order{state}; nothing changed."
    tx.close_prompts("order", str(proposal_id), "received", by)
    done = tx.receive_order(proposal_id, by, counted)
    ordered = done.order
    how = (f"{units.count(ordered.quantity, ordered.unit)} added" if counted is None
           else f"you counted {units.count(counted, ordered.unit)}")
    text = (f"Received order #{proposal_id} ({units.count(ordered.quantity, ordered.unit)} of {ordered.item}): "
            f"{how}; {ordered.item} is now {units.count(done.new_on_hand, ordered.unit)} on hand.")
    edit_order_card(tx, proposal_id, text, "received")
    return text


def command_reply(tx: Transaction, command: str, chat_id: int, text: str = "", user_id: int | None = None,
                  rules: ApprovalRules | None = None) -> ReportDraft:
    destination = Destination.telegram(chat_id)
    if command == "received":
        return ReportDraft(received_reply(tx, text, chat_id, f"owner:{user_id or chat_id}"), destination=destination)
    if command == "status":
        return ReportDraft(status_text(tx.status()), destination=destination)
    if command == "pending":
        return pending_reply(tx, chat_id, rules)
    if command == "forget":
        return ReportDraft("Forget this conversation? I will delete what I remember of it and cancel requests "
                           "still waiting. Replies already sent stay in the records.", destination=destination,
                           asks=[tx.ask("forget", destination, chat_id)])
    return ReportDraft(HELP, destination=destination)


PENDING_LIMIT = 10      # of each kind; the rest is counted


def pending_reply(tx: Transaction, chat_id: int, rules: ApprovalRules | None = None) -> ReportDraft:
    """/pending: everything that waits for the owner, each with its buttons: proposals awaiting Approve/Reject,
    replies that may not have arrived (Resend / I have it), orders on order (Received; Not arrived once late)."""
    destination = Destination.telegram(chat_id)
    rules = rules or ApprovalRules()
    proposals = tx.awaiting_proposals()
    unknown = [r for r in tx.unknown_reports() if r.chat_id == chat_id]
    orders = tx.open_orders()
    if not (proposals or unknown or orders):
        return ReportDraft("Nothing is waiting for you: no proposal to decide, every reply delivered or settled, "
                           "no order on its way.", destination=destination)
    lines: list[str] = []
    questions: list[Ask] = []

    def more(rows: Sequence[object]) -> None:
        if len(rows) > PENDING_LIMIT:
            lines.append(f"(and {len(rows) - PENDING_LIMIT} more)")
    if proposals:
        lines.append("Proposals awaiting your decision:")
        for p in proposals[:PENDING_LIMIT]:
            lines.append(f"- #{p.proposal_id} {p.item}: {units.count(p.quantity, p.unit)} for "
                         f"{rules.money(p.total_cents)}")
            questions.append(tx.ask("proposal", str(p.proposal_id), chat_id, named=True))
        more(proposals)
    if unknown:
        lines.append("Replies that may not have arrived:")
        for row in unknown[:PENDING_LIMIT]:
            preview = (row.preview.splitlines() or [""])[0][:50]
            lines.append(f"- {row.report_id}: \"{preview}…\"")
            if row.kind is not WorkKind.NOTICE:
                questions.append(tx.ask("unknown", row.report_id, chat_id, named=True))
        more(unknown)
    if orders:
        lines.append("Orders on order, awaiting Received:")
        for o in orders[:PENDING_LIMIT]:
            late = o.due_at <= tx.at
            due = o.due_at.date().isoformat()
            lines.append(f"- #{o.proposal_id} {o.item}: {units.count(o.quantity, o.unit)}, {o.status}, "
                         + (f"was due by {due}" if late else f"due by {due}"))
            questions.append(ask_order(tx, o.proposal_id, chat_id, late=late, named=True))
        more(orders)
    return ReportDraft("\n".join(lines), destination=destination, asks=questions)


def admit_command(tx: Transaction, source: str, chat_id: int, text: str, command: str,
                  rules: ApprovalRules | None = None) -> AdmitResult:
    """A control command: never refused for capacity, answered in its admission."""
    chat = Destination.telegram(chat_id)
    return tx.admit_answered(Occurrence(source, chat, text, WorkKind.CONTROL, chat),
                             lambda t, work_id: command_reply(t, command, chat_id, text, rules=rules))


def admit_reply(tx: Transaction, source: str, chat_id: int, payload: str, reply: str) -> AdmitResult:
    chat = Destination.telegram(chat_id)
    return tx.admit_answered(Occurrence(source, chat, payload, WorkKind.CONTROL, chat),
                             lambda t, work_id: ReportDraft(reply, destination=chat))


def ask_order(tx: Transaction, proposal_id: int, chat_id: int, *, late: bool = False, named: bool = False) -> Ask:
    """Received for an order on order; once its lead time passed (`late`), Not arrived too."""
    return tx.ask("order", str(proposal_id), chat_id, verbs=asks.order_verbs(late), named=named)


VERBS = asks.VERBS      # the questions and their answers are one grammar (store/asks.py)


@dataclass(frozen=True)
class ApprovalRules:
    """What an approval needs from the shop file: the per-day limit, the shop's day, the supplier destination."""
    timezone: str = "UTC"
    day_max_cents: int | None = None
    supplier_destination: str = "supplier:supplier"
    lead_time_days: int = 3          # an order not received this long after its approval is asked about once
    # how the owner reads money: the app passes the shop's (ShopFormat.cents, Babel); the default, for tests that
    # build rules alone, reads an amount as a plain decimal of two places
    money: wording.Money = field(default=lambda cents: f"{cents / 100:.2f}", compare=False)

    def day(self, now: datetime) -> str:
        """The shop's local date at `now`: the day of the per-day spending limit."""
        return now.astimezone(ZoneInfo(self.timezone)).date().isoformat()


@dataclass(frozen=True)
class Outcome:
    """What a press decided: the answer, whether a decision was recorded, and what the answer asks next."""
    text: str
    decided: bool
    asks: tuple[Ask, ...] = ()
    stock_changed: bool = False     # what the stock watcher compares moved (an applied reorder point)


def _order_press(tx: Transaction, nonce: str, verb: str, proposal_id: int, by: str,
                 pressed_on: tuple[int, int | None] | None = None) -> Outcome:
    order = tx.order(proposal_id)
    if order is None or order.state is not OrderState.ON_ORDER:
        tx.decide_prompt(nonce, "stale", by)
        return Outcome(NO_LONGER_VALID, False)
    tx.decide_prompt(nonce, verb, by)
    tx.close_prompts("order", str(proposal_id), verb, by)
    if verb == "received":
        done = tx.receive_order(proposal_id, by)
        outcome = Outcome(f"Received order #{proposal_id}: {units.count(order.quantity, order.unit)} of "
                          f"{order.item} added; {order.item} is now "
                          f"{units.count(done.new_on_hand, order.unit)} on hand.", True)
    else:
        tx.order_not_arrived(proposal_id, by)
        outcome = Outcome(f"Noted: order #{proposal_id} ({units.count(order.quantity, order.unit)} of "
                          f"{order.item}) has "
                          "not arrived. I no longer count it as on order, so the stock watcher and reorder may "
                          f"propose {order.item} again. Check with the supplier before ordering twice.", True)
    if order.card_message is not None and pressed_on != (order.card_chat, order.card_message):
        edit_order_card(tx, proposal_id, outcome.text, verb)     # pressed elsewhere: the order's card says so too
    return outcome


def _setting_press(tx: Transaction, nonce: str, verb: str, target: str, by: str) -> Outcome:
    """Apply: the suggested reorder point and target become the item's from this commit (a recorded decision, in
    place of the shop file's until `shopbot settings reset`); Keep: the decision is recorded, nothing changes."""
    item, rop_text, target_text = target.rsplit(":", 2)
    reorder_point, order_up_to = int(rop_text), int(target_text)
    tx.decide_prompt(nonce, verb, by)
    tx.close_prompts("setting", target, verb, by)
    if verb == "keep":
        return Outcome(f"Kept: {item} stays as it is (not {reorder_point} and {order_up_to}).", True)
    try:
        tx.apply_setting(item, reorder_point, order_up_to, by, nonce)
    except (ValueError, UnknownTarget) as exc:
        return Outcome(f"Not applied: {exc}", True)
    return Outcome(f"Applied: {item}'s reorder point is now {reorder_point} and its target {order_up_to}. "
                   f"`shopbot settings reset {item}` goes back to the shop file's values.", True, stock_changed=True)


def decide_press(tx: Transaction, press: Press, rules: ApprovalRules = ApprovalRules()) -> Outcome:
    """C8: a press counts only for a known prompt, from the chat it went to, while its target still awaits this
    decision; anything else is 'no longer valid' and changes nothing."""
    verb, nonce = asks.parse_press(press.data)
    prompt = tx.prompt(nonce) if nonce else None
    if (prompt is None or prompt.chat_id != press.chat_id or prompt.decided_at is not None
            or verb not in VERBS.get(prompt.kind, ())
            or (prompt.expires_at is not None and prompt.expires_at <= tx.at)):
        return Outcome(NO_LONGER_VALID, False)
    by = f"owner:{press.user_id}"
    if prompt.kind == "unknown":
        if not tx.unknown_prompt_open(prompt.target):
            tx.decide_prompt(nonce, "stale", by)
            return Outcome(NO_LONGER_VALID, False)
        tx.decide_prompt(nonce, verb, by)
        tx.resolve(prompt.target, verb, by)
        if verb == "resend":
            return Outcome(f"OK, I will send {prompt.target} once more.", True)
        return Outcome(f"Thanks, noted that you have {prompt.target}.", True)
    if prompt.kind == "proposal":
        proposal_id = int(prompt.target)
        if verb == "approve":
            decision = tx.approve_proposal(proposal_id, by, day=rules.day(tx.at), day_max_cents=rules.day_max_cents,
                                           destination=rules.supplier_destination,
                                           lead_time_days=rules.lead_time_days)
        else:
            decision = tx.reject_proposal(proposal_id, by)
        if decision.ok:
            tx.decide_prompt(nonce, verb, by)
            tx.close_prompts("proposal", prompt.target, verb, by)     # the card's and /pending's buttons alike
        approved = decision.ok and verb == "approve"
        if approved and press.message_id is not None:
            tx.set_order_card(proposal_id, press.chat_id, press.message_id)
        return Outcome(wording.decision_text(decision, rules.money), decision.ok,
                       (ask_order(tx, proposal_id, press.chat_id),) if approved else ())
    if prompt.kind == "order":
        return _order_press(tx, nonce, verb, int(prompt.target), by, (press.chat_id, press.message_id))
    if prompt.kind == "setting":
        return _setting_press(tx, nonce, verb, prompt.target, by)
    if prompt.kind == "forget":
        tx.decide_prompt(nonce, verb, by)
        if verb == "keep":
            return Outcome("OK, I keep this conversation.", True)
        deleted, cancelled = tx.forget(prompt.target, by)
        return Outcome(f"Forgotten: {deleted} remembered message(s) deleted"
                       + (f", {cancelled} waiting request(s) cancelled." if cancelled else "."), True)
    return Outcome(NO_LONGER_VALID, False)


def stamp(tx: Transaction, press: Press, rules: ApprovalRules) -> str:
    """Who decided and when, in the shop's time: `owner 1001, 09:30 01 Mar`."""
    from zoneinfo import ZoneInfo

    local = tx.at.astimezone(ZoneInfo(rules.timezone))
    return f"owner {press.user_id}, {local:%H:%M %d %b}"


def card_edit(tx: Transaction, press: Press, outcome: Outcome, rules: ApprovalRules) -> ReportDraft:
    """The press's report. A decision edits the card it was taken on, in place (C7: a delivery of its own through
    the outbox): the card's text, then the decision with who and when; it asks what it asked and is still open,
    then what the decision asks (Received after an approval). Anything else (no longer valid, a card not found) is
    a new message."""
    destination = Destination.telegram(press.chat_id)
    card = tx.sent_message(press.chat_id, press.message_id) if press.message_id is not None else None
    if not outcome.decided or card is None:
        return ReportDraft(outcome.text, destination=destination, asks=outcome.asks)
    still_open = [ask for ask in card.asks if (p := tx.prompt(ask.nonce)) is not None and p.decided_at is None]
    body = f"{card.text.rstrip()}\n\n{outcome.text}\n— {stamp(tx, press, rules)}"
    return ReportDraft(body, destination=destination, asks=[*still_open, *outcome.asks], edit_of=press.message_id)


def edit_order_card(tx: Transaction, proposal_id: int, line: str, subject: str) -> bool:
    """The order's card follows its life (sent, confirmed with the supplier's id, received, failed): a notice
    `notice:card:<order>:<subject>` (once) whose report edits the card the order was approved on, adding `line`,
    with Received while the order is on order. False when the order has no card (approved before cards were kept)."""
    order = tx.order(proposal_id)
    if order is None or order.card_chat is None or order.card_message is None:
        return False
    chat_id, message_id = order.card_chat, order.card_message
    card = tx.sent_message(chat_id, message_id)
    if card is None:
        return False
    body = f"{card.text.rstrip()}\n{line}"
    destination = Destination.telegram(chat_id)
    result = tx.admit_answered(
        Occurrence(f"notice:card:{proposal_id}:{subject}", "notice:card", body, WorkKind.NOTICE, destination),
        lambda t, work_id: ReportDraft(
            body, destination=destination, edit_of=message_id,
            asks=(ask_order(t, proposal_id, chat_id),) if order.state is OrderState.ON_ORDER else ()))
    return result.outcome is Admission.ACCEPTED


def admit_press(tx: Transaction, press: Press, rules: ApprovalRules = ApprovalRules()) -> PressResult:
    answer: list[str] = []
    decided: list[bool] = []
    stock_changed: list[bool] = []

    def reply(t: Transaction, work_id: int) -> ReportDraft:
        outcome = decide_press(t, press, rules)
        answer.append(outcome.text)
        decided.append(outcome.decided)
        stock_changed.append(outcome.stock_changed)
        return card_edit(t, press, outcome, rules)
    result = tx.admit_answered(Occurrence(f"cb:{press.callback_id}", Destination.telegram(press.chat_id), press.data,
                                          WorkKind.CONTROL, Destination.telegram(press.chat_id)), reply)
    if result.outcome is not Admission.ACCEPTED:     # a redelivered press: already answered
        return PressResult(result, "Already done.", False)
    return PressResult(result, answer[0], decided[0], stock_changed[0])
