"""The offline model's answers to the everyday questions (issue 27): how fast items sell and which sell best or
worst (`sales_rate`, with the stock from `get_item` when there is too little history), what is on order and when it
is expected (`on_order`; nothing on order said, with a proposal awaiting approval named from `open_proposals`),
prices and the cost of N (`get_item`'s unit cost, `order_cost`), what waits for the owner (`waiting_for_owner`, the
buttons /pending has) and a delivery that came (`offer_received`: the Received button of the open order; nothing is
received until the owner presses it).

Every number is copied from a tool's answer (money as the tools show it), so C13 keeps it. Words follow the owner's
language; dates are written in words in the shop's order (day first unless the system prompt's date is month first).
"""
from __future__ import annotations

from datetime import date
from typing import Any

from worker.models.offline_results import _count, _Res, _Results
from worker.models.offline_understand import Understood
from worker.money import day_words


def _ref(record: object) -> str:
    """A record number as the owner reads it (`#2`): the tools give ids as `#2` (C13), older results as 2."""
    return "#" + str(record).lstrip("#")

def _es(u: Understood) -> bool:
    return u.lang == "es"


def _day(value: object, lang: str, day_first: bool) -> str:
    """`Thursday 11 March` / `jueves 11 de marzo` from a tool's ISO day; the text as it is otherwise."""
    try:
        return day_words(date.fromisoformat(str(value)[:10]), lang, day_first=day_first, year=False)
    except ValueError:
        return str(value)


def _failed(answer: _Res, u: Understood) -> str:
    return f"No pude consultarlo: {answer.error}." if _es(u) else f"I could not look that up: {answer.error}."


