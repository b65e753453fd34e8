"""OfflineModel: the default "model", deterministic rules with no network (demo mode, no API key).

It is driven only by the conversation it is given, like a real model: the request is the last user message,
and the tool results after it are what it has learnt so far. Each call replays its rules against those
results; the first results it still lacks become the next tool calls (several at once when they do not
depend on each other, which exercises parallel calls), and when nothing is missing it answers in prose.

Each line of a request is read on its own (repeated requests are answered once) by `understand`
(worker/models/offline_understand.py: items with typos, plurals and aliases, periods, English or Spanish), and
answered in the language of its line:

* stock of one item (`get_item`, after `list_stock` gave the names) or of all (`list_stock`);
* what is low: `list_stock` and `on_order` (when the shop has it): stock plus on order below the reorder point;
* cover for a period: `days_of_cover` per item (or for all), with a verdict for the period (the weekend, a
  weekday, tomorrow, N days, a week) when the stock has a rate, and its basis; no history is said plainly;
* `order more X`: `reorder_need` (or the quantity given), `draft_order`, `propose_order` (a proposal only: the
  owner approves it, C11; the shop's policy may refuse it, and its reason is told);
* `reorder`: the same for every item below its reorder point with no open proposal (only the items named, when
  the line names some: a stock watcher's check names its item);
* the brief: `reorder_need` without an item when its schema allows (one call, with the total), else
  `list_stock` then `reorder_need` per low item and no total (no tool computed one);
* greetings, thanks, help, an ambiguous typo (which one?) and a line it does not understand: one line each.

Every number in its prose is copied from a tool result (money as the tools show it, e.g. `$6.00`), so C13 keeps
them; it never states a number it computed itself (a verdict compares, it does not print the period's length).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any

from store import LimitKind
from worker.models import offline_everyday as everyday
from worker.models import offline_suggest
from worker.models.base import Message, ModelTurn, ToolCall, ToolSpec
from worker.models.offline_results import _count, _key, _Need, _Res, _Results, _unit
from worker.models.offline_understand import Catalogue, Period, Understood, understand
from worker.proposals import limit_words

HELP = ("Ask me: stock (or stock <item>); what's low?; enough <item> for the weekend, until Friday or for a few "
        "days?; order more <item>; brief. I answer in English or Spanish.")
HELP_ES = ("Pregúntame: inventario (o ¿cuánta <artículo> hay?); ¿qué falta?; ¿alcanza <artículo> para el fin de "
           "semana o hasta el viernes?; pide más <artículo>; resumen. Respondo en español o en inglés.")
NOT_UNDERSTOOD = "Sorry, I did not get that: try stock, what's low?, order more <item>, or help."
NOT_UNDERSTOOD_ES = "No lo entendí: prueba inventario, ¿qué falta?, pide más <artículo> o ayuda."
SOME_NOT_UNDERSTOOD = "(Some lines I did not understand: send help to see what I can do.)"
SOME_NOT_UNDERSTOOD_ES = "(Algunas líneas no las entendí: escribe ayuda para ver lo que sé hacer.)"
GREETING = {"en": "Hello! Ask me what's low, how much of an item we have, or send help.",
            "es": "¡Hola! Pregúntame qué falta o cuánto queda de un artículo, o escribe ayuda."}
THANKS = {"en": "You're welcome!", "es": "¡De nada!"}
ACK = {"en": "Good. I'm here when you need me: ask what's low, or how much of an item we have.",
       "es": "Perfecto. Aquí estoy: pregúntame qué falta o cuánto queda de un artículo."}
_TODAY = re.compile(r"Today is [^(\n]*\((\d{4}-\d{2}-\d{2})\)")
# C18: today's date and the time head the latest user message (`[Today is ...]`): context, not a line to answer
_HEAD = re.compile(r"\A\[(Today is [^\]\n]*)\]\s*")


def _items(stock: _Res) -> list[dict[str, Any]] | None:
    items = stock.data.get("items") if stock.ok else None
    if not isinstance(items, list) or not all(isinstance(i, dict) and "item" in i for i in items):
        return None
    return items


def _low(item: dict[str, Any]) -> bool:
    """Below the reorder point by the stock position (on hand plus on order) when the tool gives it."""
    try:
        return bool(item.get("position", item["on_hand"]) < item["reorder_point"])
    except (KeyError, TypeError):
        return False


def _on_order(data: dict[str, Any], lang: str = "en") -> str:
    """`, 6 tubs on order` when the tool says something is on order."""
    quantity = data.get("on_order")
    if not isinstance(quantity, int) or isinstance(quantity, bool) or not quantity:
        return ""
    return f", {_count(data, quantity, lang)} " + ("pedidos" if lang == "es" else "on order")


def _stock_error(stock: _Res, lang: str = "en") -> str:
    reason = stock.error if not stock.ok else "unexpected answer"
    return f"No pude leer las existencias: {reason}." if lang == "es" else f"I could not read the stock: {reason}."


def _stock_summary(items: list[dict[str, Any]], lang: str = "en") -> str:
    below = " (bajo el punto de pedido)" if lang == "es" else " (below reorder point)"
    parts = [f"{i['item']} {_count(i, i.get('on_hand'), lang)}" + _on_order(i, lang).replace(",", " +", 1)
             + (below if _low(i) else "") for i in items]
    if lang == "es":
        return "Existencias: " + (", ".join(parts) if parts else "ningún artículo") + "."
    return "Stock: " + (", ".join(parts) if parts else "no items") + "."


def _against_reorder_point(d: dict[str, Any], lang: str) -> str:
    """` (below its reorder point of 8)` / ` (at or above ...)`, counting what is on order when the tool gives it."""
    if not isinstance(d.get("reorder_point"), int):
        return ""
    if lang == "es":
        return f" ({'bajo' if _low(d) else 'en o sobre'} su punto de pedido de {d['reorder_point']})"
    return f" ({'below' if _low(d) else 'at or above'} its reorder point of {d['reorder_point']})"


def _one_item(name: str, answer: _Res, lang: str, asks_low: bool = False) -> str:
    if not answer.ok:
        return (f"No pude consultar {name}: {answer.error}." if lang == "es"
                else f"I could not check {name}: {answer.error}.")
    d = answer.data
    where = " en existencia" if lang == "es" else " on hand"
    level = _against_reorder_point(d, lang) if asks_low else ""
    return f"{d.get('item', name)}: {_count(d, d.get('on_hand'), lang)}{where}{_on_order(d, lang)}{level}."


def _stock(u: Understood, results: _Results, names: list[str]) -> str:
    if u.items:
        answers = results.get_all([("get_item", {"item": n}) for n in u.items])
        return "\n".join(_one_item(n, r, u.lang, u.asks_low) for n, r in zip(u.items, answers))
    answer = results.get("get_item", item=u.word)
    if answer.ok:
        return _one_item(u.word, answer, u.lang)
    known = "" if any(name in answer.error for name in names) else (
        f" {'Artículos' if u.lang == 'es' else 'Items I know'}: {', '.join(names) or '-'}.")
    if u.lang == "es":
        return f"No encontré {u.word}: {answer.error}.{known}"
    return f"I could not find {u.word}: {answer.error}.{known}"


def _orders_by_item(results: _Results) -> dict[str, list[dict[str, Any]]]:
    """Approved orders not yet received, per item (none when the shop has no on_order tool)."""
    if "on_order" not in results.available:
        return {}
    answer = results.get("on_order")
    orders = answer.data.get("orders") if answer.ok else None
    out: dict[str, list[dict[str, Any]]] = {}
    for order in orders if isinstance(orders, list) else []:
        if isinstance(order, dict) and isinstance(order.get("item"), str) and isinstance(order.get("quantity"), int):
            out.setdefault(order["item"], []).append(order)
    return out


def _what_is_low(lang: str, results: _Results, items: list[dict[str, Any]]) -> str:
    """Below the reorder point counting what is on order (the position); on order and open proposals shown."""
    orders = {} if all("position" in i for i in items) else _orders_by_item(results)
    low, covered = [], []
    for item in items:
        if "position" in item:
            incoming = [{"quantity": item["on_order"]}] if item.get("on_order") else []
        else:
            incoming = orders.get(item["item"], [])
        try:
            position = item.get("position", item["on_hand"] + sum(o["quantity"] for o in incoming))
            below = position < item["reorder_point"]
        except (KeyError, TypeError):
            continue
        on_order = "".join(
            (f" + {o['quantity']} pedidos" if lang == "es" else f" + {o['quantity']} on order") for o in incoming)
        text = f"{item['item']} {_count(item, item['on_hand'], lang)}{on_order}"
        if below:
            rp = (f" (punto de pedido {item['reorder_point']})" if lang == "es"
                  else f" (reorder point {item['reorder_point']})")
            waiting = (("; propuesta esperando tu aprobación" if lang == "es" else "; proposal awaiting approval")
                       if item.get("open_proposal") else "")
            low.append(text + rp[:-1] + waiting + ")")
        elif incoming and item["on_hand"] < item["reorder_point"]:
            covered.append(text)
    if lang == "es":
        lines = ["Se está acabando: " + ", ".join(low) + "." if low
                 else "No falta nada: todo está en su punto de pedido o por encima."]
        if covered:
            lines.append("Bajo, pero ya pedido: " + ", ".join(covered) + ".")
        if low:
            lines.append(f"Escribe «pide más {low[0].split(' ')[0]}» para proponer un pedido.")
        return "\n".join(lines)
    lines = ["Low: " + ", ".join(low) + "." if low
             else "Nothing is low: every item is at or above its reorder point."]
    if covered:
        lines.append("Low, but already on order: " + ", ".join(covered) + ".")
    if low:
        lines.append(f"Send \"order more {[i['item'] for i in items if low[0].startswith(i['item'])][0]}\" "
                     "to propose an order.")
    return "\n".join(lines)


_WEEKDAY_WORDS = {
    "en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "es": ["el lunes", "el martes", "el miércoles", "el jueves", "el viernes", "el sábado", "el domingo"],
}


def _period_words(period: Period, lang: str) -> str:
    if period.words == "weekend":
        return "para el fin de semana" if lang == "es" else "for the weekend"
    if period.words == "tomorrow":
        return "hasta mañana" if lang == "es" else "until tomorrow"
    if period.words == "today":
        return "para hoy" if lang == "es" else "for today"
    if period.words == "week":
        return "para la semana" if lang == "es" else "for the week"
    if period.until is not None and period.words not in ("n_days",):
        return ("hasta " if lang == "es" else "until ") + _WEEKDAY_WORDS[lang][period.until.weekday()]
    return ""


def _verdict(row: dict[str, Any], period: Period | None, lang: str) -> str:
    cover = row.get("days_of_cover")
    if period is None or not isinstance(cover, (int, float)):
        return ""
    if period.days is not None:
        enough = cover >= period.days
    elif period.until is not None and isinstance(row.get("runs_out_on"), str):
        enough = row["runs_out_on"] > period.until.isoformat()
    else:
        return ""
    words = _period_words(period, lang)
    if lang == "es":
        verdict = f"Sí, alcanza {words}" if enough else f"No alcanza {words}"
    else:
        verdict = f"Yes, enough {words}" if enough else f"Not enough {words}"
    return verdict.strip() + ". "   # not a dash: "—" is what C13 puts for a number without a figure


def _cover_line(row: dict[str, Any], window: object, period: Period | None, lang: str) -> str:
    item = row.get("item")
    head = f"{item}: {_count(row, row.get('on_hand'), lang)}" + (" en existencia" if lang == "es" else " on hand")
    incoming = row.get("on_order") if isinstance(row.get("on_order"), int) else 0
    if isinstance(row.get("days_of_cover"), (int, float)):
        since = f", desde {row['since']}" if lang == "es" and row.get("since") else (
            f", since {row['since']}" if row.get("since") else "")
        if lang == "es":
            rate = _count(row, row.get("sold_per_day"), lang)
            text = (f"{head}, se venden {rate} al día (en los últimos {row.get('basis_days')} "
                    f"días{since}): unos {row['days_of_cover']} días de cobertura, se acaba hacia el "
                    f"{row.get('runs_out_on')}.")
            if incoming:
                text += (f" Con los {incoming} pedidos: {row.get('days_of_cover_with_on_order')} días.")
        else:
            rate = _count(row, row.get("sold_per_day"))
            text = (f"{head}, selling {rate} a day (over the last {row.get('basis_days')} "
                    f"days{since}): about {row['days_of_cover']} days of cover, running out around "
                    f"{row.get('runs_out_on')}.")
            if incoming:
                text += f" With the {incoming} on order: {row.get('days_of_cover_with_on_order')} days."
        return _verdict(row, period, lang) + text
    note = str(row.get("note", ""))
    if lang == "es":
        why = (f"sin ventas registradas en los últimos {window} días" if "no sales" in note
               else "hay muy poco historial para calcular un ritmo de ventas" if "too little" in note
               else "no hay historial de existencias")
        text = f"{head}, pero {why}, así que no puedo decir cuánto dura."
    else:
        why = (f"no sales are recorded in the last {window} days" if "no sales" in note
               else "there is too little stock history for a sales rate yet" if "too little" in note
               else "there is no stock history yet")
        text = f"{head}, but {why}, so I cannot say how long it lasts."
    if incoming:
        text += f" ({incoming} pedidos.)" if lang == "es" else f" ({incoming} on order.)"
    return text


def _cover(u: Understood, results: _Results) -> str:
    if "days_of_cover" not in results.available:
        return ("No tengo la herramienta de cobertura (days_of_cover)." if u.lang == "es"
                else "I cannot work out cover here: the days_of_cover tool is not available.")
    calls = [("days_of_cover", {"item": i}) for i in u.items] if u.items else [("days_of_cover", {})]
    lines = []
    for answer in results.get_all(calls):
        rows = answer.data.get("items") if answer.ok else None
        if not isinstance(rows, list):
            reason = answer.error if not answer.ok else "unexpected answer"
            lines.append(f"No pude calcular la cobertura: {reason}." if u.lang == "es"
                         else f"I could not work out the cover: {reason}.")
            continue
        rows = [r for r in rows if isinstance(r, dict)]
        if u.items:
            lines += [_cover_line(r, answer.data.get("window_days"), u.period, u.lang) for r in rows]
            continue
        # every item: the ones with a rate, shortest cover first; those without history in one line
        rated = sorted((r for r in rows if isinstance(r.get("days_of_cover"), (int, float))),
                       key=lambda r: r["days_of_cover"])
        lines += [_cover_line(r, answer.data.get("window_days"), u.period, u.lang) for r in rated]
        bare = [str(r.get("item")) for r in rows if r not in rated]
        if bare:
            lines.append((f"Sin ventas registradas en los últimos {answer.data.get('window_days')} días: "
                          if u.lang == "es" else
                          f"No sales recorded in the last {answer.data.get('window_days')} days for: ")
                         + ", ".join(bare) + ".")
    return "\n".join(lines)


def _brief_for_all(results: _Results, lang: str) -> str:
    """reorder_need without an item: every item below its reorder point and the total, from the tool."""
    answer = results.get("reorder_need")
    needs = answer.data.get("items") if answer.ok else None
    if not isinstance(needs, list) or not all(isinstance(n, dict) and "item" in n for n in needs):
        reason = answer.error if not answer.ok else "unexpected answer"
        return (f"No pude preparar el resumen: {reason}." if lang == "es"
                else f"I could not work out the opening brief: {reason}.")
    if lang == "es":
        if not needs:
            return "Resumen de apertura: todo está en su punto de pedido o por encima."
        parts = [f"{n['item']} necesita {_count(n, n.get('quantity'), lang)}" for n in needs]
        total = f"; total {answer.data['total']}" if "total" in answer.data else ""
        return "Resumen de apertura: " + ", ".join(parts) + total + "."
    if not needs:
        return "Opening brief: every item is at or above its reorder point."
    parts = [f"{n['item']} needs {_count(n, n.get('quantity'), lang)}" for n in needs]
    total = f"; total {answer.data['total']}" if "total" in answer.data else ""
    return "Opening brief: " + ", ".join(parts) + total + "."


def _brief(results: _Results, lang: str = "en") -> str:
    if results.optional_argument("reorder_need", "item"):
        return _brief_for_all(results, lang)
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock, lang)
    low = [i for i in items if _low(i)]
    head = "Resumen de apertura: " if lang == "es" else "Opening brief: "
    if not low:
        nothing = ("todo está en su punto de pedido o por encima. " if lang == "es"
                   else "every item is at or above its reorder point. ")
        return head + nothing + _stock_summary(items, lang)
    needs = results.get_all([("reorder_need", {"item": i["item"]}) for i in low])
    parts = []
    for item, need in zip(low, needs):
        if not need.ok:
            parts.append(f"{item['item']}: " + (f"no pude calcular lo que falta ({need.error})" if lang == "es"
                                                 else f"could not work out the need ({need.error})"))
            continue
        d = need.data
        cost = f" ({d['cost']})" if "cost" in d else ""
        verb = "necesita" if lang == "es" else "needs"
        parts.append(f"{d.get('item', item['item'])} {verb} {_count(d, d.get('quantity'), lang, item.get('unit', ''))}"
                     + cost)
    return head + ", ".join(parts) + "."


def _propose(results: _Results, to_draft: list[tuple[dict[str, Any], int]], lang: str) -> list[str]:
    """draft_order then propose_order for each (item, quantity): the usual policy decides (C11)."""
    lines: list[str] = []
    drafts = results.get_all([("draft_order", {"item": i["item"], "quantity": q}) for i, q in to_draft])
    to_propose = []
    for (item, quantity), draft in zip(to_draft, drafts):
        if draft.ok:
            to_propose.append((item, draft.data.get("quantity", quantity)))
        else:
            lines.append(f"No pude preparar el pedido de {item['item']}: {draft.error}." if lang == "es"
                         else f"I could not draft an order for {item['item']}: {draft.error}.")
    proposals = results.get_all([("propose_order", {"item": i["item"], "quantity": q}) for i, q in to_propose])
    for (item, _), proposal in zip(to_propose, proposals):
        p = proposal.data
        unit = _unit(item, p.get("quantity"), lang)
        if not proposal.ok:
            lines.append(f"No pude proponer el pedido de {item['item']}: {proposal.error}." if lang == "es"
                         else f"I could not propose an order for {item['item']}: {proposal.error}.")
        elif p.get("state") == "awaiting_approval":
            lines.append(f"Propuesto: {p.get('item', item['item'])} {p.get('quantity')}{unit} por {p.get('total')}, "
                         "esperando tu aprobación." if lang == "es" else
                         f"Proposed: {p.get('item', item['item'])} {p.get('quantity')}{unit} for {p.get('total')}, "
                         "awaiting your approval.")
        else:
            reason = (_limit_reason(p, lang) or p.get("reason")
                      or ("sin motivo" if lang == "es" else "no reason given"))
            lines.append(f"El pedido de {item['item']} no se aceptó ({p.get('state')}): {reason}." if lang == "es"
                         else f"The {item['item']} order was not accepted ({p.get('state')}): {reason}.")
    return lines


def _limit_reason(p: dict[str, Any], lang: str) -> str | None:
    """A spending limit's refusal in the reply's language, from the result's typed fields (its amounts already in
    the shop's money format): the same words as the card's (worker/proposals.py)."""
    try:
        kind = LimitKind(str(p.get("refusal")))
    except ValueError:
        return None
    return limit_words(kind, str(p.get("total")), str(p.get("refusal_limit")), str(p.get("refusal_spent")), lang)


def _already(item: dict[str, Any], lang: str) -> str:
    return (f"{item['item']} ya tiene una propuesta esperando tu aprobación." if lang == "es"
            else f"{item['item']} already has an open proposal awaiting your approval.")


def _reorder(results: _Results, items: list[dict[str, Any]], named: tuple[str, ...] = (), lang: str = "en") -> str:
    """Every low item without an open proposal; only the items named, when some are (a stock watcher's check
    names its item)."""
    low = [i for i in items if _low(i) and (not named or i["item"] in named)]
    waiting = [i for i in low if i.get("open_proposal")]
    candidates = [i for i in low if not i.get("open_proposal")]
    lines: list[str] = []
    if not candidates:
        lines.append("Nada que pedir: todo lo que está bajo ya tiene una propuesta." if lang == "es" else
                     "Nothing to reorder: no item below its reorder point is without an open proposal.")
    else:
        needs = results.get_all([("reorder_need", {"item": i["item"]}) for i in candidates])
        to_draft = []
        for item, need in zip(candidates, needs):
            if not need.ok:
                lines.append(f"I could not work out the need for {item['item']}: {need.error}.")
            elif isinstance(need.data.get("quantity"), int) and need.data["quantity"] > 0:
                to_draft.append((item, need.data["quantity"]))
            else:
                lines.append(f"{item['item']} no necesita más." if lang == "es"
                             else f"{item['item']} needs nothing more.")
        lines += _propose(results, to_draft, lang)
    lines += [_already(i, lang) for i in waiting]
    return "\n".join(lines)


def _order(u: Understood, results: _Results, items: list[dict[str, Any]]) -> str:
    """"order more X": the quantity the owner gave, else what brings X to its target; through the policy."""
    rows = [i for i in items if i["item"] in u.items]
    lines: list[str] = []
    waiting = [i for i in rows if i.get("open_proposal")]
    rows = [i for i in rows if not i.get("open_proposal")]
    to_draft: list[tuple[dict[str, Any], int]] = []
    if u.quantity is not None:
        to_draft = [(i, u.quantity) for i in rows]
    else:
        needs = results.get_all([("reorder_need", {"item": i["item"]}) for i in rows])
        for item, need in zip(rows, needs):
            quantity = need.data.get("quantity") if need.ok else None
            if not need.ok:
                lines.append(f"I could not work out how much {item['item']} to order: {need.error}.")
            elif isinstance(quantity, int) and quantity > 0:
                to_draft.append((item, quantity))
            else:
                position = item.get("position", item.get("on_hand"))
                counting = (" contando lo pedido" if lang_es(u) else " counting what is on order") \
                    if item.get("on_order") else ""
                if lang_es(u):
                    lines.append(f"{item['item']} no necesita pedido: {_count(item, position, 'es')}{counting}, "
                                 f"punto de pedido {item.get('reorder_point')}. Escribe «pide <cantidad> "
                                 f"{item['item']}» para una cantidad.")
                else:
                    lines.append(f"{item['item']} needs no order: {_count(item, position)}{counting}, reorder point "
                                 f"{item.get('reorder_point')}. Send \"order <quantity> {item['item']}\" for a set "
                                 "amount.")
    lines += _propose(results, to_draft, u.lang)
    lines += [_already(i, u.lang) for i in waiting]
    return "\n".join(lines)


def lang_es(u: Understood) -> bool:
    return u.lang == "es"


def _answer(u: Understood, results: _Results, day_first: bool = True) -> str:
    if u.intent == "suggest":          # worker/models/offline_suggest.py
        found = results.get("reorder_suggestions")
        return offline_suggest.answer(found.data, found.ok, u.lang)
    if u.intent == "brief":
        return _brief(results, u.lang)
    if u.intent == "greet":
        return GREETING[u.lang]
    if u.intent == "thanks":
        return THANKS[u.lang]
    if u.intent == "ack":
        return ACK[u.lang]
    if u.intent == "help":
        return HELP_ES if u.lang == "es" else HELP
    if u.intent == "ambiguous":
        options = ", ".join(u.candidates[:-1]) + (" o " if u.lang == "es" else " or ") + u.candidates[-1]
        return f"¿Cuál quieres decir: {options}?" if u.lang == "es" else f"Which one do you mean: {options}?"
    stock = results.get("list_stock")
    items = _items(stock)
    if items is None:
        return _stock_error(stock, u.lang)
    if u.intent == "stock":
        return _stock(u, results, [str(i["item"]) for i in items])
    if u.intent == "stock_all":
        return _stock_summary(items, u.lang)
    if u.intent == "low":
        return _what_is_low(u.lang, results, items)
    if u.intent == "cover":
        return _cover(u, results)
    if u.intent == "order":
        return _order(u, results, items)
    if u.intent == "reorder":
        return _reorder(results, items, u.items, u.lang)
    if u.intent in EVERYDAY:
        return EVERYDAY[u.intent](u, results, day_first)
    return NOT_UNDERSTOOD_ES if u.lang == "es" else NOT_UNDERSTOOD


EVERYDAY: dict[str, Callable[[Understood, _Results, bool], str]] = {
    "sales": lambda u, r, _: everyday.sales(u, r), "ranking": lambda u, r, _: everyday.ranking(u, r),
    "on_order": everyday.on_order, "price": lambda u, r, _: everyday.price(u, r), "pending": everyday.pending,
    "received": everyday.received}


def _day_first(system: str) -> bool:
    """Whether the shop writes the day before the month: read from the system prompt's date (`8 March 2027`)."""
    match = re.search(r"Today is ([^(\n]*)\(", str(system))
    return not match or bool(re.search(r"\b\d{1,2}\.? [^\W\d_]", match.group(1)))


