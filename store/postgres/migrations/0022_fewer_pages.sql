-- 0022 (issue 31): fewer pages in the reply's commits (store/sqlite/migrations/0022_fewer_pages.sql says why): an
-- index no statement reads (runs_open), the relay's two narrow indexes whose rows deliveries_open holds
-- (deliveries_pending, deliveries_sending), the turn count and last report that every finish wrote and nothing read,
-- and the reports' second unique index: the key r<anchor>.<generation> (its CHECK) already makes the pair unique.
DROP INDEX runs_open;
DROP INDEX deliveries_pending;
DROP INDEX deliveries_sending;
ALTER TABLE sessions DROP COLUMN turns, DROP COLUMN last_report;
ALTER TABLE reports DROP CONSTRAINT reports_anchor_generation_key;
