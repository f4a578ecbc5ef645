-- A run's children are read at every turn; without this index that read scans every run.
CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
