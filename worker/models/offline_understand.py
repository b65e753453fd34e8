"""What the offline model understands in one line of an owner's message (English and Spanish), without tools.

`understand(line, catalogue)` gives the intent, the item (or the candidates of an ambiguous typo), the period of a
cover question and the language to answer in. The catalogue is the shop's item names and aliases as `list_stock`
returned them; with no catalogue yet (`None`) a line that may name an item says so (`needs_items`), and the model
asks `list_stock` first.

Items are matched in this order, case- and accent-insensitively: the name or an alias as written or in the plural
(`strawberries`, `peaches`, `peras`); one word of a name of several words when only one item has it (`mint` for
`mint chip`); else the closest name within an edit distance scaled to its length (1 for up to 5 letters, 2 for
up to 8, 3 beyond; a swap of two neighbouring letters counts 1), and only when one item is the closest: two
items equally close make the line ambiguous, and the model asks which one.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

INTENTS = ("stock", "stock_all", "low", "cover", "order", "reorder", "brief", "greet", "thanks", "ack", "help",
           "ambiguous", "unknown", "sales", "ranking", "on_order", "price", "pending", "received")
# the everyday questions' Spanish words: never items, and they make a line Spanish
_SPANISH_EVERYDAY = {
    "vende", "venden", "vendimos", "vendio", "vendido", "vendidos", "ventas", "venta", "menos", "mejor", "peor",
    "pedida", "pedidos", "pedidas", "viene", "vienen", "camino", "llega", "llegan", "llegara", "cuando", "esta",
    "cuesta", "cuestan", "costaria", "costarian", "cuestas", "precio", "precios", "un", "una", "del", "de",
    "pendiente", "pendientes", "aprobar", "aprobacion", "propuestas", "propuesta", "esperando", "espera",
    "llego", "llegaron", "ha", "han", "llegado", "ya", "recibimos", "tiempo", "tengo", "cuantos",
}

_SPANISH = {
    "hola", "gracias", "buenos", "buenas", "dias", "tardes", "noches", "cuanto", "cuanta", "cuantos", "cuantas",
    "hay", "tenemos", "queda", "quedan", "que", "falta", "faltan", "acabando", "acaba", "acabar", "suficiente",
    "suficientes", "alcanza", "alcanzara", "para", "hasta", "el", "la", "los", "las", "fin", "semana", "pide",
    "pedir", "pedido", "pidele", "encarga", "mas", "ayuda", "resumen", "inventario", "existencias", "manana",
    "hoy", "lunes", "martes", "miercoles", "jueves", "viernes", "sabado", "domingo", "bajo", "poco", "pocos",
    "necesito", "necesitamos", "dura", "durara", "cual", "puedes", "hacer", "de", "del", "y", "por", "favor",
    "esta", "estan", "es", "muy", "una", "un", "con", "como", "donde", "cuando", "porque", "pero", "tengo", "tiene",
    "hace", "aqui", "ahora", "se", "nos", "algo", "todo", "todos", "vale", "perfecto", "genial", "entendido", "acuerdo",
}
_STOP = {
    # words that are never an item, even misspelt
    "how", "much", "many", "what", "whats", "what's", "stock", "count", "have", "left", "there", "still", "enough",
    "order", "more", "some", "need", "tubs", "boxes", "units", "last", "long", "will", "until", "till", "week",
    "weekend", "friday", "monday", "tuesday", "thursday", "saturday", "sunday", "wednesday", "tomorrow", "today",
    "please", "thanks", "thank", "hello", "morning", "help", "brief", "running", "anything", "everything", "about",
    "check", "does", "we've", "got", "tell", "show", "with", "from", "this", "that", "they", "them", "these",
    "those", "would", "could", "should", "days", "hours", "reorder", "low", "out", "any", "the", "and", "for",
    "opening", "prepare", "is", "are", "do", "we", "our", "of", "in", "on", "to", "it", "a", "an", "me", "my",
    "nice", "weather", "buy", "get", "else", "again", "also", "just", "okay",
    "sell", "sells", "selling", "sold", "sales", "seller", "sellers", "best", "worst", "least", "most", "fast",
    "slow", "slowest", "fastest", "top", "flavour", "flavor", "ordered", "coming", "come", "comes", "came",
    "arrive", "arrives", "arriving", "arrived", "delivery", "deliveries", "expected", "due", "here", "cost",
    "costs", "price", "prices", "pending", "waiting", "approve", "approval", "needs", "proposals", "proposal",
    "when", "capital",
} | _SPANISH | _SPANISH_EVERYDAY
_GREET = {"hi", "hello", "hey", "hiya", "morning", "hola", "buenas", "buenos", "yo", "howdy", "evening",
          "afternoon", "good"}
_THANKS = {"thanks", "thank", "thx", "ty", "cheers", "gracias", "ta", "merci"}
# an acknowledgement after an answer ("ok", "got it", "vale"): answered in kind, never as a line not understood
_ACK = {"ok", "okay", "k", "kk", "okey", "great", "perfect", "cool", "fine", "noted", "understood", "alright",
        "vale", "perfecto", "genial", "entendido", "listo"}
_WEEKDAYS = {"monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "wednesday": 2, "wed": 2, "thursday": 3, "thu": 3,
             "friday": 4, "fri": 4, "saturday": 5, "sat": 5, "sunday": 6, "sun": 6,
             "lunes": 0, "martes": 1, "miercoles": 2, "jueves": 3, "viernes": 4, "sabado": 5, "domingo": 6}


_COURTESY = _GREET | _THANKS | _ACK | {
    "got", "it", "sounds", "acuerdo", "you", "there", "so", "very", "much", "lot", "a", "all", "everyone", "again",
    "mate", "team", "de", "nada", "muchas", "dias", "tardes", "noches", "day", "morning", "afternoon", "evening",
    "good"}


def _courtesy(words: list[str]) -> str | None:
    """"greet", "thanks" or "ack" when the line starts with one."""
    first, second = words[0], words[1] if len(words) > 1 else ""
    if first in _THANKS or (first == "muchas" and second == "gracias"):
        return "thanks"
    if first in _ACK or (first, second) in {("got", "it"), ("sounds", "good"), ("de", "acuerdo")}:
        return "ack"
    if first == "good":
        return "greet" if second in {"morning", "afternoon", "evening", "day"} else None
    return "greet" if first in _GREET else None


def fold(text: str) -> str:
    """Lowercase without accents: `¿Cuánta VAINILLA?` -> `¿cuanta vainilla?`."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words_of(text: str) -> list[str]:
    return re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+", fold(text))


