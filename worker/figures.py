"""C13: the numbers the owner acts on come from tool records, never from the model's prose.

`render_report(prose, figures)` returns the model's prose with every number that matches no figure value
replaced by "—", then a blank line and a "Figures:" block rendered from the figures themselves.

What counts as a number in the prose (the rules are deliberately strict: a false "—" is cheap, a wrong
quantity that survives is not):

* a run of decimal digits, optionally with thousands separators (`2,600`, `1,234,567`: groups of exactly three
  after the first comma; `12,34` is two numbers, 12 and 34), optionally with a decimal part (`2.5`, `2,600.50`),
  or a bare decimal part (`.5`, value 0.5);
* a leading minus (`-` or `−`) belongs to the number when it is not glued to a word or number before it
  (`-2` is minus two and does not match a figure 2; in `2-3` and `sugar-3` it is a hyphen);
* a number glued to letters *after* it is still a number (`6tubs`, `2kg`, `26k`, `3x`, `12pm`, `2nd`): only the
  digits are replaced, the letters stay;
* digits glued to letters *before* them belong to an identifier and are not checked: `r12.1` (a report id,
  including its `.1`), `K7`, `C13`, `v2`, `mp3`. An identifier starts at a letter that is not glued to a word
  character before it, so in `2x300` both 2 and 300 are checked. Known hole: `vanilla7` is an identifier.
* Dates and times are numbers too (`2026-11-30` has three), so they are replaced unless a figure holds them.
  Numbers written as words ("six") are not detected. Digits of any script count (`\\d` is Unicode).

A prose number matches when its value equals a figure value numerically (`2.0` matches 2, `2,600` matches 2600).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

DASH = "—"


@dataclass(frozen=True)
class Figure:
    label: str
    value: int | float
    unit: str = ""


_TOKEN = re.compile(
    r"""
    (?P<ident>(?<!\w)[^\W\d_]\w*(?:(?<=\d)\.\d+)*)               # r12.1, K7, C13, vanilla, v2
    |
    (?P<num>
        (?:(?<![\w.,])[-\u2212](?=[\d.]))?                       # a sign, not a hyphen
        (?:
            (?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?           # 2,600.50  2600  2.5
            |
            (?<![\w.])\.\d+                                      # .5
        )
    )
    """,
    re.VERBOSE,
)


def _as_decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _parse(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("\u2212", "-")
    if cleaned.startswith("-."):
        cleaned = "-0" + cleaned[1:]
    elif cleaned.startswith("."):
        cleaned = "0" + cleaned
    try:
        return Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the regex only admits parseable text
        return None


def numbers_in(prose: str) -> list[str]:
    """The number tokens render_report checks, in order (exposed for tests and diagnostics)."""
    return [m.group("num") for m in _TOKEN.finditer(prose) if m.group("num")]


def scrub(prose: str, figures: Sequence[Figure]) -> str:
    """Replace every number in `prose` that equals no figure value by "—"."""
    allowed = {d for d in (_as_decimal(f.value) for f in figures) if d is not None}

    def replace(match: re.Match[str]) -> str:
        token = match.group("num")
        if token is None:
            return match.group(0)
        value = _parse(token)
        return token if value is not None and value in allowed else DASH

    return _TOKEN.sub(replace, prose)


def format_value(value: int | float) -> str:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def figure_line(figure: Figure) -> str:
    unit = f" {figure.unit}" if figure.unit else ""
    return f"- {figure.label}: {format_value(figure.value)}{unit}"


def render_report(prose: str, figures: Sequence[Figure]) -> str:
    """The report body: scrubbed prose, then a blank line and the deduplicated figures block."""
    body = scrub(prose, figures).strip()
    lines: list[str] = []
    for figure in figures:
        line = figure_line(figure)
        if line not in lines:
            lines.append(line)
    if not lines:
        return body
    block = "Figures:\n" + "\n".join(lines)
    return f"{body}\n\n{block}" if body else block
