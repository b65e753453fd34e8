-- 0006: the relay asks for due deliveries on every cycle and finish looks up the run's proposals; without these
-- indexes both scanned their whole table (bench/history_scale.py: 98 ms per relay cycle at 1,000,000 reports).

CREATE INDEX deliveries_pending ON deliveries (delivery_id) WHERE state = 'pending';
CREATE INDEX proposals_run ON proposals (run_id);
