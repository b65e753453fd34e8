"""A scripted OpenAI-compatible chat-completions server that answers like a model, for bench/agent_eval.py.

It imports nothing from shopbot (only the standard library): everything it knows comes over HTTP, from the tools it
is offered, the system prompt and the tool results it gets back, as a real model's would. Per request:

* no tool result yet in this turn: it picks tools by the owner's words (typos and other languages tolerated), with
  the item it recognises from the prompt's item list, and asks for them; a greeting or a question about the date
  is answered at once;
* tool results present: it writes short prose citing a few of the numbers in them (the asked item's first), each in
  a rendering drawn with a fixed seed (`2`, `2.0`, `2 tubs`, `1,800`, `$3.00`, `3.00 USD`, `300 cents`, rounded
  fractions, dates in ISO and in words, times), and sometimes a number no tool returned.

Every answer is logged in `turns` with the exact spans it cited and invented, so the bench can check each one in
the reply the owner got.
"""
from __future__ import annotations

import difflib
import json
import random
import re
import threading
from dataclasses import dataclass, field
from datetime import date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_MONEY = re.compile(r"^(?P<sym>[$€£])(?P<major>\d{1,3}(?:,\d{3})*)\.(?P<minor>\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$")
CODES = {"$": "USD", "€": "EUR", "£": "GBP"}

# intent -> (words that ask for it, tools to call)
INTENTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("greeting", ("hello", "hi", "hey", "thanks", "thank", "bonjour", "hallo", "danke", "merci", "hola"), ()),
    ("brief", ("brief", "briefing"), ("reorder_need",)),
    ("date", ("date", "today", "day is it", "heute", "aujourd"), ()),
    ("sales", ("sell", "sold", "sales", "selling", "fast", "verkauft", "vendu"), ("sales_rate",)),
    ("cover", ("weekend", "last", "enough", "cover", "run out", "until", "reicht", "assez", "durer"),
     ("days_of_cover",)),
    ("propose", ("order more", "propose", "place an order", "bestelle"), ("reorder_need", "propose_order")),
    ("proposals", ("proposal", "proposals", "waiting", "approve", "pending"), ("open_proposals",)),
    ("low", ("low", "reorder", "below", "need to buy", "restock"), ("reorder_need",)),
    ("on_order", ("on order", "ordered", "order", "bestellt", "commande"), ("on_order",)),
    ("counts", ("count", "counted", "till"), ("recent_counts",)),
    ("cost", ("cost", "price", "expensive", "kostet", "prix", "cuesta", "pay"), ("get_item",)),
    ("stock", ("stock", "have", "left", "many", "much", "any", "reste", "haben", "queda", "stok", "lft"),
     ("get_item",)),
]


@dataclass
class Span:
    text: str
    kind: str            # "cited" or "invented"
    form: str = ""       # the rendering drawn: "count", "count+unit", "grouped", "$3.00", "3.00 USD", ...


@dataclass
class Turn:
    question: str
    parts: list[str | Span] = field(default_factory=list)   # fixed text (no digits) and spans, in order

    @property
    def text(self) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in self.parts)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-zà-ÿ]+", text.lower())


def _fuzzy(word: str, names: list[str], cutoff: float = 0.72) -> str | None:
    match = difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return match[0] if match else None


def _intent(question: str) -> tuple[str, tuple[str, ...]]:
    """The first intent a cue of which the question holds exactly; failing that, one a word is a typo of."""
    lowered = question.lower()
    words = _words(question)
    for name, cues, tools in INTENTS:
        if any((" " in cue and cue in lowered) or cue in words for cue in cues):
            return name, tools
    for name, cues, tools in INTENTS:
        if any(len(w) > 3 and len(cue) > 3 and _fuzzy(w, [cue], 0.8) for cue in cues for w in words):
            return name, tools
    return "stock", ("get_item",)


