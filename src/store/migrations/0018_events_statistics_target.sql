-- The events are sampled by ANALYZE 3,000 rows at a time, not 30,000 (a statistics target of 10
-- instead of the default 100; decision 0015). ANALYZE copies each sampled row whole, its `data`
-- document included even when only the other columns are analyzed: an event carries the asset it
-- is about, so 30,000 of them took ≈ 26 MB. On PGlite that memory is WebAssembly memory, which
-- never shrinks: the statistics keeper's ANALYZE after a few 10,000-item bulks grew it from 128 to
-- 154 MB for good. No plan over events rests on finer statistics: the feed, an asset's history and
-- the relay read their partial indexes in order, and the planner needs the share of unstamped
-- rows and the organizations, which 3,000 rows give.
ALTER TABLE events
  ALTER COLUMN org_id SET STATISTICS 10,
  ALTER COLUMN id SET STATISTICS 10,
  ALTER COLUMN sequence SET STATISTICS 10,
  ALTER COLUMN type SET STATISTICS 10,
  ALTER COLUMN subject SET STATISTICS 10,
  ALTER COLUMN time SET STATISTICS 10,
  ALTER COLUMN request_id SET STATISTICS 10,
  ALTER COLUMN idempotency_key SET STATISTICS 10,
  ALTER COLUMN data SET STATISTICS 10,
  ALTER COLUMN asset_id SET STATISTICS 10,
  ALTER COLUMN asset_type_key SET STATISTICS 10,
  ALTER COLUMN access_domain_key SET STATISTICS 10,
  ALTER COLUMN related_asset_id SET STATISTICS 10,
  ALTER COLUMN related_asset_type_key SET STATISTICS 10,
  ALTER COLUMN related_access_domain_key SET STATISTICS 10,
  ALTER COLUMN pending_publish SET STATISTICS 10;
