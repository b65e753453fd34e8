-- 0018: ordering that learns from sales (issue 30).

-- Imported daily sales: one row per (item, shop-local day). The till's own days are read from stock_events (the
-- decreases between counts); an imported day takes the place of the till's for that day, so no day counts twice.
CREATE TABLE sales_days (
    item        TEXT NOT NULL REFERENCES items (item),
    day         TEXT NOT NULL CHECK (length(day) = 10),
    quantity    INTEGER NOT NULL CHECK (quantity >= 0),
    source      TEXT NOT NULL,
    imported_at TEXT NOT NULL,
    PRIMARY KEY (item, day)
);
CREATE TRIGGER sales_day_fixed BEFORE UPDATE ON sales_days
BEGIN SELECT RAISE(ABORT, 'a recorded day of sales never changes (a different quantity is a conflict)'); END;

-- The owner's applied reorder point and target (an Apply press, a recorded decision): they take the place of the
-- shop file's values until `shopbot settings reset ITEM`; items keeps the file's values beside them.
CREATE TABLE item_settings (
    item          TEXT PRIMARY KEY REFERENCES items (item),
    reorder_point INTEGER NOT NULL CHECK (reorder_point >= 0),
    target        INTEGER NOT NULL CHECK (target >= reorder_point),
    decided_by    TEXT NOT NULL,
    decided_at    TEXT NOT NULL,
    prompt        TEXT
);

-- The supplier's pack size and minimum order, and the selling price (for money lost per day out of stock).
ALTER TABLE items ADD COLUMN pack INTEGER CHECK (pack IS NULL OR pack >= 1);
ALTER TABLE items ADD COLUMN min_order INTEGER CHECK (min_order IS NULL OR min_order >= 1);
ALTER TABLE items ADD COLUMN price_cents INTEGER CHECK (price_cents IS NULL OR price_cents >= 0);

-- A report part may be a photo (the weekly review's chart): its PNG is stored with the part and the part's text is
-- the caption. A photo part has the same states as a text part (C7, K20); what it sends never changes either, and
-- retention empties a photo with its caption.
ALTER TABLE deliveries ADD COLUMN photo BLOB;
DROP TRIGGER delivery_text_fixed;
CREATE TRIGGER delivery_text_fixed BEFORE UPDATE OF report_id, part, parts, chat_id, text, edit_of, photo ON deliveries
WHEN NOT (OLD.state IN ('confirmed', 'failed', 'denied') AND OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL
          AND NEW.text = '' AND NEW.photo IS NULL AND NEW.report_id = OLD.report_id AND NEW.part = OLD.part
          AND NEW.parts = OLD.parts AND NEW.chat_id = OLD.chat_id AND NEW.edit_of IS OLD.edit_of)
BEGIN SELECT RAISE(ABORT, 'C7: a delivery never changes what it sends'); END;
