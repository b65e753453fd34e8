"""C13: the numbers the owner acts on come from records, never from the model's prose.

The figures of a run are every number its tools returned (and the numbers of the turn's context block: today's
date and the time), each a `Figure` with a label, a typed value and a unit. The tool registry collects them from
the tools' results (worker/tools/registry.py); nothing here is chosen per tool.

`render_report(prose, figures, question=..., fmt=...)` returns the prose with every number that matches no figure
replaced by "—", then, when the prose had a number, a blank line and a "Figures:" block with the figures the reply
relies on: the ones its prose cites and those of the items the question names (docs/contracts.md C13).

What is a number in the prose, and what it matches:

* a plain number: digits, optionally with thousands separators (`2,600`; groups of exactly three after the first
  comma, so `12,34` is two numbers) and a decimal part (`2.5`, `.5`); a leading minus that is not a hyphen. In a
  decimal-comma shop (`de`, `fr`, ...) `3,50` and `1.800` read as that locale writes them, too. Letters glued after
  it stay (`6tubs`, `2kg`); digits glued to letters before it are an identifier and are not checked (`r12.1`, `K7`).
  It matches a count that is equal (`2`, `2.0`; `2 tubs` is `2` and a word), a fractional figure rounded to the
  places the prose wrote (`3.5` or `4` for 3.53), a money figure in major units (`3`, `3.00`, `$3.00`, `3.00 USD`)
  or, followed by `cents`/`ct`/`¢`/`p`/`pence`, in minor units (`300 cents`), or a date's year (`2026`).
* a date: ISO (`2026-12-05`, with an optional time), the shop's numeric form (`05/12/2026` day first, or month first
  for a `_US` locale; `5.12.2026`), or in words (`5 December`, `December 5th, 2026`, `5. Dezember`, in English,
  German or French). It matches a date figure (or a date-time figure's date) of the same day; a year written in
  words-dates must agree when given; an ISO time part must match a figure's time. An ordinal alone (`the 5th`)
  matches a date figure of that day of the month.
* a time: `08:30`, `8:30 pm`, `8pm`, `8.30am`: matches a time of a figure (hours and minutes).

A record number written `#2` (a proposal, order, draft or report) is an id, not a figure: it stands when a tool of
the run returned that id (a `Figure` with `record_id`), else it becomes `#—`; ids are never listed under the prose.
An unmatched ISO or numeric date or a time is replaced by one "—"; a number inside an unmatched date in words is
checked as a plain number. Numbers written as words ("six") are not detected; digits of any script count.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation

from store import units
from worker.money import MONTHS, Money, ShopFormat

DASH = "—"
FIGURES_HEADER = "Figures:"   # the block's first line; the renderer folds the block into an expandable quote

Value = int | float | Money | date | datetime | time


@dataclass(frozen=True)
class Figure:
    label: str
    value: Value
    unit: str = ""
    subject: str | None = None    # the item the figure is about, when it is about one
    record_id: bool = False       # a record number (proposal, order, draft, report): an id, never a figure


_MONTH_NUMBER: dict[str, int] = {}
for _lang, _names in MONTHS.items():
    for _n, _name in enumerate(_names, start=1):
        _MONTH_NUMBER[_name.lower()] = _n
        if _lang != "es":      # Spanish months in full only: "ago" (agosto) is an English word
            _MONTH_NUMBER.setdefault(_name.lower()[:3], _n)
_MONTH_NUMBER["sept"] = 9
_MONTH = "(?i:" + "|".join(sorted((re.escape(m) for m in _MONTH_NUMBER), key=len, reverse=True)) + r")(?![^\W\d_])\.?"
_ORDINAL = r"(?:st|nd|rd|th|er|e|\.)?"

_DATE_PARTS = rf"""
    (?P<iso>(?<![\w.])\d{{4}}-\d{{2}}-\d{{2}}
        (?:[T\ ]\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?(?![\d-]))
    |
    (?P<dmy>(?<![\w./])\d{{1,2}}(?P<sep>[/.])\d{{1,2}}(?P=sep)(?:\d{{4}}|\d{{2}})(?![\d/.]\d))
    |
    (?P<wdate>(?<![\w.,])\d{{1,2}}{_ORDINAL}\s+(?:(?:of|de)\s+)?{_MONTH}(?:,?\s+(?:de\s+)?\d{{4}}(?!\d))?
        |(?<!\w){_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?![\d.,:]\d)(?:,?\s+\d{{4}}(?!\d))?)
    |
    (?P<time>(?<![\w.:,])\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\s?(?i:[ap]\.?m)(?!\w))?(?![\d:])
        |(?<![\w.,])\d{{1,2}}(?:\.\d{{2}})?\s?(?i:[ap]\.?m)(?!\w))
    |
    (?P<ident>(?<!\w)[^\W\d_][^\W\d]*\d\w*(?:(?<=\d)\.\d+)*)
