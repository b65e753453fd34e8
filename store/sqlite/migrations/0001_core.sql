-- 0001: the durable core: work inbox, sessions, runs and journal, reports, deliveries, decisions, counters.

-- The work inbox: one row per admitted occurrence (C1). A refused occurrence leaves no row.
CREATE TABLE work (
    work_id     INTEGER PRIMARY KEY,
    source      TEXT NOT NULL UNIQUE,      -- the occurrence's identity; text is never identity (C1)
    session     TEXT NOT NULL,             -- work is serialised per session; a turn never mixes sessions
    kind        TEXT NOT NULL CHECK (kind IN ('agent', 'control', 'notice')),
    payload     TEXT NOT NULL,
    destination TEXT,                      -- where the report goes: 'tg:<chat_id>', 'till:<till_id>' or NULL
    state       TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'finished', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    admitted_at TEXT NOT NULL,
    not_before  TEXT,                      -- backoff after a release (C5: a session waits with its oldest item)
    run_id      TEXT,                      -- the run that holds or last held the item
    worker_id   TEXT,
    ended_at    TEXT                       -- when it became finished or failed
);
-- Open items are few and scanned by claim and capacity; history rows never are (partial indexes).
CREATE INDEX work_open ON work (session, work_id) WHERE state IN ('pending', 'running');
CREATE INDEX work_ended ON work (ended_at) WHERE ended_at IS NOT NULL;

-- C1: new work starts pending.
CREATE TRIGGER work_insert_pending BEFORE INSERT ON work WHEN NEW.state != 'pending'
BEGIN SELECT RAISE(ABORT, 'C4: work is admitted as pending'); END;

-- C1: an admitted occurrence never changes what it is.
CREATE TRIGGER work_identity_fixed BEFORE UPDATE OF source, session, kind, payload, destination, admitted_at ON work
BEGIN SELECT RAISE(ABORT, 'C1: an admitted occurrence never changes'); END;

-- C4: nothing leaves finished or failed, whoever issues the update.
CREATE TRIGGER work_terminal_fixed BEFORE UPDATE ON work WHEN OLD.state IN ('finished', 'failed')
BEGIN SELECT RAISE(ABORT, 'C4: finished and failed work never changes'); END;

-- C4: the only moves are pending->running, running->finished|failed|pending and pending->failed.
CREATE TRIGGER work_state_machine BEFORE UPDATE OF state ON work
WHEN OLD.state != NEW.state AND NOT (
       (OLD.state = 'pending' AND NEW.state IN ('running', 'failed'))
    OR (OLD.state = 'running' AND NEW.state IN ('finished', 'failed', 'pending')))
BEGIN SELECT RAISE(ABORT, 'C4: illegal work transition'); END;

-- C5: agent work runs only under a claim (a worker and a run); control and notice items run inside admission.
CREATE TRIGGER work_claim_recorded BEFORE UPDATE OF state ON work
WHEN NEW.state = 'running' AND NEW.kind = 'agent' AND (NEW.run_id IS NULL OR NEW.worker_id IS NULL)
BEGIN SELECT RAISE(ABORT, 'C5: agent work runs only under a recorded claim'); END;

-- Conversations: history for the agent and an epoch that /forget advances (C12).
CREATE TABLE sessions (
    session      TEXT PRIMARY KEY,
    epoch        INTEGER NOT NULL DEFAULT 0,
    forgotten_at TEXT,
    forgotten_by TEXT,
    turns        INTEGER NOT NULL DEFAULT 0,
    last_report  TEXT
);