def _today(system: str) -> date | None:
    match = _TODAY.search(str(system))
    try:
        return date.fromisoformat(match.group(1)) if match else None
    except ValueError:
        return None


def read_request(text: str, results: _Results, today: date | None) -> tuple[list[Understood], bool]:
    """What each line asks, in order and without repeats (the item names learnt from list_stock when a line needs
    them), and whether some line waits for list_stock."""
    out: list[Understood] = []
    catalogue: Catalogue | None = None
    waiting = False
    for raw in text.splitlines() or [""]:
        if not raw.strip():
            continue
        suggest_lang = offline_suggest.asks(raw)
        if suggest_lang is not None:
            if Understood("suggest", lang=suggest_lang) not in out:
                out.append(Understood("suggest", lang=suggest_lang))
            continue
        u = understand(raw, None, today)
        if u.needs_items:
            if catalogue is None:
                try:
                    items = _items(results.get("list_stock"))
                except _Need:
                    waiting = True
                    continue
                catalogue = Catalogue.of(items) if items is not None else Catalogue(())
            u = understand(raw, catalogue, today)
            if not catalogue.items and u.intent == "unknown":
                u = Understood("stock_all" if re.search(r"\bstock\b", raw, re.IGNORECASE) else "unknown", lang=u.lang)
        if u not in out:
            out.append(u)
    return out, waiting