def singulars(word: str) -> set[str]:
    """The word and what it may be the plural of: `strawberries` -> strawberry, `peaches` -> peach, `peras` -> pera."""
    out = {word}
    if len(word) > 3 and word.endswith("ies"):
        out.add(word[:-3] + "y")
    if len(word) > 3 and word.endswith("es"):
        out.add(word[:-2])
    if len(word) > 2 and word.endswith("s"):
        out.add(word[:-1])
    return out


def distance(a: str, b: str, limit: int) -> int:
    """Edit distance with neighbouring swaps counting 1 (optimal string alignment); `limit + 1` once beyond it."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]


def allowed_distance(name: str) -> int:
    """How many edits a typo of a name may have: scaled to its length."""
    n = len(name)
    return 0 if n <= 3 else 1 if n <= 5 else 2 if n <= 8 else 3


@dataclass(frozen=True)
class Catalogue:
    """The shop's items and their other names, as `list_stock` gave them."""
    items: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()      # (alias, item)

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> Catalogue:
        items = tuple(str(r["item"]) for r in rows)
        aliases = tuple((fold(str(a)), str(r["item"])) for r in rows
                        for a in (r.get("aliases") or []) if isinstance(a, str) and a.strip())
        return cls(items, aliases)

    def names(self) -> list[tuple[tuple[str, ...], str]]:
        """(the words of a name or alias, its item), longest first."""
        out = [(tuple(words_of(i)), i) for i in self.items] + [(tuple(words_of(a)), i) for a, i in self.aliases]
        return sorted((n for n in out if n[0]), key=lambda n: -len(n[0]))


@dataclass(frozen=True)
class Period:
    """A cover question's period: a number of days, or a last day (inclusive), with how the owner said it."""
    days: int | None = None
    until: date | None = None
    words: str = ""