CREATE TABLE history (
    entry_id   INTEGER PRIMARY KEY,
    session    TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text       TEXT NOT NULL,
    report_id  TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX history_session ON history (session, entry_id);

-- One execution of a turn (C5, C9, C10).
CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    worker_id     TEXT NOT NULL,
    session       TEXT NOT NULL,
    anchor        INTEGER NOT NULL REFERENCES work (work_id),
    attempt       INTEGER NOT NULL,
    session_epoch INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    ended_at      TEXT,
    outcome       TEXT CHECK (outcome IN ('finished', 'released', 'failed', 'discarded', 'recovered')),
    stop_reason   TEXT,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    report_id     TEXT
);
CREATE INDEX runs_open ON runs (run_id) WHERE ended_at IS NULL;

-- The operations journal: one row per tool call, started before it acts, finished after (C10, C11).
CREATE TABLE operations (
    op_id         INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    call_id       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    effect        TEXT NOT NULL CHECK (effect IN ('read', 'internal', 'external')),
    acted_outside INTEGER NOT NULL DEFAULT 0 CHECK (acted_outside IN (0, 1)),  -- C10: changed the world outside the store
    status        TEXT NOT NULL DEFAULT 'started' CHECK (status IN ('started', 'done', 'failed')),
    result        TEXT,
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    report_id     TEXT REFERENCES reports (report_id),
    UNIQUE (run_id, call_id)
);

-- Reports: the stored answer to a turn, immutable, identity r<anchor>.<generation> (C6).
CREATE TABLE reports (
    report_id   TEXT PRIMARY KEY,
    anchor      INTEGER NOT NULL REFERENCES work (work_id),   -- the lowest work id of the turn
    generation  INTEGER NOT NULL CHECK (generation >= 1),
    body        TEXT NOT NULL,
    is_error    INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    destination TEXT,
    buttons     TEXT,                                         -- JSON rows of [label, callback data] under the last part
    run_id      TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (anchor, generation),
    CHECK (report_id = 'r' || anchor || '.' || generation)
);

-- C6: a report never changes what it says and is never deleted; a later result is a new generation.
CREATE TRIGGER report_immutable BEFORE UPDATE ON reports
BEGIN SELECT RAISE(ABORT, 'C6: a report never changes; a later result is a new generation'); END;
CREATE TRIGGER report_kept BEFORE DELETE ON reports
BEGIN SELECT RAISE(ABORT, 'C6: a report is never deleted'); END;

-- The work items a report answers (one turn may cover several items).
CREATE TABLE report_items (
    report_id TEXT NOT NULL REFERENCES reports (report_id),
    work_id   INTEGER NOT NULL REFERENCES work (work_id),
    PRIMARY KEY (work_id, report_id)
) WITHOUT ROWID;
CREATE INDEX report_items_report ON report_items (report_id);

-- Deliveries: one row per part of a report sent to a Telegram chat (C7).
CREATE TABLE deliveries (
    delivery_id INTEGER PRIMARY KEY,
    report_id   TEXT NOT NULL REFERENCES reports (report_id),
    part        INTEGER NOT NULL,
    parts       INTEGER NOT NULL,
    chat_id     INTEGER NOT NULL,
    text        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'sending', 'confirmed', 'unknown', 'failed', 'denied')),
    not_before  TEXT,                    -- 429 retry_after and per-chat pacing
    attempts    INTEGER NOT NULL DEFAULT 0,
    receipt     TEXT,                    -- Telegram's message id, required for confirmed-by-receipt
    reason      TEXT,
    resends     INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (report_id, part),
    CHECK (part >= 1 AND part <= parts)
);
CREATE INDEX deliveries_open ON deliveries (delivery_id) WHERE state IN ('pending', 'sending', 'unknown');

-- C7: deliveries start pending.
CREATE TRIGGER delivery_insert_pending BEFORE INSERT ON deliveries WHEN NEW.state != 'pending'
BEGIN SELECT RAISE(ABORT, 'C7: a delivery starts pending'); END;

-- C7: what is sent never changes.
CREATE TRIGGER delivery_text_fixed BEFORE UPDATE OF report_id, part, parts, chat_id, text ON deliveries
BEGIN SELECT RAISE(ABORT, 'C7: a delivery never changes what it sends'); END;

