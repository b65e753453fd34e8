"""Redaction time on hostile text (C21): the one set of rules (store/redaction.py) on uncut texts of 0.5, 1 and
2 MB shaped to hurt each pattern, and, for contrast, the old quadratic patterns on 10-40 KB (they take minutes on
1 MB). Prints the median of 3 runs per shape and size; asserts nothing.

    .venv/bin/python -m bench.redaction [--sizes 0.5 1 2] [--old-kb 10 20 40]
"""
from __future__ import annotations

import argparse
import re
import statistics
import time

from store import redaction

# the patterns before issue 25 (bot/logs.py, store/redaction.py, bot/relays/sender.py)
OLD = (re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@:]+:[^/\s@]*@"),
       re.compile(r"\d{3,}:[A-Za-z0-9_-]{30,}"))


def shapes(size: int) -> dict[str, str]:
    """Texts of about `size` characters, each a worst case for one pattern, and a mix."""
    def fill(unit: str) -> str:
        return unit * (size // len(unit))
    return {"letters": fill("a"), "digits": fill("1"), "schemes": fill("a://"), "userinfo": fill("://a:"),
            "digits_colon": fill("123:"), "bearer": fill("bearer "), "key_spaces": fill("password" + " " * 9),
            "sk": fill("sk-a "), "newlines": fill("\n"),
            "mixed": fill("http://u:p@h 1234567:" + "A" * 29 + " sk-x Bearer \x1b[2J ")}


def timed(call, text: str) -> float:   # type: ignore[no-untyped-def]
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        call(text)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def old(text: str) -> str:
    text = OLD[0].sub(r"\g<scheme>****@", text)
    return OLD[1].sub("****", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1, 2], help="text sizes in MB")
    parser.add_argument("--old-kb", type=int, nargs="+", default=[10, 20, 40], help="sizes for the old patterns")
    args = parser.parse_args()
    sizes = args.sizes
    redaction.register(["a-configured-secret-value"])
    print("new rules (redact, and outside = cut + strip + redact uncut), seconds, median of 3")
    print(f"{'shape':<14}" + "".join(f"{mb:>10} MB" for mb in sizes))
    worst = {mb: 0.0 for mb in sizes}
    for name in shapes(10):
        cells = []
        for mb in sizes:
            text = shapes(int(mb * 1_000_000))[name]
            seconds = timed(lambda t: redaction.outside(t, len(t)), text)
            worst[mb] = max(worst[mb], seconds)
            cells.append(f"{seconds:>13.3f}")
        print(f"{name:<14}" + "".join(cells))
    print(f"{'worst':<14}" + "".join(f"{worst[mb]:>13.3f}" for mb in sizes))
    print("\nold patterns (before issue 25) on the 'letters' and 'digits' shapes, seconds")
    for kb in args.old_kb:
        row = [timed(old, shapes(kb * 1000)[name]) for name in ("letters", "digits")]
        print(f"{kb:>4} KB  letters {row[0]:.3f}  digits {row[1]:.3f}")


if __name__ == "__main__":
    main()
