"""The phrase set the offline model is measured against (written before its matcher).

The shop (tests/integration/test_offline_phrases.py seeds it on a real store, then three till counts; now is Monday
2027-03-08 10:00, a week and an hour after the seed):

    item         on hand  reorder point  target  unit cost  aliases            sales in the week
    vanilla        7          8            20       $3.00    vainilla           13 (1.85 a day, 3.8 days of cover)
    chocolate     16          6            12       $2.50    choc               7 (0.99 a day, 16.1 days of cover)
    strawberry     3          5            10       $2.00    fresa              none (no cover figure)
    mint chip     12          4            12       $3.50    menta              never counted (no cover figure)
    peach          5          2             6       $4.00                       -
    pear           6          2             6       $4.00                       -

Low (below the reorder point): vanilla and strawberry. Reordering vanilla is 13 tubs for $39.00, strawberry
7 tubs for $14.00. Vanilla runs out on Friday 2027-03-12: enough for 3 days and until tomorrow, not for the weekend
nor until Friday. Chocolate lasts past the weekend.

Each phrasing: the text, the intent, the item (None when it names none), what the reply must show (strings in
the rendered reply), and the language the reply must be in. `variants()` derives more phrasings with a fixed
seed: the item's word with two neighbouring letters swapped or one letter dropped, and the whole line in upper,
lower or title case.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Phrase:
    text: str
    intent: str            # stock, stock_all, low, cover, order, brief, greet, thanks, help, ambiguous, unknown;
                           # sales, ranking, on_order, price, pending, received (the everyday set)
    item: str | None = None
    shows: tuple[str, ...] = ()
    lang: str = "en"


P = Phrase
PHRASES: tuple[Phrase, ...] = (
    # stock of one item: case, typos, plurals, punctuation
    P("how much vanilla", "stock", "vanilla", ("7",)),
    P("Vanilla?", "stock", "vanilla", ("7",)),
    P("vanila", "stock", "vanilla", ("7",)),
    P("how many VANILLA tubs do we have", "stock", "vanilla", ("7",)),
    P("any chocolates left?", "stock", "chocolate", ("16",)),
    P("choclate count", "stock", "chocolate", ("16",)),
    P("stock strawberries", "stock", "strawberry", ("3",)),
    P("how much strawbery is there", "stock", "strawberry", ("3",)),
    P("mint chip?", "stock", "mint chip", ("12",)),
    P("how much mint", "stock", "mint chip", ("12",)),
    P("do we still have peaches", "stock", "peach", ("5",)),
    P("pears", "stock", "pear", ("6",)),
    # all stock
    P("stock", "stock_all", None, ("7", "16", "3", "12")),
    P("what do we have?", "stock_all", None, ("7", "16")),
    P("inventario", "stock_all", None, ("7", "16"), "es"),
    # what is low
    P("what's low?", "low", None, ("vanilla", "strawberry")),
    P("whats running out", "low", None, ("vanilla", "strawberry")),
    P("anything low", "low", None, ("vanilla", "strawberry")),
    P("what do I need to order", "low", None, ("vanilla", "strawberry")),
    P("¿qué se está acabando?", "low", None, ("vanilla", "strawberry"), "es"),
    P("que falta", "low", None, ("vanilla", "strawberry"), "es"),
    # cover for a period
    P("do we have enough vanilla for the weekend?", "cover", "vanilla", ("3.8",)),
    P("enough vanilla until Friday?", "cover", "vanilla", ("3.8",)),
    P("is there enough vanilla for 3 days", "cover", "vanilla", ("3.8",)),
    P("will the vanilla last till tomorrow", "cover", "vanilla", ("3.8",)),
    P("enough chocolate for the weekend?", "cover", "chocolate", ("16.1",)),
    P("how long will choc last", "cover", "chocolate", ("16.1",)),
    P("enough strawberry for the week?", "cover", "strawberry", ("3", "no sales")),
    P("¿tenemos suficiente vainilla para el fin de semana?", "cover", "vanilla", ("3.8",), "es"),
    P("alcanza la fresa hasta el viernes?", "cover", "strawberry", ("3", "sin ventas"), "es"),
    # order more
    P("order more vanilla", "order", "vanilla", ("13", "$39.00")),
    P("Order more strawberry", "order", "strawberry", ("7", "$14.00")),
    P("we need more strawberries, order some", "order", "strawberry", ("7", "$14.00")),
    P("pide más vainilla", "order", "vanilla", ("13", "$39.00"), "es"),
    P("reorder", "reorder", None, ("13", "7")),
    # stock in Spanish
    P("¿cuánta vainilla hay?", "stock", "vanilla", ("7",), "es"),
    P("cuanto chocolate queda", "stock", "chocolate", ("16",), "es"),
    P("hay fresa?", "stock", "strawberry", ("3",), "es"),
    P("cuántas peras tenemos", "stock", "pear", ("6",), "es"),
    # the brief
    P("brief", "brief", None, ("13", "7")),
    P("Prepare the opening brief", "brief", None, ("13", "7")),
    P("resumen", "brief", None, ("13", "7"), "es"),
    # greetings, thanks, help
    P("hi", "greet"),
    P("Hello!", "greet"),
    P("good morning", "greet"),
    P("hola", "greet", lang="es"),
    P("buenos días", "greet", lang="es"),
    P("thanks", "thanks"),
    P("thank you!", "thanks"),
    P("cheers", "thanks"),
    P("gracias", "thanks", lang="es"),
    P("help", "help"),
    P("what can you do?", "help"),
    P("ayuda", "help", lang="es"),
    # an ambiguous typo asks which one; nonsense gets one short line
    P("how much peah", "ambiguous", None, ("peach", "pear")),
    P("the weather is nice", "unknown"),
    P("asdfgh", "unknown"),
)

ITEMS = ("vanilla", "chocolate", "strawberry", "mint chip", "peach", "pear")
SEED = 15


def _swap(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 2)      # keep the first letter: owners rarely get that wrong
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def _drop(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word))
    return word[:i] + word[i + 1:]


def _recase(text: str, rng: random.Random) -> str:
    style = rng.choice(("upper", "lower", "title", "random"))
    if style == "upper":
        return text.upper()
    if style == "lower":
        return text.lower()
    if style == "title":
        return text.title()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


ALIASES = {"vanilla": ("vainilla",), "chocolate": ("choc",), "strawberry": ("fresa",),
           "mint chip": ("menta",), "peach": (), "pear": ()}


def _item_word(phrase: Phrase) -> tuple[int, int] | None:
    """Where the item's word is in the text: a word of at least 5 letters that starts like the item's name or one
    of its aliases (in Spanish, "peras" for pear)."""
    if phrase.item is None:
        return None
    starts = {name[:3] for name in (phrase.item, *ALIASES[phrase.item])}
    close = [m for m in re.finditer(r"[^\W\d_]{5,}", phrase.text) if m.group(0).lower()[:3] in starts]
    if not close:
        return None
    match = max(close, key=lambda m: len(m.group(0)))
    return match.start(), match.end()


def variants(seed: int = SEED, per_phrase: int = 4, phrases: tuple[Phrase, ...] = PHRASES
             ) -> list[tuple[str, Phrase]]:
    """(variant text, the phrase it comes from): typos in the item's word and case changes of the line."""
    rng = random.Random(seed)
    out: list[tuple[str, Phrase]] = []
    for phrase in phrases:
        if phrase.intent in ("ambiguous", "unknown"):
            continue
        span = _item_word(phrase)
        for n in range(per_phrase):
            text = phrase.text
            if span is not None and n < 2:
                start, end = span
                word = text[start:end]
                typo = _swap(word, rng) if n == 0 else _drop(word, rng)
                text = text[:start] + typo + text[end:]
            else:
                text = _recase(text, rng)
            if text != phrase.text and text not in {v for v, _ in out}:
                out.append((text, phrase))
    return out