class Composer:
    """Turns tool results into prose with seeded renderings."""

    def __init__(self, rng: random.Random, today: date | None, now_hm: str | None) -> None:
        self.rng, self.today, self.now_hm = rng, today, now_hm

    def pick(self, choices: list[tuple[str, str]]) -> tuple[str, str]:
        return self.rng.choice(choices)

    def count(self, value: int, unit: str) -> tuple[str, str]:
        choices = [(str(value), "count"), (f"{value} {unit}".strip(), "count+unit" if unit else "count")]
        if value >= 1000:
            choices += [(f"{value:,}", "1,800"), (f"{value:,} {unit}".strip(), "1,800")]
        if value < 1000:
            choices.append((f"{value}.0", "2.0"))
        return self.pick(choices)

    def fraction(self, value: float) -> tuple[str, str]:
        choices = [(f"{value:g}", "fraction"), (f"{value:.1f}", "fraction rounded")]
        if value >= 1:
            choices.append((f"about {value:.0f}", "fraction rounded"))
        return self.pick(choices)

    def money(self, match: re.Match[str]) -> tuple[str, str]:
        sym, major, minor = match.group("sym"), match.group("major"), match.group("minor")
        cents = int(major.replace(",", "")) * 100 + int(minor)
        choices = [(f"{sym}{major}.{minor}", "$3.00"), (f"{major}.{minor} {CODES[sym]}", "3.00 USD"),
                   (f"{cents} cents", "300 cents")]
        if minor == "00":
            choices.append((f"{sym}{major}", "$3"))
        return self.pick(choices)

    def day(self, day: date) -> tuple[str, str]:
        month = MONTHS[day.month - 1]
        return self.pick([(day.isoformat(), "date ISO"), (f"{day.day} {month} {day.year}", "date words"),
                          (f"{month} {day.day}", "date words"),
                          (f"{day.strftime('%A')} {day.day} {MONTHS[day.month - 1]}", "date words")])

    def render(self, key: str, value: object, unit: str) -> tuple[str, str] | None:
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int):
            return (f"#{value}", "id") if key.endswith("_id") else self.count(value, "" if "days" in key else unit)
        if isinstance(value, float):
            return self.fraction(value)
        if isinstance(value, str):
            money = _MONEY.match(value)
            if money:
                return self.money(money)
            if _DAY.match(value):
                return self.day(date.fromisoformat(value))
            if _MOMENT.match(value):
                moment = datetime.fromisoformat(value)
                return self.pick([(value, "date-time ISO"), self.day(moment.date()),
                                  (moment.strftime("%H:%M"), "time")])
        return None


Fact = tuple[str | None, str, object, str]


def _facts(node: object, item: str | None = None, unit: str = "", key: str = "") -> list[Fact]:
    """(item, key, value, unit) for every leaf of a tool result."""
    if isinstance(node, dict):
        item = node.get("item", item) if isinstance(node.get("item"), str) else item
        unit = node.get("unit", unit) if isinstance(node.get("unit"), str) else unit
        out = []
        for k, v in node.items():
            if k not in ("item", "unit", "currency", "note", "delivery", "till_request"):
                out += _facts(v, item, unit, k)
        return out
    if isinstance(node, list):
        return [f for v in node for f in _facts(v, item, unit, key)]
    return [(item, key, node, unit)]


def _all_values(results: list[object], today: date | None) -> tuple[set[float], list[float], set[int]]:
    """Every value an invented number must avoid: numbers, money (major and minor), fractions (rounding), years."""
    exact: set[float] = set()
    fractions: list[float] = []
    years: set[int] = {today.year} if today else set()
    for result in results:
        for _, _, value, _ in _facts(result):
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, (int, float)):
                exact.add(float(value))
                if isinstance(value, float):
                    fractions.append(value)
            elif isinstance(value, str):
                money = _MONEY.match(value)
                if money:
                    major = int(money.group("major").replace(",", ""))
                    exact |= {float(major), major + int(money.group("minor")) / 100,
                              float(major * 100 + int(money.group("minor")))}
                elif _DAY.match(value) or _MOMENT.match(value):
                    years.add(int(value[:4]))
    return exact, fractions, years


