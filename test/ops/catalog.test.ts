import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'

/**
 * CONTRACT §17 / issue 14: a schema that a distributed PostgreSQL can shard by organization. Read
 * from the catalog after every migration, so a table any later migration adds is checked too.
 */

/**
 * Tables that are not per organization: the organizations themselves and the migration log (the
 * relay's store-wide hand-over mark became one per organization with decision 0027).
 */
const GLOBAL_TABLES = ['organizations', 'schema_migrations']

interface KeyRow {
  table_name: string
  name: string
  kind: string
  columns: string[]
}

const KEYS_SQL = `
SELECT c.relname AS table_name, i.relname AS name,
       CASE WHEN x.indisprimary THEN 'primary key' ELSE 'unique index' END AS kind,
       ARRAY(SELECT a.attname::text FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum ORDER BY k.n) AS columns
FROM pg_index x
JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND (x.indisunique OR x.indisprimary)
UNION ALL
SELECT c.relname, k.conname, 'foreign key',
       ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY u(attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum ORDER BY u.n)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE k.contype = 'f' AND c.relnamespace = current_schema()::regnamespace
ORDER BY 1, 2`

const TABLES_SQL = `
SELECT c.relname AS table_name,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped) AS has_org_id,
       EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid AND x.indisprimary) AS has_primary_key
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY 1`

for (const kind of STORES) {
  describe(`${kind}: every key of a tenant table leads with org_id`, () => {
    let store: TestStore
    beforeAll(async () => {
      store = await createTestStore(kind)
    })
    afterAll(async () => store.drop())

    it('gives every table but the global ones an org_id column and a primary key', async () => {
      const tables = (await store.db.query<{ table_name: string; has_org_id: boolean; has_primary_key: boolean }>(TABLES_SQL)).rows
      expect(tables.map((t) => t.table_name)).toEqual(expect.arrayContaining(['assets', 'relationships', 'api_keys', 'api_key_writes', ...GLOBAL_TABLES]))
      const wrong = tables
        .filter((t) => !GLOBAL_TABLES.includes(t.table_name))
        .filter((t) => !t.has_org_id || !t.has_primary_key)
        .map((t) => t.table_name)
      expect(wrong).toEqual([])
    })

    it('leads every primary key, unique index and foreign key of a tenant table with org_id', async () => {
      const keys = (await store.db.query<KeyRow>(KEYS_SQL)).rows.filter((k) => !GLOBAL_TABLES.includes(k.table_name))
      // The check sees the keys it should: the tables of V1 and 0006 at least.
      expect(keys.map((k) => `${k.table_name}.${k.name}`)).toEqual(expect.arrayContaining([
        'assets.assets_pkey', 'assets.assets_unique_prop', 'api_keys.api_keys_org_secret_prefix', 'relationships.relationships_unique',
      ]))
      const offending = keys.filter((k) => k.columns[0] !== 'org_id').map((k) => `${k.kind} ${k.name} on ${k.table_name} (${k.columns.join(', ')})`)
      expect(offending).toEqual([])
    })
  })
}
