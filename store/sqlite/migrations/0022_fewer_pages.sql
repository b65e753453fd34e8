-- 0022 (issue 31): fewer pages in the reply's commits. A commit costs about 0.2 ms plus 60 us for each page it
-- writes (WAL, synchronous=FULL), and every index an insert or a state change touches is a page of its own.
-- No statement reads runs_open: the open runs are read through runs_one_open_per_session (the same rows, and the
-- uniqueness T2 needs); it cost a page in every claim and every finish.
DROP INDEX runs_open;
-- The relay's reads (the due part, its next wake-up, the parts left sending) go through deliveries_open, which holds
-- the same rows and few more (the parts waiting in `unknown` for a decision): each such statement repeats that
-- index's condition (store/shared/outbox.py `OPEN_PARTS`). The two narrower indexes cost a page in every finish,
-- in every `sending` mark and in every confirmation.
DROP INDEX deliveries_pending;
DROP INDEX deliveries_sending;
-- A session's turn count and last report were written by every finish and read by nothing (a page per finish).
ALTER TABLE sessions DROP COLUMN turns;
ALTER TABLE sessions DROP COLUMN last_report;