class EvalModel:
    def __init__(self, seed: int = 7, invent_rate: float = 0.4) -> None:
        self.rng = random.Random(seed)
        self.invent_rate = invent_rate
        self.turns: list[Turn] = []
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.calls = 0

    # --- one request --------------------------------------------------------------------------------------------
    def answer(self, body: dict) -> dict:
        with self.lock:
            self.requests.append(body)
            return self._answer(body)

    def _answer(self, body: dict) -> dict:
        messages = body.get("messages", [])
        offered = {t["function"]["name"] for t in body.get("tools", [])}
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        question = messages[last_user]["content"] if last_user >= 0 else ""
        head, _, rest = question.partition("]\n\n")   # C18: today's date and time head the latest user message
        if question.startswith("[Today is ") and rest:
            system, question = f"{system}\n{head}", rest
        since = messages[last_user + 1:]
        results = [json.loads(m["content"]) for m in since if m["role"] == "tool"]
        called = [c["function"]["name"] for m in since if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        items = re.search(r"Items and their units: (.*)\.", system)
        names = re.findall(r"([a-z][a-z _-]*) \(", items.group(1)) if items else []
        today_match = re.search(r"\((\d{4}-\d{2}-\d{2})\); the time in the shop is (\d{2}:\d{2})", system)
        today = date.fromisoformat(today_match.group(1)) if today_match else None
        item = next((n for w in _words(question) for n in names if _fuzzy(w, [n]) or w.startswith(n[:5])), None)
        for foreign, name in (("vanille", "vanilla"), ("chocolat", "chocolate"), ("fresa", "strawberry"),
                              ("erdbeer", "strawberry"), ("schoko", "chocolate"), ("waffel", "cones")):
            if item is None and foreign in question.lower() and name in names:
                item = name
        intent, tools = _intent(question)
        if "stock" in question.lower() and item is None and intent == "stock":
            tools = ("list_stock",)
        pending = [t for t in tools if t in offered and t not in called]
        if intent == "propose" and item and "propose_order" in offered:
            if "reorder_need" not in called:
                return self._calls([("reorder_need", {"item": item})])
            if "propose_order" not in called:
                need = next((r for r in results if isinstance(r, dict) and r.get("quantity")), None)
                return self._calls([("propose_order", {"item": item, "quantity": need["quantity"] if need else 1})])
        elif pending and not results:
            args = []
            for name in pending:
                a: dict = {}
                if name == "get_item" and item is None:
                    name = "list_stock"
                elif name in ("get_item", "days_of_cover", "sales_rate", "recent_counts", "on_order",
                              "reorder_need") and item:
                    a["item"] = item
                if name == "sales_rate" and re.search(r"\bweek\b|7 days", question.lower()):
                    a["days"] = 7
                args.append((name, a))
            return self._calls(args)
        turn = Turn(question)
        composer = Composer(self.rng, today, today_match.group(2) if today_match else None)
        if intent == "greeting":
            turn.parts.append("Hello! I can look up stock, sales, cover and orders for you.")
        elif intent == "date" or not results:
            if today:
                text, form = composer.day(today)
                turn.parts += ["Today is ", Span(text, "cited", form), "."]
            else:
                turn.parts.append("I do not know today's date.")
        else:
            facts = [f for r in results for f in _facts(r)]
            rendered = [(i, k, composer.render(k, v, u)) for i, k, v, u in facts]
            rendered = [(i, k, r) for i, k, r in rendered if r is not None]
            mine = [f for f in rendered if item and f[0] == item] or rendered
            chosen = mine[:2] + self.rng.sample(rendered, k=min(2, len(rendered)))
            seen: set[tuple] = set()
            for subject, key, (text, form) in chosen:
                if (subject, key) in seen:
                    continue
                seen.add((subject, key))
                words = key.replace("_", " ")
                turn.parts += [f"{(subject + ' ') if subject else ''}{words}: ".capitalize(), Span(text, "cited", form),
                               ". "]
            if not chosen:
                turn.parts.append("No record says anything about that yet. ")
        if results and self.rng.random() < self.invent_rate:
            turn.parts += ["I think about ", Span(str(self._invent(results, today)), "invented", "invented"),
                           self.rng.choice([" customers came in.", " tubs went to the cafe.", " were sold."])]
        self.turns.append(turn)
        return self._text(turn.text.strip())

    def _invent(self, results: list[object], today: date | None) -> int:
        exact, fractions, years = _all_values(results, today)
        while True:
            n = self.rng.randint(41, 997)
            if float(n) in exact or n in years or any(abs(n - f) <= 1 for f in fractions):
                continue
            if today and n in (today.day,):
                continue
            return n

    # --- wire shapes ----------------------------------------------------------------------------------------------
    def _calls(self, calls: list[tuple[str, dict]]) -> dict:
        self.calls += 1
        wire = [{"id": f"call_{self.calls}_{n}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}} for n, (name, args) in enumerate(calls)]
        return self._completion({"role": "assistant", "content": None, "tool_calls": wire}, "tool_calls")

    def _text(self, text: str) -> dict:
        return self._completion({"role": "assistant", "content": text}, "stop")

    @staticmethod
    def _completion(message: dict, finish: str) -> dict:
        return {"id": "chatcmpl-eval", "object": "chat.completion", "created": 0, "model": "eval",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0}}


class EvalServer:
    """The HTTP side: POST /v1/chat/completions on 127.0.0.1, in a thread."""

    def __init__(self, model: EvalModel) -> None:
        self.model = model
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "no route"}})
                    return
                self._send(200, outer.model.answer(body))

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> EvalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
