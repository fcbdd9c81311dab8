-- The delivery log is kept as long as the events (KBIS_EVENT_RETENTION_DAYS): the hourly
-- retention deletes finished deliveries (succeeded, failed) created before then, oldest first,
-- through this index. Pending deliveries are never purged.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at) WHERE status <> 'pending';
