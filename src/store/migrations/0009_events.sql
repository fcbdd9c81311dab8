-- Events: a transactional outbox and an ordered change feed (CONTRACT §13;
-- docs/decisions/0003-event-feed-ordering.md).
--
-- Writers insert their events with `sequence` NULL in the transaction of the change. One relay at
-- a time (under an advisory lock, whatever the number of server processes) stamps `sequence` in a
-- later transaction, after the writers committed: a stamped position is therefore higher than
-- every position any reader could already see, and a reader that follows `sequence > cursor`
-- never skips an event that committed late.

-- Drawn ONLY by the relay, under its advisory lock (src/events/relay.ts).
CREATE SEQUENCE event_sequence;

CREATE TABLE events (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- CloudEvents id, a UUIDv7 made by the writing process (ids of one process sort in creation
  -- order, so the relay stamps one request's events in item order).
  id uuid NOT NULL,
  -- NULL until stamped after commit; then strictly increasing in commit order.
  sequence bigint,
  type text COLLATE "C" NOT NULL,
  subject text COLLATE "C" NOT NULL,
  time timestamptz NOT NULL,
  request_id text,
  idempotency_key text,
  data jsonb NOT NULL,
  -- Scoping (a key sees the events of the assets it can see), as they were at the event: the
  -- asset's (or, for a relationship, its source's) type and access domain, and for a relationship
  -- its target's. API key events have none.
  asset_id uuid,
  asset_type_key text COLLATE "C",
  access_domain_key text COLLATE "C",
  related_asset_id uuid,
  related_asset_type_key text COLLATE "C",
  related_access_domain_key text COLLATE "C",
  -- true from stamping until published to NATS (only when NATS_URL is set).
  pending_publish boolean NOT NULL DEFAULT false,
  PRIMARY KEY (org_id, id)
);

-- The feed: an organization's stamped events in sequence order.
CREATE INDEX events_feed ON events (org_id, sequence) WHERE sequence IS NOT NULL;
-- What the relay stamps next; small, since rows leave it within milliseconds.
CREATE INDEX events_unstamped ON events (id) WHERE sequence IS NULL;
-- History of an asset: its own events and those of the relationships touching it.
CREATE INDEX events_asset ON events (org_id, asset_id) WHERE asset_id IS NOT NULL;
CREATE INDEX events_related_asset ON events (org_id, related_asset_id) WHERE related_asset_id IS NOT NULL;
-- Published to NATS after commit; the rows a crash left unpublished.
CREATE INDEX events_pending_publish ON events (sequence) WHERE pending_publish;
-- Retention: events are appended in time order, so a BRIN index finds the old ones for almost nothing.
CREATE INDEX events_time ON events USING brin (time);

-- Per organization, the highest sequence that retention has purged: a cursor below it may have
-- missed events and answers 410 cursor_expired.
CREATE TABLE event_retention (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  purged_through bigint NOT NULL,
  PRIMARY KEY (org_id)
);
