"""OfflineModel: the default "model", deterministic rules with no network (demo mode, no API key).

It is driven only by the conversation it is given, like a real model: the request is the last user message,
and the tool results after it are what it has learnt so far. Each call replays its rules against those
results; the first results it still lacks become the next tool calls (several at once when they do not
depend on each other, which exercises parallel calls), and when nothing is missing it answers in prose.

Understood, case-insensitively, anywhere in a line (a turn may hold several messages, one per line; each line
is read on its own, repeated requests are answered once):

* `brief` — the opening brief. When `reorder_need` may be called without an item (its schema says so), one
  call gives every item below its reorder point and the total cost, and the brief states that total. Otherwise:
  `list_stock`, then `reorder_need` for each item below its reorder point, and no total (no tool computed one).
* `reorder` — for every item below its reorder point with no open proposal: `reorder_need`, `draft_order`,
  `propose_order` (a proposal only: the owner approves it, C11).
* `stock`, `how much`, `how many`, `count` — with an item named in the line: `get_item` for each item named;
  with another word after the keyword: `get_item(word)` (an unknown item comes back as the tool's error);
  with nothing after it: the whole stock from `list_stock`.
* `low` (or `low stock`) — the items below their reorder point, counting what is on order.
* `help` — what it can do. Anything else gets the same list with a "did not understand".

Item names are learnt from `list_stock`, never hard-coded. Every number in its prose is copied from a tool
result (on_hand, quantity, cost, total: money as the tools show it, e.g. `$6.00`), so C13 keeps them;
it never states a number it computed itself (a total is stated only when a tool returned it).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker.models.base import Message, ModelTurn, ToolCall, ToolSpec

HELP = (
    "Here is what I can do:\n"
    "- stock: every item and how much is on hand\n"
    "- stock <item> (or: how much <item>, count <item>): one item\n"
    "- brief: the opening brief, with what needs reordering\n"
    "- reorder: propose orders for items below their reorder point (you approve each one)\n"
    "- low: the items below their reorder point\n"
    "- help: this list"
)
NOT_UNDERSTOOD = "Sorry, I did not understand that."
SOME_NOT_UNDERSTOOD = "(Some lines I did not understand: send help to see what I can do.)"

_QUERY = re.compile(r"\b(?:stock|how\s+much|how\s+many|count)\b", re.IGNORECASE)
_STOPWORDS = {
    "a", "an", "the", "of", "do", "does", "we", "i", "you", "is", "are", "there", "have", "has", "got", "left",
    "on", "in", "hand", "any", "some", "much", "many", "please", "me", "for", "our", "my", "what", "about",
    "stock", "count", "how", "it", "us", "now", "today", "still", "to", "tell", "check",
}


class _Need(Exception):
    def __init__(self, calls: list[tuple[str, dict]]) -> None:
        super().__init__(calls)
        self.calls = calls


@dataclass(frozen=True)
class _Res:
    ok: bool
    data: dict

    @property
    def error(self) -> str:
        return str(self.data.get("error", "failed"))


def _key(name: str, args: dict) -> tuple[str, str]:
    return name, json.dumps(args, sort_keys=True)


def _parse_args(text: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class _Results:
    """What the tools answered since the request, looked up by (tool, arguments)."""

    def __init__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> None:
        self.specs = {t.name: t for t in tools}
        self.available = set(self.specs)
        self.done: dict[tuple[str, str], _Res] = {}
        self.issued = 0
        by_id: dict[str, tuple[str, str]] = {}
        for message in messages:
            if message.role == "assistant":
                for call in message.tool_calls:
                    by_id[call.id] = _key(call.name, _parse_args(call.arguments))
                    self.issued += 1
            elif message.role == "tool" and message.tool_call_id in by_id:
                try:
                    data = json.loads(message.text)
                except ValueError:
                    data = {"error": message.text}
                if not isinstance(data, dict):
                    data = {"error": message.text} if message.is_error else {"value": data}
                self.done[by_id[message.tool_call_id]] = _Res(not message.is_error, data)

    def optional_argument(self, tool: str, argument: str) -> bool:
        """Whether the tool offers `argument` and may be called without it (read from its schema)."""
        spec = self.specs.get(tool)
        if spec is None:
            return False
        parameters = spec.parameters
        return argument in parameters.get("properties", {}) and argument not in parameters.get("required", [])

    def get(self, name: str, **args: Any) -> _Res:
        return self.get_all([(name, args)])[0]

    def get_all(self, calls: list[tuple[str, dict]]) -> list[_Res]:
        missing = [
            (name, args) for name, args in calls
            if name in self.available and _key(name, args) not in self.done
        ]
        if missing:
            raise _Need(missing)
        return [
            self.done.get(_key(name, args))
            or _Res(False, {"error": f"the {name} tool is not available"})
            for name, args in calls
        ]


def _items(stock: _Res) -> list[dict] | None:
    items = stock.data.get("items") if stock.ok else None
    if not isinstance(items, list) or not all(isinstance(i, dict) and "item" in i for i in items):
        return None
    return items


def _low(item: dict) -> bool:
    """Below the reorder point by the stock position (on hand plus on order) when the tool gives it."""
    try:
        return item.get("position", item["on_hand"]) < item["reorder_point"]
    except (KeyError, TypeError):
        return False


def _on_order(data: dict) -> str:
    """`, 6 tubs on order` when the tool says something is on order (the figures name the order and its state)."""
    quantity = data.get("on_order")
    return f", {quantity} {data.get('unit', '')}".rstrip() + " on order" if isinstance(quantity, int) and quantity \
        else ""


def _names_in(line: str, names: list[str]) -> list[str]:
    found = []
    for name in names:
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", line, re.IGNORECASE)
        if match:
            found.append((match.start(), name))
    return [name for _, name in sorted(found)]


def _stock_error(stock: _Res) -> str:
    return f"I could not read the stock: {stock.error if not stock.ok else 'unexpected answer'}."


def _stock_summary(items: list[dict]) -> str:
    parts = [
        f"{i['item']} {i.get('on_hand')} {i.get('unit', '')}".rstrip() + _on_order(i).replace(",", " +", 1)
        + (" (below reorder point)" if _low(i) else "")
        for i in items
    ]
    return "Stock: " + (", ".join(parts) if parts else "no items") + "."


def _low_stock(results: _Results) -> str:
    """`low`: the items below their reorder point by position (on hand plus on order)."""
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock)
    low = [i for i in items if _low(i)]
    if not low:
        return "Nothing is low: every item is at or above its reorder point (counting what is on order)."
    return "Low: " + ", ".join(f"{i['item']} {i.get('on_hand')} {i.get('unit', '')}".rstrip() + _on_order(i)
                               for i in low) + "."


def _query(line: str, results: _Results) -> str:
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock)
    names = [str(i["item"]) for i in items]
    named = _names_in(line, names)
    if named:
        answers = results.get_all([("get_item", {"item": n}) for n in named])
        return "\n".join(
            f"{r.data.get('item', n)}: {r.data.get('on_hand')} {r.data.get('unit', '')}".rstrip() + " on hand"
            + _on_order(r.data) + "."
            if r.ok else f"I could not check {n}: {r.error}."
            for n, r in zip(named, answers)
        )
    match = _QUERY.search(line)
    rest = line[match.end():] if match else ""
    words = [w for w in re.findall(r"[^\W\d_][\w'-]*", rest) if w.lower() not in _STOPWORDS]
    if not words:
        return _stock_summary(items)
    answer = results.get("get_item", item=words[0])
    if answer.ok:
        return (f"{answer.data.get('item', words[0])}: {answer.data.get('on_hand')} "
                f"{answer.data.get('unit', '')}").rstrip() + " on hand" + _on_order(answer.data) + "."
    if any(name in answer.error for name in names):  # the tool's error already lists the items
        return f"I could not find {words[0]}: {answer.error}."
    return f"I could not find {words[0]}: {answer.error}. Items I know: {', '.join(names) or 'none'}."


def _brief_for_all(results: _Results) -> str:
    """reorder_need without an item: every item below its reorder point and the total, from the tool."""
    answer = results.get("reorder_need")
    needs = answer.data.get("items") if answer.ok else None
    if not isinstance(needs, list) or not all(isinstance(n, dict) and "item" in n for n in needs):
        return f"I could not work out the opening brief: {answer.error if not answer.ok else 'unexpected answer'}."
    if not needs:
        return "Opening brief: every item is at or above its reorder point."
    parts = [f"{n['item']} needs {n.get('quantity')} {n.get('unit', '')}".rstrip() for n in needs]
    total = f"; total {answer.data['total']}" if "total" in answer.data else ""
    return "Opening brief: " + ", ".join(parts) + total + "."


def _brief(results: _Results) -> str:
    if results.optional_argument("reorder_need", "item"):
        return _brief_for_all(results)
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock)
    low = [i for i in items if _low(i)]
    if not low:
        return "Opening brief: every item is at or above its reorder point. " + _stock_summary(items)
    needs = results.get_all([("reorder_need", {"item": i["item"]}) for i in low])
    parts = []
    for item, need in zip(low, needs):
        if not need.ok:
            parts.append(f"{item['item']}: could not work out the need ({need.error})")
            continue
        d = need.data
        cost = f" ({d['cost']})" if "cost" in d else ""
        parts.append((f"{d.get('item', item['item'])} needs {d.get('quantity')} "
                      f"{d.get('unit', item.get('unit', ''))}").rstrip() + cost)
    return "Opening brief: " + ", ".join(parts) + "."


def _reorder(results: _Results, line: str = "") -> str:
    """Every low item without an open proposal; only the items the line names, when it names some (a stock
    watcher's check names its item)."""
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock)
    named = set(_names_in(line, [str(i["item"]) for i in items]))
    low = [i for i in items if _low(i) and (not named or i["item"] in named)]
    waiting = [i for i in low if i.get("open_proposal")]
    candidates = [i for i in low if not i.get("open_proposal")]
    lines: list[str] = []
    if not candidates:
        lines.append("Nothing to reorder: no item below its reorder point is without an open proposal.")
    else:
        needs = results.get_all([("reorder_need", {"item": i["item"]}) for i in candidates])
        to_draft = []
        for item, need in zip(candidates, needs):
            if not need.ok:
                lines.append(f"I could not work out the need for {item['item']}: {need.error}.")
            elif isinstance(need.data.get("quantity"), int) and need.data["quantity"] > 0:
                to_draft.append((item, need.data["quantity"]))
            else:
                lines.append(f"{item['item']} needs nothing more.")
        drafts = results.get_all([("draft_order", {"item": i["item"], "quantity": q}) for i, q in to_draft])
        to_propose = []
        for (item, quantity), draft in zip(to_draft, drafts):
            if draft.ok:
                to_propose.append((item, draft.data.get("quantity", quantity)))
            else:
                lines.append(f"I could not draft an order for {item['item']}: {draft.error}.")
        proposals = results.get_all([("propose_order", {"item": i["item"], "quantity": q}) for i, q in to_propose])
        for (item, _), proposal in zip(to_propose, proposals):
            p = proposal.data
            unit = item.get("unit", "")
            if not proposal.ok:
                lines.append(f"I could not propose an order for {item['item']}: {proposal.error}.")
            elif p.get("state") == "awaiting_approval":
                lines.append(
                    f"Proposed: {p.get('item', item['item'])} {p.get('quantity')} {unit}".rstrip()
                    + f" for {p.get('total')}, awaiting your approval."
                )
            else:
                reason = p.get("reason") or "no reason given"
                lines.append(f"The {item['item']} order was not accepted ({p.get('state')}): {reason}.")
    for item in waiting:
        lines.append(f"{item['item']} already has an open proposal awaiting your approval.")
    return "\n".join(lines)


