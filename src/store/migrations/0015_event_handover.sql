-- On PGlite, events get their position when they are written (docs/decisions/0018-pglite-events-
-- stamped-when-written.md): one process, one connection, one transaction after the other, so the
-- order positions are drawn in is the order of commits. The relay then only hands the events above
-- this mark to its hooks (webhook deliveries, NATS) and moves the mark, instead of rewriting every
-- event row once more. PostgreSQL's relay stamps (decision 0003) and does not read it.
CREATE TABLE event_handover (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  handed_through bigint NOT NULL
);
-- Every event stamped so far was handed to the hooks when it was stamped.
INSERT INTO event_handover (handed_through) SELECT coalesce(max(sequence), 0) FROM events;
