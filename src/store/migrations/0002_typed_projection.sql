-- Typed projection of asset properties, for search and analytics (docs/indexes-and-plans.md).
--
-- `assets.properties` (jsonb) stays the source of truth: it is the document the API returns.
-- Reading a value out of jsonb for every row costs about 3× what a typed column costs, so each
-- organization gets one table `assets_typed_<org id hex>` holding its LIVE assets' system columns
-- and one typed column per (property key, value kind): numbers as numeric, dates as date,
-- booleans, multi-selects as text[], text as text COLLATE "C". src/projection/ creates and widens
-- the table when the metamodel changes, and writes into this registry the statements that copy
-- changed asset rows into it. The triggers below run those statements in the same transaction as
-- every write to `assets`, whichever code path writes (single, bulk, embedded, setup), set-based:
-- one statement per organization per asset statement, never one per row.

CREATE TABLE asset_projections (
  org_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  table_name text NOT NULL,
  -- [{"key", "kind", "column"}]: every column ever added. Columns are only ever added, so a
  -- server holding an older metamodel never names a column that is gone.
  columns jsonb NOT NULL DEFAULT '[]',
  -- Statements run by kbis_project_assets(); $1 is the organization.
  insert_sql text NOT NULL,
  upsert_sql text NOT NULL,
  archive_sql text NOT NULL,
  delete_sql text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- 'YYYY-MM-DD' naming a real day → date, anything else → NULL. Never raises: a text value that
-- merely looks like a date (or the year 0000, which JavaScript accepts and PostgreSQL does not)
-- must not make an asset write fail. One regex for the days of each month, a leap-year test for
-- 02-29, then the cast. STABLE (the text → date cast is) so that the planner inlines it: a SQL
-- function call per row cost 3× as much on a 10,000-row insert.
CREATE FUNCTION kbis_date(t text) RETURNS date LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN left(t, 4) = '0000' THEN NULL
    WHEN t ~ '^[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))$'
      THEN t::date
    WHEN t ~ '^[0-9]{4}-02-29$' AND left(t, 4)::int % 4 = 0 AND (left(t, 4)::int % 100 <> 0 OR left(t, 4)::int % 400 = 0)
      THEN t::date
  END
$$;

-- Statement-level: the transition table holds every row the statement wrote, and the registry's
-- statements copy them in one go. The shared advisory lock per organization is taken before the
-- registry is read; src/projection/sync.ts takes it exclusively while it creates or widens a
-- table, so a write either lands before the backfill sees it or waits and uses the new columns.
CREATE FUNCTION kbis_project_assets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  org uuid;
  reg asset_projections%ROWTYPE;
BEGIN
  IF TG_OP = 'DELETE' THEN
    FOR org IN SELECT DISTINCT o.org_id FROM old_assets o LOOP
      PERFORM pg_advisory_xact_lock_shared(hashtext('kbis_projection'), hashtext(org::text));
      SELECT * INTO reg FROM asset_projections WHERE org_id = org;
      IF FOUND THEN
        EXECUTE reg.delete_sql USING org;
      END IF;
    END LOOP;
    RETURN NULL;
  END IF;
  FOR org IN SELECT DISTINCT n.org_id FROM new_assets n LOOP
    PERFORM pg_advisory_xact_lock_shared(hashtext('kbis_projection'), hashtext(org::text));
    SELECT * INTO reg FROM asset_projections WHERE org_id = org;
    IF FOUND AND TG_OP = 'INSERT' THEN
      EXECUTE reg.insert_sql USING org;
    ELSIF FOUND THEN
      EXECUTE reg.archive_sql USING org;
      EXECUTE reg.upsert_sql USING org;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

CREATE TRIGGER assets_project_insert AFTER INSERT ON assets
  REFERENCING NEW TABLE AS new_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_project_assets();
CREATE TRIGGER assets_project_update AFTER UPDATE ON assets
  REFERENCING NEW TABLE AS new_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_project_assets();
CREATE TRIGGER assets_project_delete AFTER DELETE ON assets
  REFERENCING OLD TABLE AS old_assets FOR EACH STATEMENT EXECUTE FUNCTION kbis_project_assets();