-- C7: confirmed, failed and denied are terminal.
CREATE TRIGGER delivery_terminal_fixed BEFORE UPDATE ON deliveries WHEN OLD.state IN ('confirmed', 'failed', 'denied')
BEGIN SELECT RAISE(ABORT, 'C7: a confirmed, failed or denied delivery never changes'); END;

-- C7: the complete moves.
CREATE TRIGGER delivery_state_machine BEFORE UPDATE OF state ON deliveries
WHEN OLD.state != NEW.state AND NOT (
       (OLD.state = 'pending' AND NEW.state IN ('sending', 'denied'))
    OR (OLD.state = 'sending' AND NEW.state IN ('confirmed', 'pending', 'failed', 'unknown'))
    OR (OLD.state = 'unknown' AND NEW.state IN ('pending', 'confirmed')))
BEGIN SELECT RAISE(ABORT, 'C7: illegal delivery transition'); END;

-- C7: confirmed by the relay needs Telegram's receipt.
CREATE TRIGGER delivery_receipt_required BEFORE UPDATE OF state ON deliveries
WHEN OLD.state = 'sending' AND NEW.state = 'confirmed' AND NEW.receipt IS NULL
BEGIN SELECT RAISE(ABORT, 'C7: confirmed needs a receipt'); END;

-- C8: an unknown delivery is resent only under a recorded resend decision, one decision per resend.
CREATE TRIGGER delivery_resend_decided BEFORE UPDATE OF state ON deliveries
WHEN OLD.state = 'unknown' AND NEW.state = 'pending' AND (
       NEW.resends != OLD.resends + 1
    OR (SELECT count(*) FROM resolutions r WHERE r.delivery_id = NEW.delivery_id AND r.decision = 'resend') < NEW.resends)
BEGIN SELECT RAISE(ABORT, 'C8: an unknown delivery is resent only with a recorded resend decision'); END;

-- C8: an unknown delivery becomes confirmed only under a recorded 'delivered' decision, with no receipt.
CREATE TRIGGER delivery_delivered_decided BEFORE UPDATE OF state ON deliveries
WHEN OLD.state = 'unknown' AND NEW.state = 'confirmed' AND (
       NEW.receipt IS NOT NULL
    OR NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.delivery_id = NEW.delivery_id AND r.decision = 'delivered'))
BEGIN SELECT RAISE(ABORT, 'C8: an unknown delivery is confirmed only with a recorded delivered decision'); END;

-- C8: every decision about an unknown delivery, who made it and when.
CREATE TABLE resolutions (
    resolution_id INTEGER PRIMARY KEY,
    delivery_id   INTEGER NOT NULL REFERENCES deliveries (delivery_id),
    decision      TEXT NOT NULL CHECK (decision IN ('resend', 'delivered')),
    decided_by    TEXT NOT NULL,
    decided_at    TEXT NOT NULL
);
CREATE INDEX resolutions_delivery ON resolutions (delivery_id);

-- C8: inline-button prompts. Buttons carry '<verb>:<nonce>'; the nonce (>= 96 random bits) names the prompt.
CREATE TABLE prompts (
    nonce      TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,          -- unknown | proposal | forget
    target     TEXT NOT NULL,          -- a report id, a proposal id or a session
    chat_id    INTEGER NOT NULL,       -- a press counts only from this chat
    created_at TEXT NOT NULL,
    expires_at TEXT,
    decided_at TEXT,
    decision   TEXT,
    decided_by TEXT
);
CREATE INDEX prompts_target ON prompts (kind, target);

-- C1: refusals, strangers and malformed input, counted per minute (never their text).
CREATE TABLE counters (
    minute TEXT NOT NULL,               -- 'YYYY-MM-DDTHH:MM'
    kind   TEXT NOT NULL,
    count  INTEGER NOT NULL,
    PRIMARY KEY (minute, kind)
) WITHOUT ROWID;
