"""Human-readable renderings shared by the CLI and the demo."""
from __future__ import annotations

from typing import TextIO


def print_status(status: dict, out: TextIO) -> None:
    def line(text: str) -> None:
        out.write(text + "\n")
    work, deliveries = status["work"], status["deliveries"]
    line("work:       " + "  ".join(f"{k} {v}" for k, v in work.items()))
    line("deliveries: " + "  ".join(f"{k} {v}" for k, v in deliveries.items()))
    oldest, ahead = status["oldest_pending_seconds"], status.get("oldest_pending_ahead_seconds")
    if ahead is not None:
        shown = (f"unknown (admitted {ahead:.1f} s ahead of this clock: the wall clock stepped back; the work is "
                 "claimed as usual)")
    elif oldest is not None:
        shown = f"{oldest:.1f} s" if oldest >= 0.1 else f"{oldest * 1000:.1f} ms"
    else:
        shown = "none"
    line(f"open agent work: {status['open_agent_work']}; oldest pending: {shown}")
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
    if status.get("actions"):
        line("actions:    " + "  ".join(f"{k} {v}" for k, v in sorted(status["actions"].items())))
    for row in status.get("quarantined_actions", []):
        line(f"QUARANTINED action {row['action_id']} (proposal #{row['proposal_id']}): {row['reason']}"
             f"  -> shopbot actions release|void {row['action_id']}")
    for row in status.get("unknown_actions", []):
        line(f"UNKNOWN  action {row['action_id']} (proposal #{row['proposal_id']}): {row['reason']} (reconciling)")
    for row in status.get("extra", {}).get("missed", []):
        line(f"MISSED   {row['schedule']} {row['key']} ({row['reason']}, recorded {row['recorded_at'][:16]})")
    if status["counters"]:
        line("counted:    " + "  ".join(f"{k} {v}" for k, v in status["counters"].items()))
    for row in status.get("processes", []):
        line(f"process    {row['holder'][:8]} pid {row['pid']} on {row['host']}, seen {row['seen_s_ago']:.1f} s ago")
    for row in status.get("leases", []):
        held = (f"expires in {row['expires_in_s']:.1f} s" if row["expires_in_s"] > 0
                else f"free (expired {-row['expires_in_s']:.1f} s ago)")
        line(f"leader     {row['name']:<9} {row['holder'][:8]} generation {row['generation']}, {held}")
