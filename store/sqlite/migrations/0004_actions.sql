-- 0004: approvals and the action outbox: proposals gain their decided states, actions with stable idempotency
-- keys, reconciliation and operator decisions, spending reservations.

DROP INDEX proposals_one_open_per_item;
CREATE TABLE proposals_new (
    proposal_id     INTEGER PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    report_id       TEXT REFERENCES reports (report_id),
    supplier        TEXT NOT NULL,
    item            TEXT NOT NULL,
    quantity        INTEGER NOT NULL,
    unit_cost_cents INTEGER NOT NULL,
    total_cents     INTEGER NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('proposed', 'awaiting_approval', 'rejected_by_policy', 'void',
                                                   'approved', 'rejected', 'expired')),
    reason          TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    expires_at      TEXT,                    -- an approval after this changes nothing
    decided_at      TEXT,
    decided_by      TEXT
);
INSERT INTO proposals_new (proposal_id, run_id, report_id, supplier, item, quantity, unit_cost_cents, total_cents,
                           state, reason, created_at, updated_at)
SELECT proposal_id, run_id, report_id, supplier, item, quantity, unit_cost_cents, total_cents, state, reason,
       created_at, updated_at FROM proposals;
DROP TABLE proposals;
ALTER TABLE proposals_new RENAME TO proposals;

-- C11: at most one open proposal per item (awaiting approval, or approved while its order is not settled).
CREATE UNIQUE INDEX proposals_one_open_per_item ON proposals (item) WHERE state IN ('proposed', 'awaiting_approval');

-- C11: a decided proposal never changes again.
CREATE TRIGGER proposal_decided_fixed BEFORE UPDATE OF state ON proposals
WHEN OLD.state IN ('rejected_by_policy', 'void', 'approved', 'rejected', 'expired')
BEGIN SELECT RAISE(ABORT, 'C11: a decided proposal never changes'); END;

-- The action outbox (C11): written in the approval's transaction, delivered by the action relay with the same
-- idempotency key on every attempt. The key is 128 random bits made in that transaction, never a row id (a
-- restored or second database would reuse a row id, and the supplier would drop a real order as a repeat).
CREATE TABLE actions (
    action_id       INTEGER PRIMARY KEY,
    proposal_id     INTEGER NOT NULL UNIQUE REFERENCES proposals (proposal_id),
    idempotency_key TEXT NOT NULL UNIQUE CHECK (length(idempotency_key) = 32),
    destination     TEXT NOT NULL,            -- 'supplier:<name>'
    payload         TEXT NOT NULL,            -- JSON: the minimum the supplier needs (no prompts, no transcripts)
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'sending', 'delivered', 'failed', 'unknown', 'quarantined', 'voided')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    not_before      TEXT,
    receipt         TEXT,                     -- the supplier's order id
    reason          TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX actions_open ON actions (action_id) WHERE state IN ('pending', 'sending', 'unknown', 'quarantined');

-- C11: an action never changes what it asks for.
CREATE TRIGGER action_fixed BEFORE UPDATE OF proposal_id, idempotency_key, destination, payload ON actions
BEGIN SELECT RAISE(ABORT, 'C11: an action never changes what it asks for'); END;

-- C11: delivered, failed and voided are terminal.
CREATE TRIGGER action_terminal_fixed BEFORE UPDATE ON actions WHEN OLD.state IN ('delivered', 'failed', 'voided')
BEGIN SELECT RAISE(ABORT, 'C11: a delivered, failed or voided action never changes'); END;

-- C11 (like C7): the only moves of an action.
CREATE TRIGGER action_state_machine BEFORE UPDATE OF state ON actions
WHEN OLD.state != NEW.state AND NOT (
       (OLD.state = 'pending' AND NEW.state IN ('sending', 'quarantined'))
    OR (OLD.state = 'sending' AND NEW.state IN ('delivered', 'pending', 'failed', 'unknown'))
    OR (OLD.state = 'unknown' AND NEW.state IN ('delivered', 'pending', 'failed'))
    OR (OLD.state = 'quarantined' AND NEW.state IN ('pending', 'voided')))
BEGIN SELECT RAISE(ABORT, 'C11: illegal action transition'); END;

-- C11: delivered needs the supplier's receipt.
CREATE TRIGGER action_receipt_required BEFORE UPDATE OF state ON actions
WHEN NEW.state = 'delivered' AND NEW.receipt IS NULL
BEGIN SELECT RAISE(ABORT, 'C11: a delivered action needs the supplier receipt'); END;

-- C11: an unknown action leaves unknown, and a quarantined one leaves quarantine, only by a recorded decision.
CREATE TRIGGER action_unknown_decided BEFORE UPDATE OF state ON actions
WHEN OLD.state IN ('unknown', 'quarantined') AND OLD.state != NEW.state AND NOT EXISTS (
    SELECT 1 FROM action_decisions d WHERE d.action_id = NEW.action_id AND d.decided_at = NEW.updated_at)
BEGIN SELECT RAISE(ABORT, 'C11: an unknown or quarantined action moves only with a recorded decision'); END;

-- Every decision about an action: reconciliation results and operator or owner decisions.
CREATE TABLE action_decisions (
    decision_id INTEGER PRIMARY KEY,
    action_id   INTEGER NOT NULL REFERENCES actions (action_id),
    decision    TEXT NOT NULL CHECK (decision IN ('reconciled_found', 'reconciled_absent', 'resend', 'delivered',
                                                  'release', 'void')),
    detail      TEXT,
    decided_by  TEXT NOT NULL,
    decided_at  TEXT NOT NULL
);
CREATE INDEX action_decisions_action ON action_decisions (action_id);

-- Spending reserved by approvals (per shop-local day), released when the order is rejected, fails or is voided.
CREATE TABLE spending (
    proposal_id INTEGER PRIMARY KEY REFERENCES proposals (proposal_id),
    day         TEXT NOT NULL,                -- the shop's local date
    cents       INTEGER NOT NULL CHECK (cents >= 0),
    state       TEXT NOT NULL CHECK (state IN ('reserved', 'released')),
    updated_at  TEXT NOT NULL
);
CREATE INDEX spending_day ON spending (day) WHERE state = 'reserved';
