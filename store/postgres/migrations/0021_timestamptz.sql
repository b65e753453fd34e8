-- 0021 (issue 29): every instant is a `timestamptz`, as the lease times (0012, 0013) already were. Until now they
-- were SQLite's fixed-width UTC text ('2027-03-01T09:00:00.000000Z', COLLATE "C" so text order was time order);
-- that text carries its zone ('Z'), so each value converts to the same instant. Indexes on these columns are rebuilt
-- by PostgreSQL with the new type; the triggers compare the columns with each other (=, IS NOT DISTINCT FROM), which
-- holds for timestamptz as for text. Read, they arrive in Python as aware datetimes (store/clock.py `from_db`);
-- written, the store's text is cast by the server. Not instants, and kept as text: a counter's minute bucket
-- ('YYYY-MM-DDTHH:MM', counters.minute) and the shop's local dates (spending.day, sales_days.day).
-- SQLite's 0021 is empty: its times stay the fixed-width text.
-- Two triggers name a work time in their UPDATE OF lists, which pins the column's type: dropped around the change
-- and made again as they were (0011).
DROP TRIGGER work_identity_fixed ON work;
DROP TRIGGER work_prune_path ON work;
ALTER TABLE work
    ALTER COLUMN admitted_at TYPE timestamptz USING admitted_at::timestamptz,
    ALTER COLUMN not_before TYPE timestamptz USING not_before::timestamptz,
    ALTER COLUMN ended_at TYPE timestamptz USING ended_at::timestamptz,
    ALTER COLUMN pruned_at TYPE timestamptz USING pruned_at::timestamptz;
CREATE TRIGGER work_identity_fixed BEFORE UPDATE OF source, session, kind, payload, destination, admitted_at ON work FOR EACH ROW EXECUTE FUNCTION work_identity_fixed();
CREATE TRIGGER work_prune_path BEFORE UPDATE OF pruned_at, payload_sha256 ON work FOR EACH ROW EXECUTE FUNCTION work_prune_path();
ALTER TABLE sessions
    ALTER COLUMN forgotten_at TYPE timestamptz USING forgotten_at::timestamptz;
ALTER TABLE history
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz;
ALTER TABLE runs
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz,
    ALTER COLUMN ended_at TYPE timestamptz USING ended_at::timestamptz;
ALTER TABLE operations
    ALTER COLUMN started_at TYPE timestamptz USING started_at::timestamptz,
    ALTER COLUMN finished_at TYPE timestamptz USING finished_at::timestamptz;
ALTER TABLE reports
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN pruned_at TYPE timestamptz USING pruned_at::timestamptz;
ALTER TABLE deliveries
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz,
    ALTER COLUMN not_before TYPE timestamptz USING not_before::timestamptz,
    ALTER COLUMN pruned_at TYPE timestamptz USING pruned_at::timestamptz;
ALTER TABLE resolutions
    ALTER COLUMN decided_at TYPE timestamptz USING decided_at::timestamptz;
ALTER TABLE prompts
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN expires_at TYPE timestamptz USING expires_at::timestamptz,
    ALTER COLUMN decided_at TYPE timestamptz USING decided_at::timestamptz;
ALTER TABLE items
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz;
ALTER TABLE stock_events
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz;
ALTER TABLE drafts
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz;
ALTER TABLE proposals
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz,
    ALTER COLUMN expires_at TYPE timestamptz USING expires_at::timestamptz,
    ALTER COLUMN decided_at TYPE timestamptz USING decided_at::timestamptz;
ALTER TABLE schedule_cursors
    ALTER COLUMN cursor TYPE timestamptz USING cursor::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz;
ALTER TABLE missed_occurrences
    ALTER COLUMN fire_time TYPE timestamptz USING fire_time::timestamptz,
    ALTER COLUMN recorded_at TYPE timestamptz USING recorded_at::timestamptz;
ALTER TABLE stock_watch
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz;
ALTER TABLE actions
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz,
    ALTER COLUMN not_before TYPE timestamptz USING not_before::timestamptz;
ALTER TABLE action_decisions
    ALTER COLUMN decided_at TYPE timestamptz USING decided_at::timestamptz;
ALTER TABLE spending
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz;
ALTER TABLE orders
    ALTER COLUMN approved_at TYPE timestamptz USING approved_at::timestamptz,
    ALTER COLUMN due_at TYPE timestamptz USING due_at::timestamptz,
    ALTER COLUMN settled_at TYPE timestamptz USING settled_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz;
ALTER TABLE health_probe
    ALTER COLUMN probed_at TYPE timestamptz USING probed_at::timestamptz;
ALTER TABLE receipts
    ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz,
    ALTER COLUMN updated_at TYPE timestamptz USING updated_at::timestamptz,
    ALTER COLUMN not_before TYPE timestamptz USING not_before::timestamptz;
ALTER TABLE sales_days
    ALTER COLUMN imported_at TYPE timestamptz USING imported_at::timestamptz;
ALTER TABLE item_settings
    ALTER COLUMN decided_at TYPE timestamptz USING decided_at::timestamptz;
ALTER TABLE schema_migrations
    ALTER COLUMN applied_at TYPE timestamptz USING applied_at::timestamptz;
