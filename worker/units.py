"""Counts with their unit as the owner reads them: `1 tub`, `6 tubs` (never "1 tubs").

`count_of` is the one place a count meets its unit word in the product's own texts (the Figures block, /pending,
approvals, notices). The unit forms (singular and plural, other languages) belong to the offline-model issue's
module: at merge this function points at it, and nothing else changes.
"""
from __future__ import annotations


def singular(unit: str) -> str:
    """`tubs` -> `tub`, `boxes` -> `box`, `kg` -> `kg` (a unit given in the plural, as shop files name them)."""
    if unit.endswith(("ches", "shes", "xes", "sses")):
        return unit[:-2]
    if unit.endswith("s") and not unit.endswith("ss") and len(unit) > 2:
        return unit[:-1]
    return unit


def count_of(count: int | float, unit: str) -> str:
    """`1 tub`, `6 tubs`, `2.5 kg`; no unit: the count alone."""
    shown = str(int(count)) if isinstance(count, float) and count.is_integer() else str(count)
    if not unit:
        return shown
    return f"{shown} {singular(unit) if count == 1 else unit}"
