-- Event positions per organization (docs/decisions/0027-event-positions-per-organization.md).
--
-- `events.sequence`, the CloudEvent's `sequence`, was drawn from one counter for the whole store,
-- so the gaps in an organization's feed told it how much the other organizations wrote. It is now
-- the organization's own position: one more than the organization's highest, given in commit
-- order (by the relay after commit on PostgreSQL, when written on PGlite). Events already written
-- keep their numbers, so every cursor handed out stays valid; the next event of an organization
-- continues from its highest. No event row is rewritten.

-- PGlite's relay hands events over to its hooks (webhook deliveries, NATS) per organization now,
-- in position order: a mark per organization replaces the store-wide one of migration 0015.
-- PostgreSQL's relay stamps (decision 0003) and does not read it.
CREATE TABLE event_handover_marks (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  handed_through bigint NOT NULL,
  PRIMARY KEY (org_id)
);
-- Every event at or below the store-wide mark was handed over; positions were drawn store-wide
-- until now, so an organization's events above it are exactly those not handed over yet.
INSERT INTO event_handover_marks (org_id, handed_through)
SELECT o.id, coalesce((SELECT max(e.sequence) FROM events e WHERE e.org_id = o.id AND e.sequence <= h.handed_through), 0)
FROM organizations o CROSS JOIN event_handover h
ORDER BY o.id;
DROP TABLE event_handover;

-- One position per event within an organization: a writer that numbered two statements' events
-- from the same highest would fail here instead of publishing the position twice.
DROP INDEX events_feed;
CREATE UNIQUE INDEX events_feed ON events (org_id, sequence) WHERE sequence IS NOT NULL;
