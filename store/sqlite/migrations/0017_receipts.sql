-- 0017: receipts (C19). The reaction that tells the owner a message was stored, one row per admitted owner message,
-- written in the admission's own transaction and set by the receipt relay. Setting a reaction is idempotent, so an
-- attempt whose outcome is unknown leaves the row pending and it is simply set again; there is no `sending` state.
CREATE TABLE receipts (
    receipt_id  INTEGER PRIMARY KEY,
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    emoji       TEXT NOT NULL CHECK (emoji != ''),
    state       TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'set', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    not_before  TEXT,
    reason      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (chat_id, message_id)
);
CREATE INDEX receipts_pending ON receipts (receipt_id) WHERE state = 'pending';
-- C19: a receipt starts pending and ends set or failed; nothing leaves set or failed.
CREATE TRIGGER receipt_insert_pending BEFORE INSERT ON receipts WHEN NEW.state != 'pending'
BEGIN SELECT RAISE(ABORT, 'C19: a receipt starts pending'); END;
CREATE TRIGGER receipt_terminal_fixed BEFORE UPDATE OF state ON receipts WHEN OLD.state != 'pending'
BEGIN SELECT RAISE(ABORT, 'C19: a set or failed receipt never changes'); END;
