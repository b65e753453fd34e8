"""The weekly review's chart: daily units sold per item over the last four weeks, one PNG drawn with Pillow.

Pillow, not matplotlib: the chart is a handful of lines, dots and labels, and a small server should not carry
matplotlib and numpy (tens of MB installed, about half a second to import and tens of MB of memory per process) for
it; Pillow is one wheel with its own FreeType and zlib. The picture is drawn at twice its size and scaled down, which
smooths the lines as anti-aliasing would.

A day without a record is a gap in the item's line, a day out of stock is a hollow ring on it (its sales are what
there was, not what was wanted), and the legend names at most `MAX_LINES` items, the best sellers first.
"""
from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from datetime import date

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 1000, 560
SCALE = 2                         # drawn at twice the size, then scaled down (smooth lines)
MAX_LINES = 8
# Okabe & Ito's palette: told apart by people with the common colour-vision deficiencies.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
GRID, AXIS, TEXT = "#DDDDDD", "#555555", "#222222"


def _nice_step(top: float) -> int:
    """A gridline step of 1, 2 or 5 times a power of ten, giving about five lines up to `top`."""
    raw = max(top, 1) / 5
    power = 10 ** math.floor(math.log10(raw))
    return max(1, int(next(m * power for m in (1, 2, 5, 10) if m * power >= raw)))


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size * SCALE)


def sales_chart(days: Sequence[date], series: Mapping[str, Sequence[int | None]],
                out_of_stock: Mapping[str, Sequence[bool]], title: str) -> bytes:
    """The PNG: one line per item (the best sellers first, at most MAX_LINES), `series[item][i]` the units sold
    on `days[i]` (None: no record), `out_of_stock[item][i]` whether it stood at 0 that day."""
    ranked = sorted(series, key=lambda item: (-sum(q or 0 for q in series[item]), item))[:MAX_LINES]
    s = SCALE
    image = Image.new("RGB", (WIDTH * s, HEIGHT * s), "white")
    draw = ImageDraw.Draw(image)
    left, right, top, bottom = 70 * s, (WIDTH - 190) * s, 60 * s, (HEIGHT - 70) * s
    highest = max((q for item in ranked for q in series[item] if q is not None), default=0)
    step = _nice_step(highest)
    y_max = max(step, math.ceil(highest / step) * step)

    def x_of(index: int) -> float:
        return left + (right - left) * (index / max(len(days) - 1, 1))

    def y_of(value: float) -> float:
        return bottom - (bottom - top) * (value / y_max)

    draw.text((left - 50 * s, 18 * s), title, fill=TEXT, font=_font(20))
    small = _font(13)
    for value in range(0, y_max + 1, step):                     # horizontal gridlines with their units
        y = y_of(value)
        draw.line([(left, y), (right, y)], fill=GRID, width=s)
        draw.text((left - 10 * s, y), str(value), fill=AXIS, font=small, anchor="rm")
    for index, day in enumerate(days):                           # a tick per day, a date each week
        x = x_of(index)
        weekly = (len(days) - 1 - index) % 7 == 0
        draw.line([(x, bottom), (x, bottom + (8 if weekly else 4) * s)], fill=AXIS, width=s)
        if weekly:
            draw.line([(x, top), (x, bottom)], fill=GRID, width=s)
            draw.text((x, bottom + 12 * s), f"{day:%a %d %b}", fill=AXIS, font=small, anchor="mt")
    draw.line([(left, bottom), (right, bottom)], fill=AXIS, width=2 * s)
    draw.line([(left, top), (left, bottom)], fill=AXIS, width=2 * s)
    for colour, item in zip(COLOURS, ranked, strict=False):
        values, gone = series[item], out_of_stock.get(item, [False] * len(days))
        points = [(x_of(i), y_of(v)) if v is not None else None for i, v in enumerate(values)]
        run: list[tuple[float, float]] = []
        for point in [*points, None]:                            # a day without a record breaks the line
            if point is None:
                if len(run) > 1:
                    draw.line(run, fill=colour, width=3 * s, joint="curve")
                run = []
            else:
                run.append(point)
        for index, point in enumerate(points):
            if point is None:
                continue
            x, y = point
            r = 4 * s
            if gone[index]:                                       # out of stock: a hollow ring
                draw.ellipse([x - r - s, y - r - s, x + r + s, y + r + s], outline=colour, fill="white", width=2 * s)
            else:
                draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    legend = _font(14)
    for row, (colour, item) in enumerate(zip(COLOURS, ranked, strict=False)):
        y = top + row * 26 * s
        draw.line([(right + 20 * s, y + 8 * s), (right + 48 * s, y + 8 * s)], fill=colour, width=4 * s)
        draw.text((right + 56 * s, y), item, fill=TEXT, font=legend)
    y = top + len(ranked) * 26 * s + 10 * s
    draw.ellipse([right + 28 * s, y + 3 * s, right + 40 * s, y + 15 * s], outline=AXIS, fill="white", width=2 * s)
    draw.text((right + 56 * s, y), "out of stock", fill=TEXT, font=legend)
    if len(series) > len(ranked):
        draw.text((right + 20 * s, y + 30 * s), f"(and {len(series) - len(ranked)} more)", fill=AXIS, font=small)
    out = io.BytesIO()
    image.resize((WIDTH, HEIGHT), Image.Resampling.LANCZOS).save(out, format="PNG", optimize=True)
    return out.getvalue()
