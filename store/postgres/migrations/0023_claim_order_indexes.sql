-- 0023 (C5): a claim walks the waiting work in its own order and stops at the first due anchor, instead of judging
-- every pending item and sorting them (556 µs of CPU per claim at 1,000 pending, 65 µs at 100: bench.throughput).
-- work_claimable holds the pending agent items keyed by the claim's order (inbox.OWNER_FIRST: the owner's sessions
-- first, then admission order); its expression must stay that text for the planner to walk it in order.
CREATE INDEX work_claimable ON work ((CASE WHEN session LIKE 'tg:%' THEN 0 ELSE 1 END), work_id)
    WHERE state = 'pending' AND kind = 'agent';
-- It replaces 0005's work_pending, so an admission and a claim still write as many index pages as before: the claim's
-- move reads the session's items through work_open, and the oldest pending item (status, metrics) is read there too.
DROP INDEX work_pending;
