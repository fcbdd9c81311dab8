-- `assets_live_type (org_id, asset_type_key)` served the `count(*)` of unfiltered and type-only
-- lists. Those counts now come from `asset_counts` (0008), and a capped count with a type filter
-- walks `assets_live_type_created` / `assets_live_type_name` (same leading columns). Nothing reads
-- it any more; every insert, and every update that moves a row, paid for it
-- (docs/decisions/0011-write-costs.md).
DROP INDEX IF EXISTS assets_live_type;
