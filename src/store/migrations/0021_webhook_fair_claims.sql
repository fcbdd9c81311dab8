-- Fair webhook claims (docs/decisions/0005-webhook-delivery.md, "Fairness"): a sender takes due
-- deliveries in turns across webhooks — every webhook's oldest first, then every webhook's second —
-- so that one webhook with thousands due (a receiver that hangs until the timeout) no longer keeps
-- the others' deliveries waiting behind its own. The claim reads each webhook's due deliveries in
-- order from this index; the store-wide one it replaces served the old claim only.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (org_id, webhook_id, next_attempt_at) WHERE status = 'pending';
