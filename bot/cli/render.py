"""Human-readable renderings shared by the CLI and the demo."""
from __future__ import annotations

from typing import TextIO

from store import Status


def print_status(status: Status, out: TextIO) -> None:
    def line(text: str) -> None:
        out.write(text + "\n")
    line("work:       " + "  ".join(f"{k} {v}" for k, v in status.work.items()))
    line("deliveries: " + "  ".join(f"{k} {v}" for k, v in status.deliveries.items()))
    oldest, ahead = status.oldest_pending_seconds, status.oldest_pending_ahead_seconds
    if ahead is not None:
        shown = (f"unknown (admitted {ahead:.1f} s ahead of this clock: the wall clock stepped back; the work is "
                 "claimed as usual)")
    elif oldest is not None:
        shown = f"{oldest:.1f} s" if oldest >= 0.1 else f"{oldest * 1000:.1f} ms"
    else:
        shown = "none"
    line(f"open agent work: {status.open_agent_work}; oldest pending: {shown}")
    law = status.littles_law
    line(f"last {law.window_seconds / 60:.0f} min: λ {law.lam:.4f}/s  W {law.w:.2f} s  "
         f"L {law.l:.3f}  λW {law.lam_w:.3f}  arrivals {law.arrivals}  refused {law.refused}")
    for u in status.unknown:
        line(f"UNKNOWN  {u.report_id} part {u.part}/{u.parts} to chat {u.chat_id}: {u.reason}"
             f"  -> shopbot resolve {u.report_id} --resend | --delivered")
    for f in status.failed_work:
        line(f"FAILED   work {f.work_id} ({f.source}) report {f.report_id}")
    for p in status.failed_deliveries:
        line(f"NOT SENT {p.report_id} part {p.part} to chat {p.chat_id}: {p.reason}")
    if status.actions:
        line("actions:    " + "  ".join(f"{k} {v}" for k, v in sorted(status.actions.items())))
    for a in status.quarantined_actions:
        line(f"QUARANTINED action {a.action_id} (proposal #{a.proposal_id}): {a.reason}"
             f"  -> shopbot actions release|void {a.action_id}")
    for a in status.unknown_actions:
        line(f"UNKNOWN  action {a.action_id} (proposal #{a.proposal_id}): {a.reason} (reconciling)")
    for m in status.extra.missed:
        line(f"MISSED   {m.schedule} {m.key} ({m.reason}, recorded {m.recorded_at:%Y-%m-%dT%H:%M})")
    if status.counters:
        line("counted:    " + "  ".join(f"{k} {v}" for k, v in status.counters.items()))
    for proc in status.processes:
        line(f"process    {proc.holder[:8]} pid {proc.pid} on {proc.host}, seen {proc.seen_s_ago:.1f} s ago")
    for lease in status.leases:
        held = (f"expires in {lease.expires_in_s:.1f} s" if lease.expires_in_s > 0
                else f"free (expired {-lease.expires_in_s:.1f} s ago)")
        line(f"leader     {lease.name:<9} {lease.holder[:8]} generation {lease.generation}, {held}")
