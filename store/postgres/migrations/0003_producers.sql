-- 0003: the producers' own progress, committed in the same transaction as the work they admit (C2).

-- The clock producer: per schedule, the fire time up to which every occurrence was decided (admitted or missed).
-- Fire times in (cursor, now] are enumerated at the next wake-up; an occurrence refused for capacity keeps the
-- cursor just before it, so it is tried again until its grace ends.
CREATE TABLE schedule_cursors (
    schedule    text COLLATE "C" PRIMARY KEY,
    cursor      text COLLATE "C" NOT NULL,             -- UTC text
    refused_key text COLLATE "C",                      -- the occurrence last refused for capacity, still being retried
    updated_at  text COLLATE "C" NOT NULL
);

-- Occurrences of a schedule that were not admitted: never work states, shown by `shopbot status`.
-- The primary key records each one once, however many wake-ups see it.
CREATE TABLE missed_occurrences (
    schedule    text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,             -- the occurrence key; '<from>/<to>' for an outage summary
    reason      text COLLATE "C" NOT NULL CHECK (reason IN ('late', 'superseded', 'capacity', 'conflict', 'outage')),
    fire_time   text COLLATE "C",                      -- UTC text; NULL for an outage summary
    recorded_at text COLLATE "C" NOT NULL,
    PRIMARY KEY (schedule, key)
);
CREATE INDEX missed_recorded ON missed_occurrences (recorded_at);

-- The stock watcher: an item is armed until the work of its low-stock episode is admitted, and re-armed for the
-- next episode once it is no longer below its reorder point. No row: armed, episode 1.
CREATE TABLE stock_watch (
    item       text COLLATE "C" PRIMARY KEY REFERENCES items (item),
    armed      bigint NOT NULL CHECK (armed IN (0, 1)),
    episode    bigint NOT NULL CHECK (episode >= 1),
    updated_at text COLLATE "C" NOT NULL
);

-- How far a producer has read an append-only table (count notices read stock_events by event_id).
CREATE TABLE producer_marks (
    name  text COLLATE "C" PRIMARY KEY,
    value bigint NOT NULL
);

-- Counts applied before this migration are not announced again.
INSERT INTO producer_marks (name, value) SELECT 'count_notices', coalesce(max(event_id), 0) FROM stock_events;