# The everyday set (issue 27), written before its matcher: how fast things sell, what is on order or coming, prices
# and costs, what waits for the owner, a delivery that came. Asked of the shop above after two more turns (see
# tests/integration/test_offline_phrases.py `everyday`): "order more strawberry" approved at once (order #1,
# strawberry 7 tubs for $14.00, approved Monday 2027-03-08 10:00, expected after the supplier's 3-day lead time on
# Thursday 11 March), then "order more vanilla" left awaiting approval (proposal #2, vanilla 13 tubs for $39.00).
#
#     sales over the last 14 days (the records start a week and an hour ago): vanilla 13 sold, 1.85 a day;
#     chocolate 7 sold, 0.99 a day; strawberry, mint chip, peach and pear none. This week (7 days): vanilla 13,
#     chocolate 7. Unit costs: vanilla $3.00, chocolate $2.50, strawberry $2.00, mint chip $3.50, peach and pear $4.00.
#
# A reply to "the strawberry came" must also offer the Received button of order #1 (the run calls
# `offer_received`); it never receives the order itself.
GROUPS = {"sales": "sales", "ranking": "sales", "cover": "sales", "on_order": "on order", "price": "prices",
          "pending": "waiting", "received": "receiving", "unknown": "off-shop"}
EVERYDAY: tuple[Phrase, ...] = (
    # sales: how fast, this week, best and worst, how many days it lasts
    P("how fast does chocolate sell", "sales", "chocolate", ("0.99",)),
    P("how fast is vanilla selling?", "sales", "vanilla", ("1.85",)),
    P("vanilla sales", "sales", "vanilla", ("13", "1.85")),
    P("how much vanilla did we sell this week", "sales", "vanilla", ("13",)),
    P("how many chocolates sold this week?", "sales", "chocolate", ("7",)),
    P("how fast do strawberries sell", "sales", "strawberry", ("no sales",)),
    P("what sells best?", "ranking", None, ("vanilla", "1.85")),
    P("best sellers", "ranking", None, ("vanilla", "chocolate")),
    P("what's selling worst", "ranking", None, ("strawberry", "chocolate")),
    P("top selling flavour this week", "ranking", None, ("vanilla",)),
    P("how many days will the vanilla last", "cover", "vanilla", ("3.8",)),
    P("days left of chocolate", "cover", "chocolate", ("16.1",)),
    P("¿cuánto se vende la vainilla?", "sales", "vanilla", ("1.85",), "es"),
    P("ventas de chocolate esta semana", "sales", "chocolate", ("7",), "es"),
    P("¿cuánta fresa vendimos esta semana?", "sales", "strawberry", ("sin ventas",), "es"),
    P("¿qué se vende más?", "ranking", None, ("vanilla", "1.85"), "es"),
    P("¿qué se vende menos?", "ranking", None, ("strawberry", "chocolate"), "es"),
    P("¿cuántos días dura la vainilla?", "cover", "vanilla", ("3.8",), "es"),
    # on order and coming: the order and its expected date; nothing on order said, a proposal awaiting named
    P("what's on order?", "on_order", None, ("strawberry", "7", "11 March")),
    P("anything coming?", "on_order", None, ("strawberry", "11 March")),
    P("what have we ordered", "on_order", None, ("strawberry", "7")),
    P("deliveries expected?", "on_order", None, ("strawberry", "11 March")),
    P("when is the strawberry arriving?", "on_order", "strawberry", ("7", "11 March")),
    P("is the strawberry order coming this week?", "on_order", "strawberry", ("11 March",)),
    P("is vanilla on order?", "on_order", "vanilla", ("not on order", "13", "$39.00", "approval")),
    P("when does the chocolate come", "on_order", "chocolate", ("not on order",)),
    P("¿qué está pedido?", "on_order", None, ("strawberry", "7", "11 de marzo"), "es"),
    P("¿qué viene en camino?", "on_order", None, ("strawberry", "11 de marzo"), "es"),
    P("¿cuándo llega la fresa?", "on_order", "strawberry", ("11 de marzo",), "es"),
    P("¿está pedida la vainilla?", "on_order", "vanilla", ("no está pedido", "$39.00", "aprobación"), "es"),
    P("¿cuándo llega el chocolate?", "on_order", "chocolate", ("no está pedido",), "es"),
    # prices and costs: in the shop's money format in the reply itself
    P("what does a tub of vanilla cost", "price", "vanilla", ("$3.00",)),
    P("price of chocolate", "price", "chocolate", ("$2.50",)),
    P("how much is mint chip?", "price", "mint chip", ("$3.50",)),
    P("what do pears cost", "price", "pear", ("$4.00",)),
    P("PRICE OF STRAWBERRY?", "price", "strawberry", ("$2.00",)),
    P("how much would 10 vanilla cost?", "price", "vanilla", ("10", "$30.00")),
    P("cost of 5 peaches", "price", "peach", ("5", "$20.00")),
    P("what would an order of 12 chocolate cost", "price", "chocolate", ("12", "$30.00")),
    P("¿cuánto cuesta la vainilla?", "price", "vanilla", ("$3.00",), "es"),
    P("precio del chocolate", "price", "chocolate", ("$2.50",), "es"),
    P("¿qué precio tiene la menta?", "price", "mint chip", ("$3.50",), "es"),
    P("¿cuánto cuestan 10 fresas?", "price", "strawberry", ("10", "$20.00"), "es"),
    P("¿cuánto costaría un pedido de 6 peras?", "price", "pear", ("6", "$24.00"), "es"),
    # waiting for the owner: what /pending lists, in words
    P("anything waiting for me?", "pending", None, ("vanilla", "$39.00", "strawberry")),
    P("any proposals waiting for my approval?", "pending", None, ("vanilla", "13", "$39.00")),
    P("what needs my approval", "pending", None, ("vanilla", "$39.00")),
    P("what's pending?", "pending", None, ("vanilla", "strawberry")),
    P("do I have to approve anything", "pending", None, ("vanilla",)),
    P("Anything for me to do?", "pending", None, ("vanilla", "strawberry")),
    P("¿hay algo pendiente?", "pending", None, ("vanilla", "$39.00", "strawberry"), "es"),
    P("¿qué tengo que aprobar?", "pending", None, ("vanilla", "$39.00"), "es"),
    P("¿hay propuestas esperando?", "pending", None, ("vanilla",), "es"),
    P("¿qué tengo pendiente?", "pending", None, ("vanilla", "strawberry"), "es"),
    # receiving: the Received button of the item's open order, offered, never pressed
    P("the strawberry came", "received", "strawberry", ("#1", "Received")),
    P("strawberries arrived", "received", "strawberry", ("#1", "Received")),
    P("the strawberry order is here", "received", "strawberry", ("#1", "Received")),
    P("we got the strawberry delivery", "received", "strawberry", ("#1", "Received")),
    P("the vanilla came", "received", "vanilla", ("not on order",)),
    P("llegó la fresa", "received", "strawberry", ("#1", "Received"), "es"),
    P("ya llegaron las fresas", "received", "strawberry", ("#1", "Received"), "es"),
    P("ha llegado el pedido de fresa", "received", "strawberry", ("#1", "Received"), "es"),
    P("llegó la vainilla", "received", "vanilla", ("no está pedido",), "es"),
    # still outside the shop: one line
    P("what's the capital of France?", "unknown"),
    P("¿qué tiempo hace mañana?", "unknown", lang="es"),
)
