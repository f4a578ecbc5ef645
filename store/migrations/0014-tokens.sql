-- Migration 14: bearer tokens and one-time login codes in the database (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS bearer_tokens (
    token_hash  TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS bearer_tokens_by_account ON bearer_tokens (account_id, expires_at);
CREATE INDEX IF NOT EXISTS bearer_tokens_by_expiry ON bearer_tokens (expires_at);

CREATE TABLE IF NOT EXISTS login_codes (
    code_hash   TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS login_codes_by_account ON login_codes (account_id);