def _window_args(u: Understood, item: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {} if item is None else {"item": item}
    if u.days is not None:
        args["days"] = u.days
    return args


def sales(u: Understood, results: _Results) -> str:
    answers = results.get_all([("sales_rate", _window_args(u, i)) for i in u.items])
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for answer in answers:
        if not answer.ok or not isinstance(answer.data.get("items"), list):
            lines.append(_failed(answer, u))
            continue
        rows += [dict(r, window_days=answer.data.get("window_days")) for r in answer.data["items"]
                 if isinstance(r, dict)]
    bare = [r for r in rows if not isinstance(r.get("sold_per_day"), (int, float)) or not r.get("sold")]
    stock = dict(zip([r["item"] for r in bare],
                     results.get_all([("get_item", {"item": r["item"]}) for r in bare]))) if bare else {}
    for r in rows:
        window, item = r.get("window_days"), r.get("item")
        if r in bare:
            held = stock[item].data if stock[item].ok else {}
            on_hand = (f"; {_count(held, held.get('on_hand'), u.lang)}" + (" en existencia" if _es(u) else " on hand")
                       if "on_hand" in held else "")
            if isinstance(r.get("sold_per_day"), (int, float)):
                why = (f"sin ventas registradas en los últimos {window} días" if _es(u)
                       else f"no sales recorded in the last {window} days")
            else:
                why = ("hay muy poco historial de existencias para calcular las ventas todavía" if _es(u)
                       else "there is too little stock history for a sales rate yet")
            lines.append(f"{item}: {why}{on_hand}.")
            continue
        since = f", desde {r['since']}" if _es(u) and r.get("since") else (
            f", since {r['since']}" if r.get("since") else "")
        if _es(u):
            lines.append(f"{item}, ventas: {_count(r, r.get('sold'), 'es')} en los últimos {window} días{since}, "
                         f"unas {_count(r, r.get('sold_per_day'), 'es')} al día.")
        else:
            lines.append(f"{item}: {_count(r, r.get('sold'))} sold in the last {window} days{since}, about "
                         f"{_count(r, r.get('sold_per_day'))} a day.")
    return "\n".join(lines)


def ranking(u: Understood, results: _Results) -> str:
    answer = results.get("sales_rate", **_window_args(u))
    rows = answer.data.get("items") if answer.ok else None
    if not isinstance(rows, list):
        return _failed(answer, u)
    window = answer.data.get("window_days")
    rated = [r for r in rows if isinstance(r, dict) and isinstance(r.get("sold_per_day"), (int, float))
             and r.get("sold")]
    rated.sort(key=lambda r: r["sold_per_day"], reverse=not u.worst)
    none = [str(r.get("item")) for r in rows if isinstance(r, dict) and r not in rated]
    listed = ", ".join(f"{r['item']} {_count(r, r['sold_per_day'], u.lang)}" + (" al día" if _es(u) else " a day")
                       for r in rated)
    if _es(u):
        head = "Lo que menos se vende" if u.worst else "Lo que más se vende"
        lines = [f"{head} (últimos {window} días): {listed}." if rated else
                 f"Sin ventas registradas en los últimos {window} días."]
        if none:
            lines.insert(0 if u.worst else 1, "Sin ventas: " + ", ".join(none) + ".")
        return "\n".join(lines)
    head = "Selling slowest" if u.worst else "Selling best"
    lines = [f"{head} (last {window} days): {listed}." if rated else f"No sales recorded in the last {window} days."]
    if none:
        lines.insert(0 if u.worst else 1, "No sales: " + ", ".join(none) + ".")
    return "\n".join(lines)


def _order_line(o: dict[str, Any], u: Understood, day_first: bool) -> str:
    expected = _day(o.get("expected_on"), u.lang, day_first)
    late = bool(o.get("late"))
    if _es(u):
        when = f"se esperaba el {expected} (va con retraso)" if late else f"llega hacia el {expected}"
        return (f"{o.get('item')}: pedido {_ref(o.get('proposal_id'))} de {_count(o, o.get('quantity'), 'es')} "
                f"({o.get('total')}), {when}.")
    when = f"was expected {expected} (late)" if late else f"expected {expected}"
    return (f"{o.get('item')}: {_count(o, o.get('quantity'))} on order (order {_ref(o.get('proposal_id'))}, "
            f"{o.get('total')}), {when}.")


def _proposal_line(p: dict[str, Any], u: Understood) -> str:
    if _es(u):
        return (f"la propuesta {_ref(p.get('proposal_id'))} ({p.get('item')} {_count(p, p.get('quantity'), 'es')} por "
                f"{p.get('total')}) espera tu aprobación")
    return (f"proposal {_ref(p.get('proposal_id'))} ({p.get('item')} {_count(p, p.get('quantity'))} for "
            f"{p.get('total')}) awaits your approval")


def on_order(u: Understood, results: _Results, day_first: bool) -> str:
    calls = [("on_order", {"item": i}) for i in u.items] if u.items else [("on_order", {})]
    answers = results.get_all(calls + [("open_proposals", {})])
    proposals = answers[-1].data.get("proposals") if answers[-1].ok else None
    waiting = [p for p in proposals if isinstance(p, dict)] if isinstance(proposals, list) else []
    lines: list[str] = []
    for (_, args), answer in zip(calls, answers):
        orders = answer.data.get("orders") if answer.ok else None
        if not isinstance(orders, list):
            lines.append(_failed(answer, u))
            continue
        lines += [_order_line(o, u, day_first) for o in orders if isinstance(o, dict)]
        if orders:
            continue
        item = args.get("item")
        named = [p for p in waiting if item is None or p.get("item") == item]
        if _es(u):
            text = f"{item} no está pedido" if item else "No hay nada pedido"
        else:
            text = f"{item} is not on order" if item else "Nothing is on order"
        lines.append(text + ("; " + "; ".join(_proposal_line(p, u) for p in named) if named else "") + ".")
    return "\n".join(lines)


def price(u: Understood, results: _Results) -> str:
    if u.quantity is not None:
        answers = results.get_all([("order_cost", {"item": i, "quantity": u.quantity}) for i in u.items])
    else:
        answers = results.get_all([("get_item", {"item": i}) for i in u.items])
    lines = []
    for answer in answers:
        d = answer.data
        if not answer.ok or "unit_cost" not in d:
            lines.append(_failed(answer, u))
            continue
        each = _count(d, 1, u.lang).split(" ", 1)[-1] if d.get("unit") else ""
        if u.quantity is not None:
            lines.append(f"{_count(d, d.get('quantity'), 'es')} de {d.get('item')} cuestan {d.get('total')} "
                         f"({d.get('unit_cost')} por {each or 'unidad'})." if _es(u) else
                         f"{_count(d, d.get('quantity'))} of {d.get('item')} cost {d.get('total')} "
                         f"({d.get('unit_cost')} a {each or 'unit'}).")
        else:
            lines.append(f"{d.get('item')} cuesta {d.get('unit_cost')} por {each or 'unidad'}." if _es(u) else
                         f"{d.get('item')} costs {d.get('unit_cost')} a {each or 'unit'}.")
    return "\n".join(lines)


def pending(u: Understood, results: _Results, day_first: bool) -> str:
    answer = results.get("waiting_for_owner")
    d = answer.data
    if not answer.ok or not isinstance(d.get("proposals"), list) or not isinstance(d.get("orders"), list):
        return _failed(answer, u)
    proposals = [p for p in d["proposals"] if isinstance(p, dict)]
    orders = [o for o in d["orders"] if isinstance(o, dict)]
    unsure = [str(r) for r in d.get("unsure_replies") or []]
    if not (proposals or orders or unsure):
        return ("No tienes nada pendiente: ninguna propuesta por decidir, ningún pedido en camino, todas las "
                "respuestas entregadas." if _es(u) else
                "Nothing is waiting for you: no proposal to decide, no order on its way, every reply delivered.")
    lines = ["Tienes esto pendiente:" if _es(u) else "Waiting for you:"]
    for p in proposals:
        lines.append("- " + _proposal_line(p, u) + (" (Approve o Reject abajo)." if _es(u)
                                                     else " (Approve or Reject below)."))
    for o in orders:
        lines.append("- " + _order_line(o, u, day_first)[:-1] + (": pulsa Received abajo cuando llegue." if _es(u)
                                                                 else ": press Received below when it comes."))
    if unsure:
        lines.append(("- respuestas que quizá no llegaron: " if _es(u) else "- replies that may not have arrived: ")
                     + ", ".join(unsure)
                     + (" (Resend o I have it abajo)." if _es(u) else " (Resend or I have it below)."))
    return "\n".join(lines)


def received(u: Understood, results: _Results, day_first: bool) -> str:
    if not u.items:       # "the delivery came": every order on its way, each with its button
        return pending(u, results, day_first)
    lines = []
    for answer in results.get_all([("offer_received", {"item": i}) for i in u.items]):
        d = answer.data
        if not answer.ok or not isinstance(d.get("orders"), list):
            lines.append(_failed(answer, u))
            continue
        for o in d["orders"]:
            what = (f"{_ref(o.get('proposal_id'))} ({o.get('item')}, {_count(o, o.get('quantity'), u.lang)}, "
                    f"{o.get('total')})")
            lines.append(f"Pulsa Received abajo para sumar el pedido {what} a las existencias; nada cambia hasta "
                         "que lo pulses." if _es(u) else
                         f"Press Received below to add order {what} to the stock; nothing changes until you press "
                         "it.")
        if not d["orders"]:
            waiting = "".join(f"; la propuesta {_ref(p)} aún espera tu aprobación" if _es(u) else
                              f"; proposal {_ref(p)} still awaits your approval" for p in d.get("open_proposals") or [])
            lines.append(f"{d.get('item')} no está pedido, así que no hay pedido que recibir{waiting}. Si llegó de "
                         "todos modos, cuenta las existencias en la caja." if _es(u) else
                         f"{d.get('item')} is not on order, so there is no order to receive{waiting}. If it came "
                         "anyway, count the stock at the till.")
    return "\n".join(lines)
