-- pragma: foreign_keys=OFF
-- 0012: claims as leases (C15). PostgreSQL judges a run's lease by `runs.lease_expires_at` on the database clock;
-- SQLite has no leases (one process owns the file under the instance lock), so the column exists here only to keep
-- one schema and stays NULL. Both dialects: at most one open run per session, whoever writes (T2 as a constraint),
-- and a run's outcome may be 'expired' (its lease lapsed and a sweep ended it; PostgreSQL only in practice).
-- SQLite cannot change a CHECK in place: the table is rebuilt with its rows and indexes, foreign keys off for the
-- rebuild (the runner checks them before the commit), as SQLite's documented procedure for schema changes.
CREATE TABLE runs_new (
    run_id        TEXT PRIMARY KEY,
    worker_id     TEXT NOT NULL,
    session       TEXT NOT NULL,
    anchor        INTEGER NOT NULL REFERENCES work (work_id),
    attempt       INTEGER NOT NULL,
    session_epoch INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    ended_at      TEXT,
    outcome       TEXT CHECK (outcome IN ('finished', 'released', 'failed', 'discarded', 'recovered', 'expired')),
    stop_reason   TEXT,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    report_id     TEXT,
    lease_expires_at TEXT
);
INSERT INTO runs_new (run_id, worker_id, session, anchor, attempt, session_epoch, started_at, ended_at, outcome,
                      stop_reason, model_calls, input_tokens, output_tokens, report_id)
    SELECT run_id, worker_id, session, anchor, attempt, session_epoch, started_at, ended_at, outcome,
           stop_reason, model_calls, input_tokens, output_tokens, report_id FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_open ON runs (run_id) WHERE ended_at IS NULL;
CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
-- T2 as a constraint: one open run per session (an older database with two is refused by this index: it was
-- already broken, and `shopbot check` names it).
CREATE UNIQUE INDEX runs_one_open_per_session ON runs (session) WHERE ended_at IS NULL;
