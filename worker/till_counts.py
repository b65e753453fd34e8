"""A till's stock count, applied without a model: the report is rendered from the counts as applied."""
from __future__ import annotations

from collections.abc import Sequence


def till_report(applied: Sequence[tuple[str, str, int, int]]) -> str:
    """`applied` holds (source, item, old on hand, new on hand) in the order they were applied."""
    lines = [f"Counts applied ({len({source for source, *_ in applied})} request(s)):"]
    for source, item, old, new in applied:
        change = "unchanged" if old == new else f"was {old}"
        lines.append(f"- {item}: {new} ({change}) [{source}]")
    return "\n".join(lines)
