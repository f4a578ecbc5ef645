-- Migration 15 on PostgreSQL: the order rows were made in. SQLite numbers every row of a table
-- (its rowid), and the store orders runs and continuation edges by that number; PostgreSQL gets
-- a column of the same name, numbered by an identity, so that the same statements read both.
ALTER TABLE runs ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE session_continuations ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
