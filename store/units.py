"""Words that agree with numbers: `1 tub`, `2 tubs`, `1 tarrina`, `2 tarrinas`.

An item's `unit` (the shop file's `unit = "tubs"`, kept in the items table) is its English plural. Its singular is
derived by the usual English rule (tubs -> tub, boxes -> box, berries -> berry) unless the shop file gives it, and
its Spanish forms are used only when the shop file names them (`[items.x] unit = ["tub", "tubs"]`,
`unit_es = ["tarrina", "tarrinas"]`, bot/shop_file.py). The shop file's forms are read at each start and set here
once (`use`), so every text the product writes (the offline model's replies, stock lines, briefs, proposals, cards,
notices, the store's own reasons) takes its words from one place. It lives in the store package, the bottom layer,
so that every layer may use it; it holds no SQL.

Which form: the singular for exactly 1 (`1 tub`, `1.0 tub`), the plural for anything else (`0 tubs`, `1.5 tubs`),
in English and in Spanish alike. Words follow the owner's language; the number is written by the caller (numbers,
money and dates follow the shop's locale).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class UnitWords:
    """One unit's forms: English singular and plural, and Spanish ones when the shop names them."""
    one: str
    other: str
    es_one: str | None = None
    es_other: str | None = None

    def word(self, number: float | int, lang: str = "en") -> str:
        single = _is_one(number)
        if lang == "es" and self.es_one and self.es_other:
            return self.es_one if single else self.es_other
        return self.one if single else self.other


_KNOWN: dict[str, UnitWords] = {}      # the shop file's forms, by the English plural (the items table's `unit`)
_SIBILANT = re.compile(r"(?:ch|sh|ss|x|z|o)es$")


def singular(plural: str) -> str:
    """The English rule: `tubs` -> tub, `boxes` -> box, `berries` -> berry, `kg` -> kg (no plural ending)."""
    word = plural.strip()
    head, sep, last = word.rpartition(" ")             # "bags of ice" is not handled: give the forms in the file
    lowered = last.lower()
    if len(lowered) > 3 and lowered.endswith("ies"):
        last = last[:-3] + ("Y" if last[-3].isupper() else "y")
    elif len(lowered) > 3 and _SIBILANT.search(lowered):
        last = last[:-2]
    elif len(lowered) > 2 and lowered.endswith("s") and not lowered.endswith("ss"):
        last = last[:-1]
    return head + sep + last


def use(words: Iterable[UnitWords]) -> None:
    """The shop file's forms (replacing any set before): what the rule derives need not be given."""
    _KNOWN.clear()
    for w in words:
        _KNOWN[w.other] = w


def words_of(unit: str) -> UnitWords:
    """The forms of a unit as the items table keeps it (the English plural)."""
    return _KNOWN.get(unit) or UnitWords(singular(unit), unit)


def unit_word(number: float | int, unit: str, lang: str = "en") -> str:
    """The unit's word for `number`: `tub` for 1, `tubs` otherwise; "" for no unit. A rate's unit agrees in its
    first word (`tubs a day` -> `1 tub a day`)."""
    if not unit:
        return ""
    head, sep, rest = unit.partition(" a ")
    if sep and unit not in _KNOWN:
        return words_of(head).word(number, lang) + sep + rest
    return words_of(unit).word(number, lang)


def count(number: float | int | str, unit: str, lang: str = "en", *, shown: str | None = None) -> str:
    """`1 tub`, `7 tubs`, `1 tarrina`; `shown` writes the number another way (the shop's locale) with the same word.
    A number that is not one (None, text) keeps the plural."""
    text = shown if shown is not None else str(number)
    if not unit:
        return text
    value = number if isinstance(number, (int, float)) and not isinstance(number, bool) else 2
    return f"{text} {unit_word(value, unit, lang)}"


def _is_one(number: float | int) -> bool:
    try:
        return float(number) == 1.0
    except (TypeError, ValueError):
        return False
