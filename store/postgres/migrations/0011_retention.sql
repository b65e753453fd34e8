-- 0011: retention (`shopbot prune`) and the index /metrics reads ended turns by.
-- A pruned row stays as a tombstone: its identity, states and times are kept, its body or payload becomes '' and
-- the payload's SHA-256 is kept, so a retried till post is still a duplicate and a conflict still a conflict (C1).
-- The immutability triggers allow exactly this move and nothing else, and only on ended rows.

ALTER TABLE work ADD COLUMN pruned_at text COLLATE "C";
ALTER TABLE work ADD COLUMN payload_sha256 text COLLATE "C";
ALTER TABLE reports ADD COLUMN pruned_at text COLLATE "C";
ALTER TABLE reports ADD COLUMN body_sha256 text COLLATE "C";
ALTER TABLE deliveries ADD COLUMN pruned_at text COLLATE "C";

CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX history_created ON history (created_at);
CREATE INDEX reports_created ON reports (created_at) WHERE pruned_at IS NULL;
CREATE INDEX work_prunable ON work (ended_at) WHERE pruned_at IS NULL AND ended_at IS NOT NULL;
CREATE INDEX drafts_run ON drafts (run_id);
-- The operator page's and `shopbot status`'s lists of the last failures, without a scan of the history.
CREATE INDEX work_failed ON work (work_id) WHERE state = 'failed';
CREATE INDEX deliveries_failed ON deliveries (delivery_id) WHERE state IN ('failed', 'denied');
-- The latest reports (`shopbot reports`, the operator page) without sorting the whole table.
CREATE INDEX reports_recent ON reports (created_at, anchor, generation);

DROP TRIGGER work_identity_fixed ON work;
DROP TRIGGER work_terminal_fixed ON work;
DROP TRIGGER report_immutable ON reports;
DROP TRIGGER delivery_text_fixed ON deliveries;
DROP TRIGGER delivery_terminal_fixed ON deliveries;

-- C1: an admitted occurrence never changes what it is (retention may only empty the payload of ended work, keeping
-- its SHA-256).
CREATE OR REPLACE FUNCTION work_identity_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.state IN ('finished', 'failed') AND OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL
          AND NEW.payload = '' AND length(coalesce(NEW.payload_sha256, '')) = 64 AND NEW.source = OLD.source
          AND NEW.session = OLD.session AND NEW.kind = OLD.kind AND NEW.destination IS NOT DISTINCT FROM OLD.destination
          AND NEW.admitted_at = OLD.admitted_at AND NEW.state = OLD.state) THEN
        RAISE EXCEPTION 'C1: an admitted occurrence never changes';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER work_identity_fixed BEFORE UPDATE OF source, session, kind, payload, destination, admitted_at ON work FOR EACH ROW EXECUTE FUNCTION work_identity_fixed();

-- C4: nothing leaves finished or failed, whoever issues the update (retention's tombstone move aside).
CREATE OR REPLACE FUNCTION work_terminal_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('finished', 'failed') AND NOT (
    OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL AND NEW.payload = '' AND length(coalesce(NEW.payload_sha256, '')) = 64
    AND NEW.state = OLD.state AND NEW.attempts = OLD.attempts AND NEW.run_id IS NOT DISTINCT FROM OLD.run_id
    AND NEW.worker_id IS NOT DISTINCT FROM OLD.worker_id AND NEW.ended_at IS NOT DISTINCT FROM OLD.ended_at AND NEW.not_before IS NOT DISTINCT FROM OLD.not_before) THEN
        RAISE EXCEPTION 'C4: finished and failed work never changes';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER work_terminal_fixed BEFORE UPDATE ON work FOR EACH ROW EXECUTE FUNCTION work_terminal_fixed();

-- Retention: only the tombstone move sets pruned_at or the payload hash.
CREATE OR REPLACE FUNCTION work_prune_path() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.state IN ('finished', 'failed') AND OLD.pruned_at IS NULL AND NEW.payload = '') THEN
        RAISE EXCEPTION 'C1: only an ended item is pruned, once';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER work_prune_path BEFORE UPDATE OF pruned_at, payload_sha256 ON work FOR EACH ROW EXECUTE FUNCTION work_prune_path();

-- C6: a report never changes what it says and is never deleted; a later result is a new generation. Retention may
-- empty the body of a report whose every part is delivered, failed or denied, keeping its SHA-256.
CREATE OR REPLACE FUNCTION report_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL AND NEW.body = '' AND length(coalesce(NEW.body_sha256, '')) = 64
          AND NEW.report_id = OLD.report_id AND NEW.anchor = OLD.anchor AND NEW.generation = OLD.generation
          AND NEW.is_error = OLD.is_error AND NEW.destination IS NOT DISTINCT FROM OLD.destination AND NEW.buttons IS NOT DISTINCT FROM OLD.buttons
          AND NEW.run_id IS NOT DISTINCT FROM OLD.run_id AND NEW.created_at = OLD.created_at
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.report_id = OLD.report_id
                          AND d.state NOT IN ('confirmed', 'failed', 'denied'))) THEN
        RAISE EXCEPTION 'C6: a report never changes; a later result is a new generation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER report_immutable BEFORE UPDATE ON reports FOR EACH ROW EXECUTE FUNCTION report_immutable();

-- C7: what is sent never changes (retention may empty the text of a confirmed, failed or denied part).
CREATE OR REPLACE FUNCTION delivery_text_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.state IN ('confirmed', 'failed', 'denied') AND OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL
          AND NEW.text = '' AND NEW.report_id = OLD.report_id AND NEW.part = OLD.part AND NEW.parts = OLD.parts
          AND NEW.chat_id = OLD.chat_id AND NEW.edit_of IS NOT DISTINCT FROM OLD.edit_of) THEN
        RAISE EXCEPTION 'C7: a delivery never changes what it sends';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER delivery_text_fixed BEFORE UPDATE OF report_id, part, parts, chat_id, text, edit_of ON deliveries FOR EACH ROW EXECUTE FUNCTION delivery_text_fixed();

-- C7: confirmed, failed and denied are terminal (retention's emptied text aside).
CREATE OR REPLACE FUNCTION delivery_terminal_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('confirmed', 'failed', 'denied')
AND NOT (OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL AND NEW.text = '' AND NEW.state = OLD.state
         AND NEW.receipt IS NOT DISTINCT FROM OLD.receipt AND NEW.reason IS NOT DISTINCT FROM OLD.reason AND NEW.resends = OLD.resends
         AND NEW.attempts = OLD.attempts AND NEW.updated_at = OLD.updated_at) THEN
        RAISE EXCEPTION 'C7: a confirmed, failed or denied delivery never changes';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER delivery_terminal_fixed BEFORE UPDATE ON deliveries FOR EACH ROW EXECUTE FUNCTION delivery_terminal_fixed();

-- /healthz: one row the write probe commits to at most every few seconds (a commit that cannot land is a fault).
CREATE TABLE health_probe (
    id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY CHECK (id = 1),
    probed_at text COLLATE "C" NOT NULL
);
