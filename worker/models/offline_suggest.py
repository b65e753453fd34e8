"""The offline model's "suggest reorder points" / "sugiere puntos de pedido": one `reorder_suggestions` call, and
a line per item copied from its result (every number a figure of the tool, C13). Kept apart from the offline
model's other intents so it stays a small, local addition."""
from __future__ import annotations

import re
from typing import Any

ASKS = re.compile(r"\b(suggest\w*|recommend\w*)\b.*\b(reorder|order)\b|"
                  r"\b(sugiere|sugerir|sugerencias?|recomienda)\b.*\b(pedido|reorden|reposicion)",
                  re.IGNORECASE)
_SPANISH = re.compile(r"\b(sugiere|sugerir|sugerencias?|recomienda|pedido|puntos)\b", re.IGNORECASE)


def asks(text: str) -> str | None:
    """The line's language ('en' or 'es') when it asks for reorder suggestions, else None."""
    folded = text.lower().replace("ó", "o")
    if not ASKS.search(folded):
        return None
    return "es" if _SPANISH.search(folded) else "en"


def answer(data: dict[str, Any], ok: bool, lang: str) -> str:
    """The suggestions, one line per item, from the tool's result."""
    if not ok:
        return ("No pude calcular sugerencias: " if lang == "es" else "I could not compute suggestions: ") + str(
            data.get("error", "failed"))
    lines = []
    for row in data.get("items", []):
        rop, target = row["reorder_point"], row["target"]
        if rop["suggested"] is None:
            lines.append(f"{row['item']}: sin sugerencia ({row['reason']})" if lang == "es"
                         else f"{row['item']}: no suggestion ({row['reason']})")
        elif lang == "es":
            lines.append(f"{row['item']}: punto de pedido {rop['current']} → {rop['suggested']}, objetivo "
                         f"{target['current']} → {target['suggested']} ({row['days']} días contados)")
        else:
            lines.append(f"{row['item']}: reorder point {rop['current']} → {rop['suggested']}, target "
                         f"{target['current']} → {target['suggested']} ({row['days']} counted days)")
    head = "Sugerencias de tus ventas:" if lang == "es" else "Suggestions from your sales:"
    return "\n".join([head, *lines]) if lines else ("No hay artículos." if lang == "es" else "No items.")