class OfflineModel:
    name = "offline"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelTurn:
        start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        request = messages[start].text if start >= 0 else ""
        head = _HEAD.match(request)
        if head is not None:
            request, system = request[head.end():], f"{system}\n{head.group(1)}"
        results = _Results(messages[start + 1:], tools)
        asks, waiting = read_request(request, results, _today(system))
        known = [u for u in asks if u.intent != "unknown"]
        lang = asks[0].lang if asks else "en"
        if not known and not waiting:
            return ModelTurn(text=NOT_UNDERSTOOD_ES if lang == "es" else NOT_UNDERSTOOD, tool_calls=())
        answers: list[str] = []
        needed: list[tuple[str, dict[str, Any]]] = [("list_stock", {})] if waiting else []
        for u in known:
            try:
                answers.append(_answer(u, results, _day_first(system)))
            except _Need as need:
                for call in need.calls:
                    if _key(*call) not in {_key(*c) for c in needed}:
                        needed.append(call)
        if needed:
            return self._calls(needed, results)
        if len(known) < len(asks) and not any(u.intent == "help" for u in known):
            answers.append(SOME_NOT_UNDERSTOOD_ES if lang == "es" else SOME_NOT_UNDERSTOOD)
        return ModelTurn(text="\n\n".join(a for a in answers if a), tool_calls=())

    @staticmethod
    def _calls(needed: list[tuple[str, dict[str, Any]]], results: _Results) -> ModelTurn:
        calls = tuple(
            ToolCall(id=f"offline-{results.issued + n}", name=name, arguments=json.dumps(args))
            for n, (name, args) in enumerate(needed)
        )
        return ModelTurn(text="", tool_calls=calls)
