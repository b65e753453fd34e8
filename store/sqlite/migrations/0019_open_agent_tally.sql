-- 0019 (C1): the open agent work (pending + running) kept, not counted, so an admission's capacity check reads a
-- few rows however long the queue is. Kept by triggers on `work`, whatever statement moves a row: slot 0 counts
-- the agent items ever admitted open, slots 1-16 (by work_id) take one off for each that left pending/running
-- (finished, failed, or deleted while open; C4 lets nothing leave finished or failed); the open count is the sum.
-- Admissions write only slot 0 and closers only slots 1-16, so on PostgreSQL an admitter (under the admission lock)
-- never waits on a closer's row, and closers of different items seldom wait on each other. `shopbot check` (W1)
-- compares the sum with a count.
CREATE TABLE open_agent_tally (
    slot INTEGER PRIMARY KEY CHECK (slot BETWEEN 0 AND 16),
    n    INTEGER NOT NULL
);
INSERT INTO open_agent_tally (slot, n)
    SELECT 0, count(*) FROM work WHERE kind = 'agent' AND state IN ('pending', 'running');
INSERT INTO open_agent_tally (slot, n) VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 0), (9, 0),
    (10, 0), (11, 0), (12, 0), (13, 0), (14, 0), (15, 0), (16, 0);
CREATE TRIGGER open_agent_admitted AFTER INSERT ON work
WHEN NEW.kind = 'agent' AND NEW.state IN ('pending', 'running')
BEGIN
    UPDATE open_agent_tally SET n = n + 1 WHERE slot = 0;
END;
CREATE TRIGGER open_agent_closed AFTER UPDATE OF state ON work
WHEN NEW.kind = 'agent' AND OLD.state IN ('pending', 'running') AND NEW.state NOT IN ('pending', 'running')
BEGIN
    UPDATE open_agent_tally SET n = n - 1 WHERE slot = 1 + NEW.work_id % 16;
END;
CREATE TRIGGER open_agent_deleted AFTER DELETE ON work
WHEN OLD.kind = 'agent' AND OLD.state IN ('pending', 'running')
BEGIN
    UPDATE open_agent_tally SET n = n - 1 WHERE slot = 1 + OLD.work_id % 16;
END;
