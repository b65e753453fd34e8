-- 0013: one leader per singleton (C16), as SQLite's 0013. The lease times are timestamptz, judged by the database
-- clock (clock_timestamp()) alone, so processes whose clocks disagree can never both hold a lease.

CREATE TABLE leader_leases (
    name        text COLLATE "C" PRIMARY KEY CHECK (name IN ('poller', 'relay', 'producers', 'actions')),
    holder      text COLLATE "C" NOT NULL,
    generation  bigint NOT NULL CHECK (generation >= 1),
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL
);

CREATE TABLE processes (
    holder      text COLLATE "C" PRIMARY KEY,
    pid         bigint NOT NULL,
    host        text COLLATE "C" NOT NULL,
    started_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL
);

ALTER TABLE deliveries ADD COLUMN sender text COLLATE "C";
ALTER TABLE actions ADD COLUMN sender text COLLATE "C";
CREATE INDEX deliveries_sending ON deliveries (delivery_id) WHERE state = 'sending';
CREATE INDEX actions_sending ON actions (action_id) WHERE state = 'sending';