@dataclass(frozen=True)
class Understood:
    intent: str
    items: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()       # an ambiguous typo: the items equally close
    lang: str = "en"
    period: Period | None = None
    word: str = ""                          # an unknown word after a stock question (the tool says it is unknown)
    quantity: int | None = None             # "order 10 vanilla", "how much would 10 vanilla cost"
    days: int | None = None                 # a sales window: "this week" is 7 days
    worst: bool = False                     # a ranking from the slowest
    needs_items: bool = False               # understood only once the item names are known
    asks_low: bool = False                  # "is vanilla low?": the answer says how it stands to its reorder point

    @property
    def item(self) -> str | None:
        return self.items[0] if self.items else None


@dataclass
class _Match:
    items: list[str] = field(default_factory=list)
    ambiguous: tuple[str, ...] = ()
    used: set[int] = field(default_factory=set)      # word positions naming an item


def match_items(words: list[str], catalogue: Catalogue) -> _Match:
    found: list[tuple[int, str]] = []
    used: set[int] = set()
    names = catalogue.names()
    for name, item in names:                                   # exact, or in the plural (the last word)
        n = len(name)
        for start in range(len(words) - n + 1):
            if any(p in used for p in range(start, start + n)):
                continue
            window = words[start:start + n]
            if window[:-1] == list(name[:-1]) and name[-1] in singulars(window[-1]):
                found.append((start, item))
                used.update(range(start, start + n))
    by_word: dict[str, set[str]] = {}
    for name, item in names:
        if len(name) > 1:
            for w in name:
                by_word.setdefault(w, set()).add(item)
    for pos, word in enumerate(words):                         # one word of a longer name, when only one has it
        if pos in used or word in _STOP or len(word) < 4:
            continue
        owners = {i for w in singulars(word) for i in by_word.get(w, ())}
        if len(owners) == 1:
            found.append((pos, owners.pop()))
            used.add(pos)
    ambiguous: tuple[str, ...] = ()
    if not found:                                              # typos: the closest single-word name, if unique
        singles = [(parts[0], item) for parts, item in names if len(parts) == 1]
        for pos, word in enumerate(words):
            if word in _STOP or len(word) < 3 or word.isdigit():
                continue
            best, closest = (99, 99), set()
            for single, item in singles:
                limit = allowed_distance(single)
                # the distance, then how much of a plural ending it took: `peaces` is closer to peach (`peace`)
                # than to pear (`peac`)
                d = min((distance(form, single, limit), len(word) - len(form)) for form in singulars(word))
                if d[0] <= limit and d < best:
                    best, closest = d, {item}
                elif d[0] <= limit and d == best:
                    closest.add(item)
            if len(closest) == 1:
                found.append((pos, closest.pop()))
                used.add(pos)
            elif len(closest) > 1 and not ambiguous:
                ambiguous = tuple(sorted(closest))
                used.add(pos)
    items: list[str] = []
    for _, item in sorted(found):
        if item not in items:
            items.append(item)
    return _Match(items, ambiguous, used)


def _period(text: str, words: list[str], today: date | None) -> Period | None:
    number = re.search(r"(\d+)\s*(day|dia|week|semana)", text)
    if number:
        n = int(number.group(1))
        return Period(days=n * 7 if number.group(2) in ("week", "semana") else n, words="n_days")
    if "weekend" in words or "fin de semana" in text or "finde" in words:
        if today is None:
            return Period(words="weekend")
        return Period(until=today + timedelta(days=(6 - today.weekday()) % 7), words="weekend")
    for word in words:
        if word in _WEEKDAYS and (len(word) > 3 or word in ("fri", "sat", "sun", "mon", "tue", "wed", "thu")):
            day = None if today is None else today + timedelta(days=(_WEEKDAYS[word] - today.weekday()) % 7)
            return Period(until=day, words=word)
    if "tomorrow" in words or "manana" in words:
        return Period(until=None if today is None else today + timedelta(days=1), words="tomorrow")
    if "today" in words or "tonight" in words or "hoy" in words:
        return Period(until=today, words="today")
    if re.search(r"\b(a|the|this|next|one|una|la)\s+(week|semana)\b", text):
        return Period(days=7, words="week")
    return None


