-- 0005: claim scans pending items in admission order; without this index it scanned the whole work table,
-- history included (bench/history_scale.py, bench/throughput.py).

CREATE INDEX work_pending ON work (work_id) WHERE state = 'pending';