def _intents(text: str) -> tuple[list[tuple[str, str]], bool]:
    """(intent, argument) per line in order, without repeats; and whether some line was not understood."""
    intents: list[tuple[str, str]] = []
    not_understood = False
    for raw in text.splitlines() or [""]:
        line = raw.strip()
        lowered = line.lower()
        if re.search(r"\bbrief(?:ing)?\b", lowered):
            intent = ("brief", "")
        elif re.search(r"\breorder(?:s|ing)?\b", lowered):
            intent = ("reorder", lowered)
        elif re.fullmatch(r"\s*(?:what(?:'s| is) )?low(?: stock)?\??\s*", lowered):
            intent = ("low", "")
        elif _QUERY.search(lowered):
            intent = ("query", lowered)
        elif re.search(r"\bhelp\b", lowered) or lowered in ("/help", "/start"):
            intent = ("help", "")
        else:
            not_understood = not_understood or bool(line)
            continue
        if intent not in intents:
            intents.append(intent)
    return intents, not_understood or not intents


class OfflineModel:
    name = "offline"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelTurn:
        start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        request = messages[start].text if start >= 0 else ""
        results = _Results(messages[start + 1:], tools)
        intents, not_understood = _intents(request)

        answers: list[str] = []
        needed: list[tuple[str, dict]] = []
        for intent, argument in intents:
            try:
                if intent == "brief":
                    answers.append(_brief(results))
                elif intent == "reorder":
                    answers.append(_reorder(results, argument or ""))
                elif intent == "low":
                    answers.append(_low_stock(results))
                elif intent == "query":
                    answers.append(_query(argument, results))
                else:
                    answers.append(HELP)
            except _Need as need:
                for call in need.calls:
                    if _key(*call) not in {_key(*c) for c in needed}:
                        needed.append(call)
        if needed:
            calls = tuple(
                ToolCall(id=f"offline-{results.issued + n}", name=name, arguments=json.dumps(args))
                for n, (name, args) in enumerate(needed)
            )
            return ModelTurn(text="", tool_calls=calls)
        if not intents:
            return ModelTurn(text=f"{NOT_UNDERSTOOD}\n\n{HELP}", tool_calls=())
        if not_understood:
            answers.append(SOME_NOT_UNDERSTOOD if HELP not in answers else "")
        return ModelTurn(text="\n\n".join(a for a in answers if a), tool_calls=())
