-- 0020 (C11, issue 28): a proposal refused for the shop's spending limits is recorded as what happened, not as a
-- sentence: the limit's kind and its amounts in minor units (the total is the row's total_cents). The owner's words
-- (money in the shop's format, the owner's language) are made where it is shown (worker/proposals.py). Rows refused
-- before keep their stored `reason` and read as before.
ALTER TABLE proposals ADD COLUMN refusal TEXT CHECK (refusal IS NULL OR refusal IN ('order_limit', 'day_limit'));
ALTER TABLE proposals ADD COLUMN refusal_limit_cents INTEGER CHECK (refusal_limit_cents IS NULL OR refusal_limit_cents >= 0);
ALTER TABLE proposals ADD COLUMN refusal_spent_cents INTEGER CHECK (refusal_spent_cents IS NULL OR refusal_spent_cents >= 0);
