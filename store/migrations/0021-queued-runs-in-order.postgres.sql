-- Version 21 on PostgreSQL: an account's queued runs in the order they were made. A claim takes
-- the oldest queued run of an account whose session is free; SQLite's index on the account ends
-- in the rowid it does not name, so it reads them in that order already and stops at the first.
-- PostgreSQL's ends where it is written, so it read every queued run of the account and sorted
-- them; with the row's number in the index it reads them in order too.
DROP INDEX IF EXISTS runs_queued_by_account;
CREATE INDEX runs_queued_by_account ON runs (account_id, rowid) WHERE status = 'queued';