_LOW = re.compile(r"\b(low|running out|run out|runs out|short|se esta acabando|acabando|se acaba|falta|faltan|"
                  r"bajo|bajos|baja|bajas|poco stock|queda poco|quedan pocos|quedan pocas|"
                  r"need to (re)?order|should i (re)?order|what to (re)?order|"
                  r"hay que pedir|tengo que pedir)\b")
_COVER = re.compile(r"\b(enough|last|lasts|how long|run out|runs out|running out|suficiente|suficientes|alcanza|"
                    r"alcanzara|dura|durara|hasta cuando|days left|how many days|cuantos dias)\b")
# the everyday questions (issue 27): a delivery that came, what waits for the owner, prices, what is on order,
# how fast things sell; checked in this order, before an order ("the strawberry order is here" came)
_RECEIVED = re.compile(r"\b(came|arrived|has arrived|have arrived|is here|are here|got here|turned up|"
                       r"got the \w+( \w+)? delivery|llego|llegaron|ha llegado|han llegado|recibimos|ya esta aqui)\b")
_PENDING = re.compile(r"\b(pending|waiting for (me|my|you)|awaiting|approve|approval|for me to do|needs? my|"
                      r"pendiente|pendientes|aprobar|aprobacion|propuestas esperando|me espera)\b")
_PRICE = re.compile(r"\b(cost|costs|price|prices|priced|cuesta|cuestan|costaria|costarian|precio|precios)\b"
                    r"|\bhow much (is|are) (a |an |the )?(?!there\b|left\b)")
_ON_ORDER = re.compile(r"\b(on order|ordered|coming|arriving|arrive|arrives|come|comes|due|expected|expecting|"
                       r"deliveries|delivery|on (its|their|the) way|en camino|llega|llegan|llegara|viene|vienen|"
                       r"pedido|pedida|pedidos|pedidas)\b")
_SALES = re.compile(r"\b(sell|sells|selling|sold|sales|seller|sellers|vende|venden|vendimos|vendio|vendido|"
                    r"vendidos|ventas)\b")
_RANK = re.compile(r"\b(best|worst|top|most|least|slowest|fastest|mas|menos|mejor|peor)\b")
_WORST = re.compile(r"\b(worst|least|slowest|menos|peor)\b")
_STOCK = re.compile(r"\b(stock|how much|how many|count|left|have|got|any|cuanto|cuanta|cuantos|cuantas|hay|queda|"
                    r"quedan|tenemos|inventario|existencias|inventory|everything)\b")
_STOCK_ALL = re.compile(r"^\W*(stock|inventory|inventario|existencias|everything|all stock|what do we have|"
                        r"what have we got|que tenemos|que hay)\W*$|\b(all|every|todo|todas|todos)\b")
_ORDER = re.compile(r"\b(order|buy|get more|pide|pedir|pidele|encarga|compra|comprar)\b")
_HELP = re.compile(r"^\W*(/?help|/start|ayuda|commands|menu)\W*$|\b(help|ayuda|what can you do|que puedes hacer|"
                   r"what do you do|how does this work)\b")


