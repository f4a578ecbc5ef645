-- Migration 9: an account's runs in flight, counted at every claim of the queue (each
-- account's share of the slots, and which account's run starts next), from an index of just
-- the running runs (see sqlite-schema.sql).
CREATE INDEX IF NOT EXISTS runs_running_by_account ON runs (account_id) WHERE status = 'running';
