-- 0018: ordering that learns from sales (issue 30). See store/sqlite/migrations/0018_ordering.sql for the why.

CREATE TABLE sales_days (
    item        text COLLATE "C" NOT NULL REFERENCES items (item),
    day         text COLLATE "C" NOT NULL CHECK (length(day) = 10),
    quantity    bigint NOT NULL CHECK (quantity >= 0),
    source      text COLLATE "C" NOT NULL,
    imported_at text COLLATE "C" NOT NULL,
    PRIMARY KEY (item, day)
);
CREATE OR REPLACE FUNCTION sales_day_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a recorded day of sales never changes (a different quantity is a conflict)';
    RETURN NEW;
END $$;
CREATE TRIGGER sales_day_fixed BEFORE UPDATE ON sales_days FOR EACH ROW EXECUTE FUNCTION sales_day_fixed();

CREATE TABLE item_settings (
    item          text COLLATE "C" PRIMARY KEY REFERENCES items (item),
    reorder_point bigint NOT NULL CHECK (reorder_point >= 0),
    target        bigint NOT NULL CHECK (target >= reorder_point),
    decided_by    text COLLATE "C" NOT NULL,
    decided_at    text COLLATE "C" NOT NULL,
    prompt        text COLLATE "C"
);

ALTER TABLE items ADD COLUMN pack bigint CHECK (pack IS NULL OR pack >= 1);
ALTER TABLE items ADD COLUMN min_order bigint CHECK (min_order IS NULL OR min_order >= 1);
ALTER TABLE items ADD COLUMN price_cents bigint CHECK (price_cents IS NULL OR price_cents >= 0);

-- A report part may be a photo (the weekly review's chart): its PNG stored with the part, the text its caption.
ALTER TABLE deliveries ADD COLUMN photo bytea;
DROP TRIGGER delivery_text_fixed ON deliveries;
CREATE OR REPLACE FUNCTION delivery_text_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.state IN ('confirmed', 'failed', 'denied') AND OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL
          AND NEW.text = '' AND NEW.photo IS NULL AND NEW.report_id = OLD.report_id AND NEW.part = OLD.part
          AND NEW.parts = OLD.parts AND NEW.chat_id = OLD.chat_id AND NEW.edit_of IS NOT DISTINCT FROM OLD.edit_of) THEN
        RAISE EXCEPTION 'C7: a delivery never changes what it sends';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER delivery_text_fixed BEFORE UPDATE OF report_id, part, parts, chat_id, text, edit_of, photo ON deliveries FOR EACH ROW EXECUTE FUNCTION delivery_text_fixed();
