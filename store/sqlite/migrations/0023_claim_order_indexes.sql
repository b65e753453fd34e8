-- 0023 (C5): a claim and the worker's next wake-up read the waiting work through indexes and stop at the first anchor
-- that answers, instead of judging every pending item and sorting (556 µs of CPU per claim at 1,000 pending,
-- 65 µs at 100: bench.throughput). Both are partial: history is never in them, and an item leaves at its claim.
-- work_claimable is keyed by the claim's order (inbox.OWNER_FIRST: the owner's sessions first, then admission order);
-- its expression must stay that text for the planner to walk it in order.
CREATE INDEX work_claimable ON work ((CASE WHEN session LIKE 'tg:%' THEN 0 ELSE 1 END), work_id)
    WHERE state = 'pending' AND kind = 'agent';
-- work_waiting: the items with a back-off (not_before set) apart, the rest by admission time (inbox.waiting_sessions).
CREATE INDEX work_waiting ON work (not_before, admitted_at) WHERE state = 'pending' AND kind = 'agent';
