-- pragma: foreign_keys=OFF
-- 0022 (issue 31): fewer pages in the reply's commits. A commit costs about 0.2 ms plus 60 us for each page it
-- writes (WAL, synchronous=FULL), and every index an insert or a state change touches is a page of its own.
-- No statement reads runs_open: the open runs are read through runs_one_open_per_session (the same rows, and the
-- uniqueness T2 needs); it cost a page in every claim and every finish.
DROP INDEX runs_open;
-- The relay's reads (the due part, its next wake-up, the parts left sending) go through deliveries_open, which holds
-- the same rows and few more (the parts waiting in `unknown` for a decision): each such statement repeats that
-- index's condition (store/shared/outbox.py `OPEN_PARTS`). The two narrower indexes cost a page in every finish,
-- in every `sending` mark and in every confirmation.
DROP INDEX deliveries_pending;
DROP INDEX deliveries_sending;
-- A session's turn count and last report were written by every finish and read by nothing (a page per finish).
ALTER TABLE sessions DROP COLUMN turns;
ALTER TABLE sessions DROP COLUMN last_report;
-- A report's key is r<anchor>.<generation> (its CHECK), so its primary key already makes (anchor, generation) unique:
-- the second unique index cost a page in every finish. The next generation is read through report_items' key (every
-- report links its anchor item: store/shared/outbox.py `next_generation`). SQLite cannot drop a table's UNIQUE in
-- place: the table is rebuilt with its rows, indexes and triggers, foreign keys off for the rebuild (the runner checks
-- them before the commit), as 0012 did for runs.
CREATE TABLE reports_new (
    report_id   TEXT PRIMARY KEY,
    anchor      INTEGER NOT NULL REFERENCES work (work_id),
    generation  INTEGER NOT NULL CHECK (generation >= 1),
    body        TEXT NOT NULL,
    is_error    INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    destination TEXT,
    buttons     TEXT,
    run_id      TEXT,
    created_at  TEXT NOT NULL,
    pruned_at   TEXT,
    body_sha256 TEXT,
    CHECK (report_id = 'r' || anchor || '.' || generation)
);
INSERT INTO reports_new (report_id, anchor, generation, body, is_error, destination, buttons, run_id, created_at,
                         pruned_at, body_sha256)
    SELECT report_id, anchor, generation, body, is_error, destination, buttons, run_id, created_at, pruned_at,
           body_sha256 FROM reports;
DROP TABLE reports;
ALTER TABLE reports_new RENAME TO reports;
CREATE INDEX reports_created ON reports (created_at) WHERE pruned_at IS NULL;
CREATE INDEX reports_recent ON reports (created_at, anchor, generation);
CREATE TRIGGER report_immutable BEFORE UPDATE ON reports
WHEN NOT (OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL AND NEW.body = '' AND length(coalesce(NEW.body_sha256, '')) = 64
          AND NEW.report_id = OLD.report_id AND NEW.anchor = OLD.anchor AND NEW.generation = OLD.generation
          AND NEW.is_error = OLD.is_error AND NEW.destination IS OLD.destination AND NEW.buttons IS OLD.buttons
          AND NEW.run_id IS OLD.run_id AND NEW.created_at = OLD.created_at
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.report_id = OLD.report_id
                          AND d.state NOT IN ('confirmed', 'failed', 'denied')))
BEGIN SELECT RAISE(ABORT, 'C6: a report never changes; a later result is a new generation'); END;
CREATE TRIGGER report_kept BEFORE DELETE ON reports
BEGIN SELECT RAISE(ABORT, 'C6: a report is never deleted'); END;
