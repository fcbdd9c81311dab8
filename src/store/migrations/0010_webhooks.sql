-- Webhooks (CONTRACT §14). The signing secret is stored as is: a signature needs the secret
-- itself, so unlike an API key it cannot be kept as a hash. The API returns it once (201 of POST,
-- 200 of rotate-secret) and never again. After a rotation the previous secret signs too until
-- `previous_secret_until` (24 h).
CREATE TABLE webhooks (
  org_id uuid NOT NULL,
  id uuid NOT NULL,
  url text NOT NULL,
  description text,
  -- Event types and patterns (`asset.created`, `asset.*`, `*`), validated by the service.
  event_types text[] NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  secret text NOT NULL,
  previous_secret text,
  previous_secret_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE
);

-- One row per (webhook, event): the outbox of the sender (src/webhooks/worker.ts). `payload` is the
-- exact JSON text sent on every attempt (the signature covers these bytes). No foreign key to
-- `events`: the event retention may purge an event whose delivery log is still wanted, and
-- `webhook.test` events exist only here.
CREATE TABLE webhook_deliveries (
  org_id uuid NOT NULL,
  id uuid NOT NULL,
  webhook_id uuid NOT NULL,
  event_id uuid NOT NULL,
  event_type text NOT NULL,
  payload text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  last_attempt_at timestamptz,
  last_status_code integer,
  -- Why the last attempt failed (timeout, refused address, HTTP status), for the delivery log.
  last_error text,
  -- When a pending delivery is due. A sender that claims it pushes this to the end of its lease
  -- and sets `lease_token`: no other sender claims it while the lease runs, and if the sender dies
  -- (kill -9), the delivery is due again when the lease ends. Only the lease holder records the outcome.
  next_attempt_at timestamptz,
  lease_token uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, webhook_id) REFERENCES webhooks (org_id, id) ON DELETE CASCADE
);

-- An event reaches a webhook once, even if the stamping transaction that enqueues it ran twice.
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (org_id, webhook_id, event_id);
-- The delivery log of a webhook, newest first.
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (org_id, webhook_id, created_at DESC, id DESC);
-- The senders' claim: due pending deliveries, across organizations (not a key, so not org-led).
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
