-- 0007: on order, and cards edited in place.

-- A delivery may edit a message the bot sent (a button's card updated in place, C7): `edit_of` is that message's id
-- in the delivery's chat; NULL sends a new message. What a delivery sends, edits included, never changes.
ALTER TABLE deliveries ADD COLUMN edit_of bigint;
DROP TRIGGER delivery_text_fixed ON deliveries;
CREATE OR REPLACE FUNCTION delivery_text_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'C7: a delivery never changes what it sends';
    RETURN NEW;
END $$;
CREATE TRIGGER delivery_text_fixed BEFORE UPDATE OF report_id, part, parts, chat_id, text, edit_of ON deliveries FOR EACH ROW EXECUTE FUNCTION delivery_text_fixed();
-- A press finds the message it was pressed on (its card) by Telegram's message id, sent or edited.
CREATE INDEX deliveries_message ON deliveries (chat_id, receipt) WHERE receipt IS NOT NULL;
CREATE INDEX deliveries_edits ON deliveries (chat_id, edit_of) WHERE edit_of IS NOT NULL;

-- On order. An approved supplier order counts as on order from its approval until it is received (the
-- owner's Received, or a till count that shows the stock rose by at least the ordered amount); an item's stock
-- position is on hand plus on order. Stock events tell restocks from counts, so sales rates can be read from them.

-- stock_events.kind gains 'restock' (a till count that received an order) and 'received' (the owner's Received);
-- PostgreSQL changes the CHECK in place (SQLite rebuilds the table).
ALTER TABLE stock_events
    DROP CONSTRAINT stock_events_kind_check,
    ADD CONSTRAINT stock_events_kind_check CHECK (kind IN ('seed', 'count', 'sync', 'restock', 'received'));

CREATE TABLE orders (
    proposal_id bigint PRIMARY KEY REFERENCES proposals (proposal_id),
    item        text COLLATE "C" NOT NULL REFERENCES items (item),
    quantity    bigint NOT NULL CHECK (quantity > 0),
    state       text COLLATE "C" NOT NULL DEFAULT 'on_order'
                CHECK (state IN ('on_order', 'received', 'not_arrived', 'cancelled')),
    approved_at text COLLATE "C" NOT NULL,
    due_at      text COLLATE "C" NOT NULL,
    settled_at  text COLLATE "C",
    settled_by  text COLLATE "C",
    event_id    bigint REFERENCES stock_events (event_id),
    card_chat   bigint,
    card_message bigint,
    updated_at  text COLLATE "C" NOT NULL
);
CREATE UNIQUE INDEX orders_one_open_per_item ON orders (item) WHERE state = 'on_order';
CREATE INDEX orders_due ON orders (due_at) WHERE state = 'on_order';

CREATE OR REPLACE FUNCTION order_settled_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state != 'on_order' THEN
        RAISE EXCEPTION 'on order: a received, not arrived or cancelled order never changes';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER order_settled_fixed BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION order_settled_fixed();

CREATE OR REPLACE FUNCTION proposal_not_while_on_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'proposed' AND EXISTS (SELECT 1 FROM orders o WHERE o.item = NEW.item AND o.state = 'on_order') THEN
        RAISE EXCEPTION 'C11: at most one open proposal per item: this item is on order';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER proposal_not_while_on_order BEFORE INSERT ON proposals FOR EACH ROW EXECUTE FUNCTION proposal_not_while_on_order();

-- Orders approved before this migration: the newest approved proposal per item whose action is still live counts as
-- on order (due three days after its approval: the owner is asked once, Received or Not arrived, if it is late);
-- older ones were never tracked and are recorded as settled by this migration, without a stock event.
INSERT INTO orders (proposal_id, item, quantity, state, approved_at, due_at, settled_at, settled_by, updated_at)
    SELECT p.proposal_id, p.item, p.quantity,
           CASE WHEN p.proposal_id = (SELECT max(q.proposal_id) FROM proposals q JOIN actions b USING (proposal_id)
                                      WHERE q.item = p.item AND q.state = 'approved'
                                        AND b.state NOT IN ('failed', 'voided'))
                THEN 'on_order' ELSE 'received' END,
           coalesce(p.decided_at, p.updated_at),
           to_char((coalesce(p.decided_at, p.updated_at)::timestamptz + interval '3 days') AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS".000000Z"'),
           CASE WHEN p.proposal_id = (SELECT max(q.proposal_id) FROM proposals q JOIN actions b USING (proposal_id)
                                      WHERE q.item = p.item AND q.state = 'approved'
                                        AND b.state NOT IN ('failed', 'voided'))
                THEN NULL ELSE coalesce(p.decided_at, p.updated_at) END,
           CASE WHEN p.proposal_id = (SELECT max(q.proposal_id) FROM proposals q JOIN actions b USING (proposal_id)
                                      WHERE q.item = p.item AND q.state = 'approved'
                                        AND b.state NOT IN ('failed', 'voided'))
                THEN NULL ELSE 'system:migration 0007, before on order was tracked' END,
           coalesce(p.decided_at, p.updated_at)
    FROM proposals p JOIN actions a USING (proposal_id) JOIN items i ON i.item = p.item
    WHERE p.state = 'approved' AND a.state NOT IN ('failed', 'voided');
INSERT INTO orders (proposal_id, item, quantity, state, approved_at, due_at, settled_at, settled_by, updated_at)
    SELECT p.proposal_id, p.item, p.quantity, 'cancelled', coalesce(p.decided_at, p.updated_at),
           coalesce(p.decided_at, p.updated_at), a.updated_at, 'system:its order was not placed', a.updated_at
    FROM proposals p JOIN actions a USING (proposal_id) JOIN items i ON i.item = p.item
    WHERE p.state = 'approved' AND a.state IN ('failed', 'voided');
