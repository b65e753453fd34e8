"""C14: arrival rate, mean time in system and mean open items of agent work over a window (Little's law)."""
from __future__ import annotations

from ..clock import from_db, from_text
from ..records import Stats
from .connection import Connection


def window(conn: Connection, start: str, end: str) -> Stats:
    """L is the time-average of open items over [start, end]; λ the accepted arrivals in the window per second; W
    the mean time in system of those arrivals (an item still open at `end` counts until `end`)."""
    t0, t1 = from_text(start), from_text(end)
    span = (t1 - t0).total_seconds()
    rows = conn.execute(
        "SELECT admitted_at, ended_at FROM work WHERE kind = 'agent' AND ended_at > $1 AND admitted_at < $2 "
        "UNION ALL "
        "SELECT admitted_at, NULL FROM work WHERE kind = 'agent' AND state IN ('pending', 'running') "
        "AND admitted_at < $3", (start, end, end)).fetchall()
    area = 0.0
    arrivals = 0
    time_in_system = 0.0
    for admitted_at, ended_at in rows:
        admitted = from_db(admitted_at)
        ended = from_db(ended_at) if ended_at else t1
        ended = min(ended, t1)
        area += max(0.0, (ended - max(admitted, t0)).total_seconds())
        if admitted >= t0:
            arrivals += 1
            time_in_system += (ended - admitted).total_seconds()
    refused = conn.execute("SELECT coalesce(sum(count), 0) FROM counters WHERE kind = 'refused_capacity' "
                           "AND minute >= $1 AND minute <= $2", (start[:16], end[:16])).fetchone()[0]
    if span <= 0:
        return Stats(0.0, 0, refused, 0.0, 0.0, 0.0)
    return Stats(span, arrivals, refused, arrivals / span, time_in_system / arrivals if arrivals else 0.0,
                 area / span)
