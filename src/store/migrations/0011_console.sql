-- The console (CONTRACT §15): password sign-in, sessions, throttling of failed sign-ins.

-- scrypt hash of the user's console password, parameters inside the string
-- (`scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`, src/console/passwords.ts); NULL = no password set.
ALTER TABLE users ADD COLUMN password_hash text;

-- One row per signed-in browser. `id` is the sha256 of the cookie's random token (a stolen
-- table does not sign anyone in); the cookie also names the organization, so every lookup leads
-- with org_id like every other tenant table. `last_seen_at` drives the idle timeout
-- (KBIS_CONSOLE_IDLE_MINUTES); `flash` carries one message (or a new key's secret) to the next
-- page shown, then is cleared: a reload shows it no more.
CREATE TABLE console_sessions (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id text COLLATE "C" NOT NULL,
  user_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  flash jsonb,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, user_id) REFERENCES users (org_id, id) ON DELETE CASCADE
);
CREATE INDEX console_sessions_seen ON console_sessions (last_seen_at);

-- Failed sign-ins, counted per subject (`email:<address>` or `ip:<address>`) in the database so
-- that every server process sees them. `org_id` is the organization of the account tried; an
-- unknown email and a client address belong to no organization and use the nil UUID (the one
-- store-wide bucket: a client address is not any organization's). No foreign key to
-- organizations for that reason.
CREATE TABLE console_sign_in_failures (
  org_id uuid NOT NULL,
  subject text COLLATE "C" NOT NULL,
  failures integer NOT NULL,
  last_failure_at timestamptz NOT NULL,
  locked_until timestamptz,
  PRIMARY KEY (org_id, subject)
);
