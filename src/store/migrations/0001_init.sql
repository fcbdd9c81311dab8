-- kbis schema, version 1.
-- Every table carries org_id and leads its primary key with it, so the tables could later be
-- distributed by organization (e.g. Citus) without changing a query: every query is scoped by org_id.
-- Text columns that the API sorts on use COLLATE "C" so that the order is byte order on every store
-- (PGlite has no ICU and a C locale; a PostgreSQL server may have another default collation).

CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  key text NOT NULL UNIQUE,
  name text NOT NULL,
  api_access boolean NOT NULL DEFAULT true,
  rate_limit_requests integer NOT NULL DEFAULT 6000 CHECK (rate_limit_requests > 0),
  rate_limit_window_seconds integer NOT NULL DEFAULT 60 CHECK (rate_limit_window_seconds > 0),
  ip_allowlist text[] NOT NULL DEFAULT '{}',
  -- Bumped on every metamodel change; caches of the metamodel compare it.
  metamodel_version bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE access_domains (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,
  name text NOT NULL,
  description text,
  PRIMARY KEY (org_id, key)
);

CREATE TABLE roles (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,
  name text NOT NULL,
  description text,
  -- [{access_domain_key: string|null|"*", asset_type_keys: ["*"]|string[], level}]
  grants jsonb NOT NULL DEFAULT '[]',
  PRIMARY KEY (org_id, key)
);

CREATE TABLE users (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  email text NOT NULL,
  name text NOT NULL,
  permission_type text NOT NULL CHECK (permission_type IN ('Viewer', 'Editor', 'Admin', 'Owner')),
  role_keys text[] NOT NULL DEFAULT '{}',
  enabled boolean NOT NULL DEFAULT true,
  sign_in_methods text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, id),
  CONSTRAINT users_email_unique UNIQUE (org_id, email)
);

CREATE TABLE api_keys (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  description text,
  permission_type text NOT NULL CHECK (permission_type IN ('Viewer', 'Editor', 'Admin')),
  role_keys text[] NOT NULL DEFAULT '{}',
  owner_user_id uuid NOT NULL,
  -- The public part of the token, used to find the key; the secret itself is kept only as a hash.
  secret_prefix text NOT NULL,
  secret_hash bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, owner_user_id) REFERENCES users (org_id, id)
);
-- Looked up before the organization is known (the token names the key, not the organization).
CREATE UNIQUE INDEX api_keys_secret_prefix ON api_keys (secret_prefix);

CREATE TABLE asset_types (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,
  name text NOT NULL,
  description text,
  position integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, key)
);

CREATE TABLE property_definitions (
  org_id uuid NOT NULL,
  asset_type_key text NOT NULL,
  key text NOT NULL,
  name text NOT NULL,
  description text,
  type text NOT NULL,
  required boolean NOT NULL DEFAULT false,
  options text[],
  currency text,
  min double precision,
  max double precision,
  position integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, asset_type_key, key),
  FOREIGN KEY (org_id, asset_type_key) REFERENCES asset_types (org_id, key) ON DELETE CASCADE
);

CREATE TABLE relationship_types (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,
  name text NOT NULL,
  description text,
  source_asset_type_keys text[] NOT NULL DEFAULT '{}',
  target_asset_type_keys text[] NOT NULL DEFAULT '{}',
  position integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, key)
);

CREATE TABLE assets (
  org_id uuid NOT NULL,
  id uuid NOT NULL,
  asset_type_key text COLLATE "C" NOT NULL,
  name text COLLATE "C" NOT NULL,
  access_domain_key text COLLATE "C",
  properties jsonb NOT NULL DEFAULT '{}',
  -- The value of the type's unique_key property, copied here so that one partial unique index
  -- enforces uniqueness among live assets in the database (no read-then-write race).
  unique_value text,
  archived_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, asset_type_key) REFERENCES asset_types (org_id, key)
);
CREATE UNIQUE INDEX assets_unique_prop ON assets (org_id, asset_type_key, unique_value)
  WHERE archived_at IS NULL AND unique_value IS NOT NULL;
-- List orders (default created_at, or name), with and without a type filter; `id` breaks ties so
-- that pages are stable and the index serves ORDER BY … , id LIMIT … directly.
CREATE INDEX assets_live_created ON assets (org_id, created_at, id) WHERE archived_at IS NULL;
CREATE INDEX assets_live_name ON assets (org_id, name, id) WHERE archived_at IS NULL;
CREATE INDEX assets_live_type_created ON assets (org_id, asset_type_key, created_at, id)
  WHERE archived_at IS NULL;
CREATE INDEX assets_live_type_name ON assets (org_id, asset_type_key, name, id)
  WHERE archived_at IS NULL;
-- Narrow index for the `total_items` counts of unfiltered and type-filtered lists: btree
-- deduplication keeps it a few MB at a million assets, so the count is an index-only scan.
CREATE INDEX assets_live_type ON assets (org_id, asset_type_key) WHERE archived_at IS NULL;
-- Equality filters on any property (`properties @> {...}`), multi-select membership included.
CREATE INDEX assets_live_properties ON assets USING gin (properties jsonb_path_ops)
  WHERE archived_at IS NULL;

CREATE TABLE relationships (
  org_id uuid NOT NULL,
  id uuid NOT NULL,
  relationship_type_key text COLLATE "C" NOT NULL,
  source_asset_id uuid NOT NULL,
  target_asset_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, id),
  -- Leads with the source so that it also serves "outgoing relationships of these assets".
  CONSTRAINT relationships_unique UNIQUE (org_id, source_asset_id, relationship_type_key, target_asset_id),
  FOREIGN KEY (org_id, source_asset_id) REFERENCES assets (org_id, id),
  FOREIGN KEY (org_id, target_asset_id) REFERENCES assets (org_id, id),
  FOREIGN KEY (org_id, relationship_type_key) REFERENCES relationship_types (org_id, key)
);
CREATE INDEX relationships_target ON relationships (org_id, target_asset_id, relationship_type_key);
CREATE INDEX relationships_created ON relationships (org_id, created_at, id);

-- Fixed-window request counters shared by every server process on one store (CONTRACT §10).
CREATE TABLE rate_limit_counters (
  org_id uuid NOT NULL,
  window_start bigint NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (org_id, window_start)
);
