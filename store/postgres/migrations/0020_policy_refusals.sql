-- 0020 (C11, issue 28): a proposal refused for the shop's spending limits is recorded as its kind and amounts, not
-- as a sentence (SQLite's 0020 says why). Rows refused before keep their stored `reason`.
ALTER TABLE proposals ADD COLUMN refusal text COLLATE "C" CHECK (refusal IS NULL OR refusal IN ('order_limit', 'day_limit'));
ALTER TABLE proposals ADD COLUMN refusal_limit_cents bigint CHECK (refusal_limit_cents IS NULL OR refusal_limit_cents >= 0);
ALTER TABLE proposals ADD COLUMN refusal_spent_cents bigint CHECK (refusal_spent_cents IS NULL OR refusal_spent_cents >= 0);
