-- Live asset counters per (organization, asset type), for the `total_items` of unfiltered and
-- type-only asset lists in O(1) (CONTRACT §1; docs/decisions/0001-counting-and-deep-pages.md).
--
-- Kept by statement-level triggers with transition tables, in the same transaction as the write:
-- a bulk statement of 10,000 rows pays one counter update per asset type it touches, not one per
-- row. Concurrent writers of the same (org, type) queue on that counter row until commit, so the
-- sum of committed deltas is always the number of committed live rows. Rows are upserted in key
-- order so that two statements touching the same types lock them in the same order.

CREATE TABLE asset_counts (
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  asset_type_key text COLLATE "C" NOT NULL,
  live bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, asset_type_key)
);

CREATE FUNCTION kbis_count_assets() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO asset_counts AS c (org_id, asset_type_key, live)
      SELECT n.org_id, n.asset_type_key, count(*) FROM new_assets n
      WHERE n.archived_at IS NULL GROUP BY 1, 2 ORDER BY 1, 2
      ON CONFLICT (org_id, asset_type_key) DO UPDATE SET live = c.live + EXCLUDED.live;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO asset_counts AS c (org_id, asset_type_key, live)
      SELECT o.org_id, o.asset_type_key, -count(*) FROM old_assets o
      WHERE o.archived_at IS NULL GROUP BY 1, 2 ORDER BY 1, 2
      ON CONFLICT (org_id, asset_type_key) DO UPDATE SET live = c.live + EXCLUDED.live;
  ELSE
    -- Most updates change neither archived_at nor the type: their deltas sum to zero and no
    -- counter row is touched (no lock, no write).
    INSERT INTO asset_counts AS c (org_id, asset_type_key, live)
      SELECT d.org_id, d.asset_type_key, sum(d.delta)::bigint FROM (
        SELECT n.org_id, n.asset_type_key, 1 AS delta FROM new_assets n WHERE n.archived_at IS NULL
        UNION ALL
        SELECT o.org_id, o.asset_type_key, -1 AS delta FROM old_assets o WHERE o.archived_at IS NULL
      ) d GROUP BY 1, 2 HAVING sum(d.delta) <> 0 ORDER BY 1, 2
      ON CONFLICT (org_id, asset_type_key) DO UPDATE SET live = c.live + EXCLUDED.live;
  END IF;
  RETURN NULL;
END
$$;

-- PostgreSQL refuses transition tables on a trigger with a column list (UPDATE OF …), so the
-- update trigger fires for every UPDATE and the function skips the ones that net to zero.
CREATE TRIGGER assets_count_insert AFTER INSERT ON assets
  REFERENCING NEW TABLE AS new_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_count_assets();
CREATE TRIGGER assets_count_update AFTER UPDATE ON assets
  REFERENCING OLD TABLE AS old_assets NEW TABLE AS new_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_count_assets();
CREATE TRIGGER assets_count_delete AFTER DELETE ON assets
  REFERENCING OLD TABLE AS old_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_count_assets();

INSERT INTO asset_counts (org_id, asset_type_key, live)
  SELECT org_id, asset_type_key, count(*) FROM assets WHERE archived_at IS NULL GROUP BY 1, 2;
