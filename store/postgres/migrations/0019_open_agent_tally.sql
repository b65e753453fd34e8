-- 0019 (C1): the open agent work (pending + running) kept, not counted (SQLite's 0019 says why and how). An
-- admitter takes the admission lock, then reads the 17 rows; its own insert adds to slot 0, which only admitters
-- (all under that lock) write; a closer subtracts in its item's slot 1-16, which an admitter only reads (never
-- waits on). A closer's uncommitted subtraction is not seen yet: the check errs on the full side for that moment,
-- as the count it replaces did.
CREATE TABLE open_agent_tally (
    slot integer PRIMARY KEY CHECK (slot BETWEEN 0 AND 16),
    n    bigint NOT NULL
);
INSERT INTO open_agent_tally (slot, n)
    SELECT 0, count(*) FROM work WHERE kind = 'agent' AND state IN ('pending', 'running');
INSERT INTO open_agent_tally (slot, n) SELECT s, 0 FROM generate_series(1, 16) AS s;
CREATE FUNCTION open_agent_admitted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE open_agent_tally SET n = n + 1 WHERE slot = 0;
    RETURN NULL;
END $$;
CREATE TRIGGER open_agent_admitted AFTER INSERT ON work FOR EACH ROW
    WHEN (NEW.kind = 'agent' AND NEW.state IN ('pending', 'running')) EXECUTE FUNCTION open_agent_admitted();
CREATE FUNCTION open_agent_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE open_agent_tally SET n = n - 1 WHERE slot = 1 + OLD.work_id % 16;
    RETURN NULL;
END $$;
CREATE TRIGGER open_agent_closed AFTER UPDATE OF state ON work FOR EACH ROW
    WHEN (NEW.kind = 'agent' AND OLD.state IN ('pending', 'running') AND NEW.state NOT IN ('pending', 'running'))
    EXECUTE FUNCTION open_agent_closed();
CREATE TRIGGER open_agent_deleted AFTER DELETE ON work FOR EACH ROW
    WHEN (OLD.kind = 'agent' AND OLD.state IN ('pending', 'running')) EXECUTE FUNCTION open_agent_closed();