"""
# `ident` takes a word that starts with a letter and holds a digit (`r12.1`, `K7`), so its digits are not numbers. A
# word without a digit is left to the scan: nothing else can match inside it (every other token needs a digit, and
# those that may start a word look behind for a word character), and not matching it saves a call of `check`'s
# replacer per word of the prose.
_EN_NUMBER = r"""
    (?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?
      |(?<![\w.])\.\d+)
"""
_COMMA_NUMBER = r"""
    (?:\d+,\d{1,2}(?![\d,])
      |\d{1,3}(?:\.\d{3})+(?:,\d+)?(?![\d.])
      |(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?
      |(?<![\w.])\.\d+)
"""
_SIGN = r"(?:(?<![\w.,])[-\u2212](?=[\d.]))?"


def _compile(number: str) -> re.Pattern[str]:
    return re.compile(_DATE_PARTS + r"| (?P<recid>(?<![\w&])\#\d+(?!\d)) | (?P<num>" + _SIGN + number + ")", re.VERBOSE)


_TOKEN_EN = _compile(_EN_NUMBER)
_TOKEN_COMMA = _compile(_COMMA_NUMBER)
_DIGIT = re.compile(r"\d")
_ORDINAL_AFTER = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)
_MINOR_AFTER = re.compile(r"\s?(?:cents?\b|ct\b|¢|pence\b|p\b|centimes?\b)", re.IGNORECASE)


def _tokens(fmt: ShopFormat) -> re.Pattern[str]:
    return _TOKEN_COMMA if fmt.decimal_comma else _TOKEN_EN


def _as_decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _parse_number(text: str, decimal_comma: bool) -> Decimal | None:
    cleaned = text.replace("\u2212", "-")
    body = cleaned.lstrip("-")
    if decimal_comma and (re.fullmatch(r"\d+,\d{1,2}", body) or re.fullmatch(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?", body)):
        cleaned = cleaned.replace(".", "").replace(",", ".")
    else:
        cleaned = cleaned.replace(",", "")
    if cleaned.startswith("-."):
        cleaned = "-0" + cleaned[1:]
    elif cleaned.startswith("."):
        cleaned = "0" + cleaned
    try:
        return Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the regex only admits parseable text
        return None


def _places(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


@dataclass
class _Index:
    """The figures, arranged for matching."""
    numbers: list[tuple[Decimal, Figure]]
    minor: list[tuple[Decimal, Figure]]
    years: dict[int, list[Figure]]
    dates: dict[date, list[Figure]]
    times: dict[tuple[int, int], list[Figure]]

    @classmethod
    def of(cls, figures: Iterable[Figure]) -> _Index:
        index = cls([], [], {}, {}, {})
        for f in figures:
            v = f.value
            if f.record_id:
                continue
            if isinstance(v, Money):
                index.numbers.append((Decimal(v.cents).scaleb(-v.exponent), f))
                index.minor.append((Decimal(v.cents), f))
            elif isinstance(v, datetime):
                index.dates.setdefault(v.date(), []).append(f)
                index.years.setdefault(v.year, []).append(f)
                index.times.setdefault((v.hour, v.minute), []).append(f)
            elif isinstance(v, date):
                index.dates.setdefault(v, []).append(f)
                index.years.setdefault(v.year, []).append(f)
            elif isinstance(v, time):
                index.times.setdefault((v.hour, v.minute), []).append(f)
            else:
                d = _as_decimal(v)
                if d is not None:
                    index.numbers.append((d, f))
        return index

    def number(self, value: Decimal, minor_unit: bool) -> list[Figure]:
        places = _places(value)
        half = Decimal(5).scaleb(-places - 1)     # a rounding to `places` places, half up or half to even
        found = [f for d, f in self.numbers if d == value or (
            not isinstance(f.value, Money) and _places(d) > places and abs(d - value) <= half)]
        if minor_unit:
            found += [f for d, f in self.minor if d == value]
        if not found and places == 0 and 1000 <= value <= 9999:
            found = list(self.years.get(int(value), ()))
        return found


def _hour(text: str) -> tuple[int, int] | None:
    m = re.match(r"(\d{1,2})(?:[:.](\d{2}))?(?::\d{2})?\s?([ap])?", text.strip().lower())
    if not m:  # pragma: no cover - the regex only admits times
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3):
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m.group(3) == "p" else 0)
    return (hour, minute) if hour < 24 and minute < 60 else None


def _date_words(text: str) -> tuple[int, int, int | None] | None:
    day = month = year = None
    for word in re.findall(r"[^\W\d_]+|\d+", text):
        lowered = word.lower()
        if word.isdigit():
            if len(word) == 4:
                year = int(word)
            elif day is None:
                day = int(word)
        elif lowered in _MONTH_NUMBER and month is None:
            month = _MONTH_NUMBER[lowered]
    return (day, month, year) if day and month else None


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


@dataclass(frozen=True)
class Checked:
    text: str                       # the prose with unmatched numbers replaced by "—"
    cited: tuple[Figure, ...]       # figures a kept number of the prose matched (narrowed to the sentence's items)
    numbers: int                    # numbers (and dates, times) the prose had
    blanked: int                    # of which replaced


def _sentence(prose: str, start: int, end: int) -> str:
    left = max(prose.rfind(". ", 0, start), prose.rfind("\n", 0, start), prose.rfind("! ", 0, start),
               prose.rfind("? ", 0, start))
    rights = [i for i in (prose.find(". ", end), prose.find("\n", end), prose.find("! ", end),
                          prose.find("? ", end)) if i >= 0]
    return prose[left + 1:min(rights) if rights else len(prose)].lower()


def check(prose: str, figures: Sequence[Figure], fmt: ShopFormat | None = None) -> Checked:
    """Match every number of `prose` against `figures` (see the module docstring)."""
    if not _DIGIT.search(prose):         # every token checked holds a digit: nothing to match, nothing to cite
        return Checked(prose, (), 0, 0)
    fmt = fmt or ShopFormat()
    index = _Index.of(figures)
    ids = {f.value for f in figures if f.record_id}
    cited: list[Figure] = []
    counts = {"numbers": 0, "blanked": 0}

    def keep(token: str, found: list[Figure], start: int, end: int) -> str:
        counts["numbers"] += 1
        if not found:
            counts["blanked"] += 1
            return DASH
        sentence = _sentence(prose, start, end)
        named = [f for f in found if f.subject and re.search(rf"\b{re.escape(f.subject.lower())}\b", sentence)]
        if named:
            found = named + [f for f in found if not f.subject]
        cited.extend(f for f in found if f not in cited)
        return token

    def number(match_text: str, start: int, end: int) -> str:
        value = _parse_number(match_text, fmt.decimal_comma)
        minor = bool(_MINOR_AFTER.match(prose, end))
        found = index.number(value, minor) if value is not None else []
        if not found and value is not None and _ORDINAL_AFTER.match(prose, end):   # "on the 5th"
            found = [f for day, fs in index.dates.items() if day.day == value for f in fs]
        return keep(match_text, found, start, end)

    def replace(match: re.Match[str]) -> str:
        kind = match.lastgroup
        token, start, end = match.group(0), match.start(), match.end()
        if kind == "ident":
            return token
        if kind == "recid":
            return token if int(token[1:]) in ids else "#" + DASH
        if kind == "num":
            return number(token, start, end)
        if kind == "time":
            hm = _hour(token)
            return keep(token, list(index.times.get(hm, ())) if hm else [], start, end)
        if kind == "iso":
            day = _safe_date(int(token[:4]), int(token[5:7]), int(token[8:10]))
            found = list(index.dates.get(day, ())) if day else []
            if found and len(token) > 10:
                hm = _hour(token[11:16])
                found = [f for f in found if isinstance(f.value, datetime)
                         and (f.value.hour, f.value.minute) == hm] or list(index.times.get(hm, ()) if hm else ())
            return keep(token, found, start, end)
        if kind == "dmy":
            a, b, c = (int(p) for p in re.split(r"[/.]", token))
            year = c + 2000 if c < 100 else c
            day = _safe_date(year, b, a) if fmt.day_first else _safe_date(year, a, b)
            return keep(token, list(index.dates.get(day, ())) if day else [], start, end)
        # a date in words: "5 December", "Dec 5th, 2026"
        parts = _date_words(token)
        found = []
        if parts:
            d, m, y = parts
            found = [f for day, fs in index.dates.items() if (day.day, day.month) == (d, m)
                     and (y is None or day.year == y) for f in fs]
        if found:
            return keep(token, found, start, end)
        # not a date of any figure: its numbers are checked as plain numbers
        return re.sub(r"\d+", lambda n: number(n.group(0), start + n.start(), start + n.end()), token)

    text = _tokens(fmt).sub(replace, prose)
    return Checked(text, tuple(cited), counts["numbers"], counts["blanked"])


def numbers_in(prose: str, fmt: ShopFormat | None = None) -> list[str]:
    """The number, date and time tokens render_report checks, in order (exposed for tests and diagnostics)."""
    return [m.group(0) for m in _tokens(fmt or ShopFormat()).finditer(prose) if m.lastgroup not in ("ident", "recid")]


def scrub(prose: str, figures: Sequence[Figure], fmt: ShopFormat | None = None) -> str:
    """Replace every number in `prose` that matches no figure by "—"."""
    return check(prose, figures, fmt).text


def format_value(value: Value, fmt: ShopFormat | None = None) -> str:
    fmt = fmt or ShopFormat()
    if isinstance(value, Money):
        return fmt.money(value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return value.strftime("%H:%M")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def figure_line(figure: Figure, fmt: ShopFormat | None = None) -> str:
    shown = format_value(figure.value, fmt)
    if figure.unit and isinstance(figure.value, (int, float)):       # "1 tub", "2 tubs" (store/units.py)
        return f"- {figure.label}: {units.count(figure.value, figure.unit, shown=shown)}"
    unit = f" {figure.unit}" if figure.unit and not isinstance(figure.value, Money) else ""
    return f"- {figure.label}: {shown}{unit}"


def items_named(text: str, figures: Iterable[Figure]) -> set[str]:
    """The subjects of `figures` that `text` names (whole words, any case)."""
    lowered = text.lower()
    return {f.subject for f in figures
            if f.subject and re.search(rf"(?<!\w){re.escape(f.subject.lower())}(?!\w)", lowered)}


def render_report(prose: str, figures: Sequence[Figure], *, question: str = "", fmt: ShopFormat | None = None,
                  show_all: bool = False) -> str:
    """The report body: checked prose, then the figures it relies on: every figure the prose cites, and those of the
    items the question names (of several with one label, such as one per till count, the first). A prose without any
    number gets no block; `show_all` (a run stopped by a limit, whose notice cites nothing) lists every figure."""
    checked = check(prose, figures, fmt)
    body = checked.text.strip()
    figures = [f for f in figures if not f.record_id]
    if show_all:
        chosen = list(figures)
    elif checked.numbers == 0:
        chosen = []
    else:
        asked = items_named(question, figures)
        chosen, labels = [], set()
        cited: set[tuple[str | None, str]] = set()
        for f in figures:   # of an asked item's figures that repeat a label (one per till count), the first only
            if f.subject in asked and f.label not in labels:
                chosen.append(f)
                labels.add(f.label)
            elif f in checked.cited and (f.subject is None or (f.subject, repr(f.value)) not in cited):
                # a cited number that several figures of one item share (on hand = position = target): the first,
                # the tool's own order putting the plainest first
                chosen.append(f)
                labels.add(f.label)
                cited.add((f.subject, repr(f.value)))
    lines: list[str] = []
    for figure in chosen:
        line = figure_line(figure, fmt)
        if line not in lines:
            lines.append(line)
    if not lines:
        return body
    block = FIGURES_HEADER + "\n" + "\n".join(lines)
    return f"{body}\n\n{block}" if body else block
