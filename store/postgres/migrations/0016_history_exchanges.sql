-- 0016 (C17): the history holds what the model said and did. An answer's row keeps the model's own prose in `text`
-- (no longer the report's body with its Figures block) and the turn's exchange as the model saw it in `messages`:
-- the user message as sent, its tool calls with their results, its final text (JSON, worker/history.py). Older rows
-- have none and are read as before.
ALTER TABLE history ADD COLUMN messages text COLLATE "C";