def understand(line: str, catalogue: Catalogue | None, today: date | None = None) -> Understood:
    text = fold(line).strip()
    words = words_of(line)
    spanish = sum(w in _SPANISH for w in words)
    lang = "es" if spanish and (spanish >= 2 or set(words) & {
        "hola", "gracias", "cuanto", "cuanta", "cuantos", "cuantas", "hay", "pide", "ayuda", "resumen",
        "inventario", "existencias", "falta", "faltan", "suficiente", "alcanza", "tenemos", "queda", "quedan",
        "acabando", "buenos", "buenas", "mas", "vale", "perfecto", "genial", "entendido", "acuerdo"} | (
        _SPANISH_EVERYDAY - {"de", "un", "una", "ha", "ya", "esta", "menos"})) else "en"
    if not words:
        return Understood("unknown", lang=lang)
    if re.search(r"\b(brief|briefing|resumen|summary)\b", text):
        return Understood("brief", lang=lang)
    if re.search(r"\breorder(s|ing)?\b", text) and not _LOW.search(text):
        named = () if catalogue is None else tuple(match_items(words, catalogue).items)
        return Understood("reorder", named, lang=lang, needs_items=catalogue is None)
    courteous = _courtesy(words)
    if courteous:
        if all(w in _COURTESY for w in words):
            return Understood(courteous, lang=lang)
        # "thanks, how much vanilla": the question is answered; the courtesy alone when the rest says nothing
        lead = re.match(r"^\W*(?:(?:" + "|".join(sorted(_COURTESY, key=len, reverse=True)) + r")\b\W*)+", text)
        rest = understand(text[lead.end():] if lead else text, catalogue, today)
        if rest.intent == "unknown" and not rest.needs_items:
            return Understood(courteous, lang=lang)
        return rest
    if _HELP.search(text):
        return Understood("help", lang=lang)
    if catalogue is None:
        return Understood("unknown", lang=lang, needs_items=True)
    match = match_items(words, catalogue)
    if match.ambiguous and not match.items:
        return Understood("ambiguous", candidates=match.ambiguous, lang=lang)
    items = tuple(match.items)
    quantity = None
    number = re.search(r"\b(\d{1,6})\b(?!\s*(day|dia|week|semana|hour|hora))", text)
    if number:
        quantity = int(number.group(1))
    everyday = _everyday(text, items, lang, quantity)
    if everyday is not None:
        return everyday
    if items and (_ORDER.search(text) or re.search(r"\b(need|want|get|necesito|necesitamos) (more|mas)\b", text)):
        return Understood("order", items, lang=lang, quantity=quantity if quantity and quantity > 0 else None)
    if items and _COVER.search(text):
        return Understood("cover", items, lang=lang, period=_period(text, words, today))
    if not items and re.match(r"^\W*(please\s+)?(order|pide|pedir|encarga|compra|buy)\b", text):
        return Understood("reorder", lang=lang)               # "order what we need", "pide lo que falta"
    if not items and re.search(r"\b(enough|suficiente|suficientes|alcanza)\b", text):
        return Understood("cover", (), lang=lang, period=_period(text, words, today))
    if not items and _LOW.search(text):
        return Understood("low", lang=lang)
    if items:
        return Understood("stock", items, lang=lang, asks_low=bool(_LOW.search(text)))
    if _STOCK_ALL.search(text):
        return Understood("stock_all", lang=lang)
    stock = _STOCK.search(text)
    if stock:
        after = [w for w in words_of(text[stock.end():]) if w not in _STOP and not w.isdigit()]
        if after:
            return Understood("stock", lang=lang, word=after[0])
        return Understood("stock_all", lang=lang)
    return Understood("unknown", lang=lang)


def _sales_days(text: str) -> int | None:
    """The sales window a line names: `this week` is 7 days, `N days` N; None for the tool's default."""
    number = re.search(r"(\d+)\s*(day|dia)", text)
    if number:
        return max(1, min(365, int(number.group(1))))
    return 7 if re.search(r"\b(week|semana)\b", text) else None


def _everyday(text: str, items: tuple[str, ...], lang: str, quantity: int | None) -> Understood | None:
    """A delivery that came, what waits for the owner, a price, what is on order, how fast things sell; None when
    the line asks none of these."""
    if _RECEIVED.search(text) and not re.search(r"\b(when|cuando)\b", text):
        return Understood("received", items, lang=lang)
    if _PENDING.search(text) and not _PRICE.search(text):
        return Understood("pending", lang=lang)
    if items and _PRICE.search(text):
        return Understood("price", items, lang=lang, quantity=quantity if quantity and quantity > 0 else None)
    if _ON_ORDER.search(text) and not _SALES.search(text) and not re.search(r"\bwhat (do|should) i\b", text):
        return Understood("on_order", items, lang=lang)
    if _SALES.search(text) or (not items and _RANK.search(text) and re.search(r"\b(flavou?r|item|sabor)s?\b", text)):
        days = _sales_days(text)
        if not items and _RANK.search(text):
            return Understood("ranking", lang=lang, days=days, worst=bool(_WORST.search(text)))
        if items:
            return Understood("sales", items, lang=lang, days=days)
    return None
