-- Idempotency-Key (CONTRACT §16): one row per (organization, API key, method, path, key). The row
-- is inserted before the request runs (the claim: INSERT … ON CONFLICT makes exactly one request,
-- in any process on this database, the one that runs); `status` stays NULL while it runs and then
-- holds the stored response, replayed byte for byte until `expires_at`.
CREATE TABLE idempotency_keys (
  org_id uuid NOT NULL,
  api_key_id uuid NOT NULL,
  method text COLLATE "C" NOT NULL,
  path text COLLATE "C" NOT NULL,
  idempotency_key text COLLATE "C" NOT NULL,
  -- sha256 of method, path, query string and body: a repeat with another body is refused (422).
  fingerprint text NOT NULL,
  status integer,
  headers jsonb,
  body text,
  -- Who holds a running claim: only that request stores its response or gives the claim back.
  claim_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, api_key_id, method, path, idempotency_key),
  FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE
);

-- The purge deletes by expiry across organizations.
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
