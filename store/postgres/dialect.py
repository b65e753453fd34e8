"""PostgreSQL's words for what differs between the dialects (store/shared/dialect.py names each)."""
from __future__ import annotations

from ..shared.dialect import DialectSQL

POSTGRES = DialectSQL(
    report_sources=("(SELECT string_agg(w.source, ',') FROM report_items ri JOIN work w USING (work_id) "
                    "WHERE ri.report_id = d.report_id AND w.source LIKE 'tg:%')"),
    # the planner takes the partial indexes (work_open, deliveries_open) for these on its own
    oldest_open={
        "work": "SELECT min(work_id) FROM work WHERE state IN ('pending', 'running')",
        "deliveries": "SELECT min(delivery_id) FROM deliveries WHERE state IN ('pending', 'sending', 'unknown')",
    },
    # an INSERT holds ROW EXCLUSIVE on its table from before it draws its id until its transaction ends: with no
    # holder but this read, every id up to the highest seen is committed (or never will be)
    settled={table: ("SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'relation' "
                     f"AND l.relation = '{table}'::regclass AND l.mode = 'RowExclusiveLock' "
                     f"AND l.pid <> pg_backend_pid()) THEN NULL ELSE (SELECT coalesce(max({key}), 0) FROM {table}) END")
             for table, key in (("work", "work_id"), ("deliveries", "delivery_id"))},
    prune_operations=(
        "DELETE FROM operations WHERE op_id IN ("
        "SELECT o.op_id FROM operations o JOIN runs r ON r.run_id = o.run_id "
        "WHERE r.ended_at IS NOT NULL AND r.ended_at < $1 "
        "AND NOT EXISTS (SELECT 1 FROM proposals p WHERE p.run_id = r.run_id) "
        "AND NOT EXISTS (SELECT 1 FROM drafts d WHERE d.run_id = r.run_id) ORDER BY o.op_id LIMIT $2)"),
)
