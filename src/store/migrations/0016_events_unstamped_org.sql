-- Whether an organization has events that wait for their position (events/sql.ts dataVersionSql,
-- asked by reads on PostgreSQL before they answer a remembered count): one probe of this index.
-- `events_unstamped (id)` serves the relay's walk in id order over every organization; over it,
-- without statistics on events, the planner intersected the organization's whole primary key
-- range with the unstamped rows. On PGlite events are stamped as they are written (decision
-- 0018): the index stays empty there.
CREATE INDEX events_unstamped_org ON events (org_id) WHERE sequence IS NULL;
