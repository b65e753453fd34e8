-- 0013: one leader per singleton (C16). A leader lease per singleton name, held by a holder (a random uuid4 hex made
-- at each process start, never a pid or a host name) under a generation that grows at every takeover; the
-- processes that share the database, each with its last heartbeat; and the holder/generation that marked a delivery
-- or an action `sending`, so that only a lapsed sender's sends are declared unknown. On SQLite one process holds the
-- instance lock and always leads; the times are the store's text times.

CREATE TABLE leader_leases (
    name        TEXT PRIMARY KEY CHECK (name IN ('poller', 'relay', 'producers', 'actions')),
    holder      TEXT NOT NULL,
    generation  INTEGER NOT NULL CHECK (generation >= 1),
    expires_at  TEXT NOT NULL,
    acquired_at TEXT NOT NULL,
    renewed_at  TEXT NOT NULL
);

CREATE TABLE processes (
    holder      TEXT PRIMARY KEY,
    pid         INTEGER NOT NULL,
    host        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    seen_at     TEXT NOT NULL
);

ALTER TABLE deliveries ADD COLUMN sender TEXT;
ALTER TABLE actions ADD COLUMN sender TEXT;
CREATE INDEX deliveries_sending ON deliveries (delivery_id) WHERE state = 'sending';
CREATE INDEX actions_sending ON actions (action_id) WHERE state = 'sending';
