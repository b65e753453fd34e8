"""`shopbot import-sales FILE.csv`: a till's sales history, read as `date,item,quantity` (one line per item and
shop-local day, a header line first). All or nothing: every bad line is reported with its line number (the header
is line 1) and nothing is stored. The store then checks each (item, day) against what it has already recorded
(store/shared/sales.py): the same quantity again changes nothing, another quantity is a conflict."""
from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from datetime import date

from store import SaleLine

COLUMNS = ("date", "item", "quantity")
MAX_QUANTITY = 1_000_000
MAX_LINES = 200_000          # about twenty years of a hundred items' days would be far more than a shop's file
MAX_PROBLEMS = 50            # reported one per line; the rest are counted


def parse_sales(text: str, names: Mapping[str, str], today: date) -> tuple[list[SaleLine], list[tuple[int, str]]]:
    """The file's lines, and its problems (line number, reason). `names` maps every item name and alias to its item;
    `today` (shop time) is not over, so it and later days are refused."""
    problems: list[tuple[int, str]] = []
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not any(cell.strip() for cell in rows[0]):
        return [], [(1, f"no header line: the first line names the columns {','.join(COLUMNS)}")]
    header = [cell.strip().lower().lstrip("\ufeff") for cell in rows[0]]
    other = [name for name in header if name not in COLUMNS]
    missing = [name for name in COLUMNS if name not in header]
    if other or missing or len(set(header)) != len(header):
        reasons = [f"column {name!r} is not one of {', '.join(COLUMNS)}" for name in other]
        reasons += [f"column {name!r} is missing" for name in missing]
        if len(set(header)) != len(header):
            reasons.append("a column is named twice")
        return [], [(1, "; ".join(reasons))]
    where = {name: header.index(name) for name in COLUMNS}
    if len(rows) > MAX_LINES + 1:
        return [], [(1, f"more than {MAX_LINES:,} lines: split the file")]
    lines: list[SaleLine] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue            # a blank line (often the last one)
        if len(row) != len(header):
            problems.append((number, f"{len(row)} field(s), the header has {len(header)}"))
            continue
        day_text, name, quantity_text = (row[where[c]].strip() for c in COLUMNS)
        reasons = []
        try:
            day = date.fromisoformat(day_text)
            if len(day_text) != 10:
                raise ValueError
            if day >= today:
                reasons.append(f"{day_text} is not over yet (only days before today, {today.isoformat()})")
        except ValueError:
            reasons.append(f"date {day_text[:20]!r} is not an ISO date (YYYY-MM-DD)")
        item = names.get(name.lower())
        if item is None:
            reasons.append(f"unknown item {name[:40]!r}")
        if not quantity_text.isdigit() or int(quantity_text) > MAX_QUANTITY:
            reasons.append(f"quantity {quantity_text[:20]!r} is not a whole number from 0 to {MAX_QUANTITY:,}")
        if not reasons and item is not None:
            key = (item, day_text)
            if key in seen:
                reasons.append(f"{item} on {day_text} is already on line {seen[key]}")
            seen[key] = number
        if reasons:
            problems.append((number, "; ".join(reasons)))
        elif item is not None:
            lines.append(SaleLine(number, item, day_text, int(quantity_text)))
    if not lines and not problems:
        problems.append((1, "no lines of sales after the header"))
    return lines, problems


def describe(problems: list[tuple[int, str]]) -> list[str]:
    """One line per problem, the first MAX_PROBLEMS of them, and how many more."""
    shown = [f"line {number}: {reason}" for number, reason in sorted(problems)[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS} more bad line(s)")
    return shown
