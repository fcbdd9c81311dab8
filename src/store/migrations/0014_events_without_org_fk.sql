-- `events.org_id` no longer references `organizations`. Every write emits its events in its own
-- statement, so the foreign key's row-level check ran once per event: 10,000 `FOR KEY SHARE`
-- look-ups of the same organization row per bulk (36 of 210 ms for 10,000 events on PostgreSQL,
-- ≈ 80 of 356 ms on PGlite), and every concurrent writer of an organization share-locked that one
-- row. The rows it guarded are written only by the service, for the organization of the key or
-- session that made the change (which exists: it was just read); the service deletes no
-- organization, so the cascade never ran (docs/decisions/0011-write-costs.md).
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_org_id_fkey;
