"""Human-readable renderings shared by the CLI and the demo."""
from __future__ import annotations

from typing import TextIO


def print_status(status: dict, out: TextIO) -> None:
    def line(text: str) -> None:
        out.write(text + "\n")
    work, deliveries = status["work"], status["deliveries"]
    line("work:       " + "  ".join(f"{k} {v}" for k, v in work.items()))
    line("deliveries: " + "  ".join(f"{k} {v}" for k, v in deliveries.items()))
    oldest = status["oldest_pending_seconds"]
    line(f"open agent work: {status['open_agent_work']}; oldest pending: "
         + (f"{oldest:.1f} s" if oldest is not None else "none"))
    law = status["littles_law"]
    line(f"last {law['window_seconds'] / 60:.0f} min: λ {law['lambda_per_s']:.4f}/s  W {law['W_s']:.2f} s  "
         f"L {law['L']:.3f}  λW {law['lambda_W']:.3f}  arrivals {law['arrivals']}  refused {law['refused']}")
    for row in status["unknown"]:
        line(f"UNKNOWN  {row['report_id']} part {row['part']}/{row['parts']} to chat {row['chat_id']}: {row['reason']}"
             f"  -> shopbot resolve {row['report_id']} --resend | --delivered")
    for row in status["failed_work"]:
        line(f"FAILED   work {row['work_id']} ({row['source']}) report {row['report_id']}")
    for row in status["failed_deliveries"]:
        line(f"NOT SENT {row['report_id']} part {row['part']} to chat {row['chat_id']}: {row['reason']}")
    for key, rows in status.get("extra", {}).items():
        for row in rows:
            line(f"{key.upper():8} {row}")
    if status["counters"]:
        line("counted:    " + "  ".join(f"{k} {v}" for k, v in status["counters"].items()))
