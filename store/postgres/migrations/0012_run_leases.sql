-- 0012: claims as leases (C15). A run's lease is judged by the database clock (`clock_timestamp()`), never a
-- worker's: the claim sets it, the run renews it while it works, every write of the run requires it unexpired, and
-- a sweep ends only runs whose lease has lapsed (outcome 'expired'). NULL for ended runs and runs from before.
-- The one-open-run-per-session index (T2 as a constraint) exists since 0001 here; SQLite gains it in its 0012.
ALTER TABLE runs ADD COLUMN lease_expires_at timestamptz;
ALTER TABLE runs DROP CONSTRAINT runs_outcome_check;
ALTER TABLE runs ADD CONSTRAINT runs_outcome_check
    CHECK (outcome IN ('finished', 'released', 'failed', 'discarded', 'recovered', 'expired'));
-- The sweep finds expired open runs without a scan of the history.
CREATE INDEX runs_lease ON runs (lease_expires_at) WHERE ended_at IS NULL;
