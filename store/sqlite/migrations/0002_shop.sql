-- 0002: the shop: items and stock, stock events, drafts and proposals recorded by the agent's tools.

CREATE TABLE items (
    item            TEXT PRIMARY KEY,
    unit            TEXT NOT NULL,
    on_hand         INTEGER NOT NULL CHECK (on_hand >= 0),
    reorder_point   INTEGER NOT NULL CHECK (reorder_point >= 0),
    target          INTEGER NOT NULL CHECK (target >= 0),
    unit_cost_cents INTEGER NOT NULL CHECK (unit_cost_cents >= 0),
    max_order       INTEGER CHECK (max_order IS NULL OR max_order > 0),
    updated_at      TEXT NOT NULL
);

-- Every change of stock on hand, with where it came from (seed, till count, explicit sync).
CREATE TABLE stock_events (
    event_id    INTEGER PRIMARY KEY,
    item        TEXT NOT NULL REFERENCES items (item),
    kind        TEXT NOT NULL CHECK (kind IN ('seed', 'count', 'sync')),
    old_on_hand INTEGER,
    new_on_hand INTEGER NOT NULL,
    source      TEXT,                    -- e.g. till:1:req-7
    work_id     INTEGER REFERENCES work (work_id),
    created_at  TEXT NOT NULL
);
CREATE INDEX stock_events_item ON stock_events (item, event_id);

CREATE TABLE shop_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- draft_order (effect internal): a draft tied to the run that made it.
CREATE TABLE drafts (
    draft_id        INTEGER PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    item            TEXT NOT NULL REFERENCES items (item),
    quantity        INTEGER NOT NULL CHECK (quantity > 0),
    unit_cost_cents INTEGER NOT NULL,
    cost_cents      INTEGER NOT NULL,
    created_at      TEXT NOT NULL
);

-- propose_order (effect external, C11): a typed proposal, never a contact with anyone. It is 'proposed' (void)
-- until its turn finishes; the finish transaction makes it 'awaiting_approval'; a turn that does not finish
-- leaves it 'void'.
CREATE TABLE proposals (
    proposal_id     INTEGER PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    report_id       TEXT REFERENCES reports (report_id),
    supplier        TEXT NOT NULL,
    item            TEXT NOT NULL,
    quantity        INTEGER NOT NULL,
    unit_cost_cents INTEGER NOT NULL,
    total_cents     INTEGER NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('proposed', 'awaiting_approval', 'rejected_by_policy', 'void')),
    reason          TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
-- C11: at most one open proposal per item.
CREATE UNIQUE INDEX proposals_one_open_per_item ON proposals (item) WHERE state IN ('proposed', 'awaiting_approval');
