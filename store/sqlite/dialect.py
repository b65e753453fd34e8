"""SQLite's words for what differs between the dialects (store/shared/dialect.py names each)."""
from __future__ import annotations

from ..shared.dialect import DialectSQL

SQLITE = DialectSQL(
    report_sources=("(SELECT group_concat(w.source) FROM report_items ri JOIN work w USING (work_id) "
                    "WHERE ri.report_id = d.report_id AND w.source LIKE 'tg:%')"),
    # the planner is told to read the oldest open row through the partial index (a min() by rowid would walk every
    # ended row before the first open one)
    oldest_open={
        "work": "SELECT min(work_id) FROM work INDEXED BY work_open WHERE state IN ('pending', 'running')",
        "deliveries": "SELECT min(delivery_id) FROM deliveries INDEXED BY deliveries_open "
                      "WHERE state IN ('pending', 'sending', 'unknown')",
    },
    settled=None,       # one writer: a row seen is never overtaken by a lower id committed later
    # driven from the journal's oldest rows (CROSS JOIN keeps that join order in SQLite): what was deleted is gone
    # from the front, so a daily prune does not walk every old run again
    prune_operations=(
        "DELETE FROM operations WHERE op_id IN ("
        "SELECT o.op_id FROM operations o CROSS JOIN runs r ON r.run_id = o.run_id "
        "WHERE r.ended_at IS NOT NULL AND r.ended_at < $1 "
        "AND NOT EXISTS (SELECT 1 FROM proposals p WHERE p.run_id = r.run_id) "
        "AND NOT EXISTS (SELECT 1 FROM drafts d WHERE d.run_id = r.run_id) ORDER BY o.op_id LIMIT $2)"),
)
