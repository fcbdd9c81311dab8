-- Every primary key, unique index and foreign key of a tenant table leads with org_id, so that a
-- distributed PostgreSQL (Citus) can shard every tenant table by organization (CONTRACT §17;
-- test/unit/store/catalog.test.ts reads the catalog and fails when one does not).
--
-- The token's prefix was unique store-wide. It is the one lookup that does not know the
-- organization (a token names a key, not its organization): it keeps a plain index, and its
-- uniqueness is per organization. Prefixes are 48 random bits.
DROP INDEX api_keys_secret_prefix;
CREATE UNIQUE INDEX api_keys_org_secret_prefix ON api_keys (org_id, secret_prefix);
CREATE INDEX api_keys_secret_prefix ON api_keys (secret_prefix);

-- Read-after-write across processes without Redis (src/store/replica.ts): when an API key last
-- wrote. Read on the primary only; unlogged, as it is worth nothing after a crash.
CREATE UNLOGGED TABLE api_key_writes (
  org_id uuid NOT NULL,
  api_key_id uuid NOT NULL,
  written_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, api_key_id)
);
