import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDb, type Db } from '../../../src/store/db.js'
import { migrate } from '../../../src/store/migrate.js'
import { Params } from '../../../src/store/sql.js'
import { parseFilter } from '../../../src/query/parse.js'
import { resolveFilter, type ResolvedNode } from '../../../src/query/resolve.js'
import { compileFilter, type PropertyStorage } from '../../../src/query/compile.js'
import { compileOrderBy, parseSortParam } from '../../../src/query/sort.js'
import { syncProjection } from '../../../src/projection/sync.js'
import { projectionStorage } from '../../../src/projection/storage.js'
import type { Projection } from '../../../src/projection/columns.js'
import { ORG_ID, givenMetamodel } from '../query/fixtures.js'

/**
 * The typed projection answers every filter and sort exactly as the jsonb documents do, on real
 * rows in PGlite (migrations 0001 + 0002): the trigger keeps it in step with inserts, updates,
 * archiving and deletes, and the compiled SQL over its typed columns has the semantics of
 * CONTRACT §4 (empty values, bad stored data, case-insensitive text).
 */

const mm = givenMetamodel()
const id = (n: number): string => `0190b3b0-0000-7000-8000-0000000000${String(n).padStart(2, '0')}`
let db: Db
let projection: Projection

interface Seed {
  type?: string
  name: string
  access: string | null
  properties: Record<string, unknown>
}

const ASSETS: Seed[] = [
  { name: 'web-01', access: 'it', properties: { hostname: 'web-01', environment: 'prod', cpu_count: 16, memory_gb: 32.5, purchased_on: '2025-06-01', tags: ['web', 'cache'], managed: true, owner: '100%_ann' } },
  { name: 'db-01', access: null, properties: { hostname: 'db-01', environment: 'staging', cpu_count: 8, memory_gb: 64, purchased_on: '2026-01-31', tags: ['db'], managed: false, owner: 'Bob' } },
  // Empty values of every kind, and bad stored data: a number as a string.
  { name: 'web_02', access: 'ops', properties: { hostname: 'web-02', environment: '', cpu_count: '16', tags: [], owner: null } },
  { name: 'cache-1', access: null, properties: {} },
  { name: 'webx03', access: 'it', properties: { hostname: 'app-01', environment: 'dev', cpu_count: 32, purchased_on: '2026-02-01', tags: ['web'], managed: null, owner: '100xann' } },
  // One key, two kinds: size is a number on racks and text on cables.
  { type: 'rack', name: 'rack-1', access: null, properties: { size: 42 } },
  { type: 'cable', name: 'cable-1', access: null, properties: { size: '3' } },
]

async function definitions(): Promise<void> {
  for (const type of mm.assetTypes.values()) {
    await db.query('INSERT INTO asset_types (org_id, key, name) VALUES ($1, $2, $3)', [ORG_ID, type.key, type.name])
    for (const p of type.properties) {
      await db.query('INSERT INTO property_definitions (org_id, asset_type_key, key, name, type) VALUES ($1, $2, $3, $4, $5)', [ORG_ID, type.key, p.key, p.name, p.type])
    }
  }
}

async function insert(n: number, a: Seed): Promise<void> {
  await db.query(
    `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $7)`,
    [ORG_ID, id(n), a.type ?? 'server', a.name, a.access, JSON.stringify(a.properties), `2026-01-01T00:${String(n).padStart(2, '0')}:00Z`],
  )
}

beforeAll(async () => {
  db = await openDb({ dataDir: 'memory://' })
  await migrate(db)
  await db.query('INSERT INTO organizations (id, key, name) VALUES ($1, $2, $3)', [ORG_ID, 'acme', 'Acme'])
  await definitions()
  // Half the rows exist before the projection (backfill), half are written after (trigger).
  for (const [i, a] of ASSETS.slice(0, 3).entries()) await insert(i + 1, a)
  projection = await db.transaction((tx) => syncProjection(tx, ORG_ID))
  for (const [i, a] of ASSETS.slice(3).entries()) await insert(i + 4, a)
  // Written, then archived (and so gone from every read), and one deleted outright.
  await insert(20, { name: 'old-web', access: 'it', properties: { environment: 'prod' } })
  await db.query('UPDATE assets SET archived_at = now() WHERE id = $1', [id(20)])
  await insert(21, { name: 'gone', access: 'it', properties: { environment: 'prod' } })
  await db.query('DELETE FROM assets WHERE id = $1', [id(21)])
})

afterAll(async () => {
  await db.close()
})

async function names(node: ResolvedNode, storage: PropertyStorage | null, sort: string): Promise<string[]> {
  const params = new Params([ORG_ID])
  if (storage === null) {
    const where = compileFilter(node, params, 'a')
    const orderBy = compileOrderBy(parseSortParam(sort), 'assets', mm, 'a')
    return (await db.query<{ name: string }>(`SELECT a.name FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL AND ${where} ORDER BY ${orderBy}`, params.values)).rows.map((r) => r.name)
  }
  const where = compileFilter(node, params, 'p', storage)
  const orderBy = compileOrderBy(parseSortParam(sort), 'assets', mm, 'p', storage)
  return (await db.query<{ name: string }>(`SELECT p.name FROM "${projection.table}" p WHERE p.org_id = $1 AND ${where} ORDER BY ${orderBy}`, params.values)).rows.map((r) => r.name)
}

/** Both storages, which must agree; returns the projection's answer. */
async function both(body: unknown, sort = 'name'): Promise<string[]> {
  const node = resolveFilter(parseFilter(body), 'assets', mm)
  const typed = await names(node, projectionStorage(projection), sort)
  expect(typed).toEqual(await names(node, null, sort))
  return typed
}

const c = (field: string, operator: string, value?: unknown) => ({ field, operator, value })

describe('the typed projection answers as the jsonb documents do', () => {
  it.each<[string, unknown, string[]]>([
    ['equals on a select', c('properties.environment', 'equals', 'prod'), ['web-01']],
    ['not_equals matches "" and missing', c('properties.environment', 'not_equals', 'prod'), ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web_02', 'webx03']],
    ['equals 16 matches the number, not the string "16"', c('properties.cpu_count', 'equals', 16), ['web-01']],
    ['greater_than skips a bad stored value', c('properties.cpu_count', 'greater_than', 10), ['web-01', 'webx03']],
    ['not_in on numbers matches missing and non-numbers', c('properties.cpu_count', 'not_in', [16]), ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web_02', 'webx03']],
    ['in on numbers, 64 = 64.0', c('properties.memory_gb', 'in', [64.0, 32.5]), ['db-01', 'web-01']],
    ['less_than on dates', c('properties.purchased_on', 'less_than', '2026-01-31'), ['web-01']],
    ['greater_than_or_equals on dates', c('properties.purchased_on', 'greater_than_or_equals', '2026-01-31'), ['db-01', 'webx03']],
    ['in on dates', c('properties.purchased_on', 'in', ['2026-02-01', '2025-06-01']), ['web-01', 'webx03']],
    ['includes on a multi-select', c('properties.tags', 'includes', 'web'), ['web-01', 'webx03']],
    ['not_includes matches [] and missing', c('properties.tags', 'not_includes', 'web'), ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web_02']],
    ['is_empty on a multi-select: [] and missing', c('properties.tags', 'is_empty'), ['cable-1', 'cache-1', 'rack-1', 'web_02']],
    ['is_not_empty on a multi-select', c('properties.tags', 'is_not_empty'), ['db-01', 'web-01', 'webx03']],
    ['is_empty on text: null and missing', c('properties.owner', 'is_empty'), ['cable-1', 'cache-1', 'rack-1', 'web_02']],
    ['is_empty on a select: "" and missing', c('properties.environment', 'is_empty'), ['cable-1', 'cache-1', 'rack-1', 'web_02']],
    ['is_not_empty on a number', c('properties.memory_gb', 'is_not_empty'), ['db-01', 'web-01']],
    ['is_empty on a boolean: null and missing, not false', c('properties.managed', 'is_empty'), ['cable-1', 'cache-1', 'rack-1', 'web_02', 'webx03']],
    ['equals false on a boolean', c('properties.managed', 'equals', false), ['db-01']],
    ['not_equals on a boolean matches false, null and missing', c('properties.managed', 'not_equals', true), ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web_02', 'webx03']],
    ['contains escapes % and _', c('properties.owner', 'contains', '%_'), ['web-01']],
    ['contains is case-insensitive', c('properties.owner', 'contains', 'BOB'), ['db-01']],
    ['not_contains matches null and missing', c('properties.owner', 'not_contains', '%_'), ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web_02', 'webx03']],
    ['starts_with on a property', c('properties.hostname', 'starts_with', 'WEB-'), ['web-01', 'web_02']],
    ['in on text', c('properties.hostname', 'in', ['db-01', 'app-01']), ['db-01', 'webx03']],
    ['not_in on text matches missing', c('properties.hostname', 'not_in', ['db-01']), ['cable-1', 'cache-1', 'rack-1', 'web-01', 'web_02', 'webx03']],
    ['one key, two kinds: a number reads the number', c('properties.size', 'greater_than', 10), ['rack-1']],
    ['one key, two kinds: a string reads the text', c('properties.size', 'equals', '3'), ['cable-1']],
    ['one key, two kinds: is_empty only where every kind is empty', c('properties.size', 'is_empty'), ['cache-1', 'db-01', 'web-01', 'web_02', 'webx03']],
    ['one key, two kinds: is_not_empty where any kind is set', c('properties.size', 'is_not_empty'), ['cable-1', 'rack-1']],
    ['system columns', { and: [c('access_domain_key', 'not_equals', 'it'), c('name', 'starts_with', 'c')] }, ['cable-1', 'cache-1']],
    ['the CONTRACT §4 example', { or: [
      { and: [c('properties.environment', 'equals', 'prod'), c('properties.cpu_count', 'greater_than_or_equals', 16)] },
      c('name', 'starts_with', 'db-')] }, ['db-01', 'web-01']],
    ['everything live (archived and deleted rows are gone)', { and: [] }, ['cable-1', 'cache-1', 'db-01', 'rack-1', 'web-01', 'web_02', 'webx03']],
  ])('%s', async (_, body, expected) => {
    expect(await both(body)).toEqual(expected)
  })

  it.each<[string, string[]]>([
    // Ties (here the empty values) in id order.
    ['properties.cpu_count', ['db-01', 'web-01', 'webx03', 'web_02', 'cache-1', 'rack-1', 'cable-1']],
    ['-properties.memory_gb,name', ['cable-1', 'cache-1', 'rack-1', 'web_02', 'webx03', 'db-01', 'web-01']],
    ['properties.purchased_on,name', ['web-01', 'db-01', 'webx03', 'cable-1', 'cache-1', 'rack-1', 'web_02']],
    ['properties.owner,name', ['web-01', 'webx03', 'db-01', 'cable-1', 'cache-1', 'rack-1', 'web_02']],
    ['-properties.managed,name', ['cable-1', 'cache-1', 'rack-1', 'web_02', 'webx03', 'web-01', 'db-01']],
  ])('sorts by %s as over jsonb', async (sort, expected) => {
    expect(await both({ and: [] }, sort)).toEqual(expected)
  })

  it('follows updates: a changed value, an archived asset, a restored one', async () => {
    await db.query(`UPDATE assets SET properties = properties || '{"environment": "prod"}' WHERE id = $1`, [id(2)])
    expect(await both(c('properties.environment', 'equals', 'prod'))).toEqual(['db-01', 'web-01'])
    await db.query('UPDATE assets SET archived_at = now() WHERE id = $1', [id(1)])
    expect(await both(c('properties.environment', 'equals', 'prod'))).toEqual(['db-01'])
    await db.query('UPDATE assets SET archived_at = NULL WHERE id = $1', [id(1)])
    expect(await both(c('properties.environment', 'equals', 'prod'))).toEqual(['db-01', 'web-01'])
  })

  it('reads a stored date that names no day as empty, without failing the write', async () => {
    // Not through the API, which refuses it; the projection must still not raise a cast error.
    const dates = ['2026-02-30', '0000-01-01', '2023-02-29', '1900-02-29', '2024-02-29', '2000-02-29', '2024-04-31', '2024-13-01', '2024-1-01', 'soon']
    for (const [i, date] of dates.entries()) await insert(30 + i, { name: `date-${date}`, access: null, properties: { purchased_on: date } })
    const rows = await db.query<{ name: string; d: string | null }>(
      `SELECT name, to_char(d_purchased_on, 'YYYY-MM-DD') AS d FROM "${projection.table}" WHERE name LIKE 'date-%' ORDER BY id`)
    expect(rows.rows.map((r) => r.d)).toEqual([null, null, null, null, '2024-02-29', '2000-02-29', null, null, null, null])
    await db.query("DELETE FROM assets WHERE name LIKE 'date-%'")
  })
})

describe('widening the projection when the metamodel grows', () => {
  it('adds and backfills the column of a new property, and the trigger fills it from then on', async () => {
    await db.query(`UPDATE assets SET properties = properties || '{"rack_units": 2}' WHERE id = $1`, [id(2)])
    await db.query("INSERT INTO property_definitions (org_id, asset_type_key, key, name, type) VALUES ($1, 'server', 'rack_units', 'Rack units', 'integer')", [ORG_ID])
    const wider = await db.transaction((tx) => syncProjection(tx, ORG_ID))
    expect(wider.columns.get('number:rack_units')).toBe('n_rack_units')
    await db.query(`UPDATE assets SET properties = properties || '{"rack_units": 4}' WHERE id = $1`, [id(5)])
    const rows = await db.query<{ name: string; n: number }>(`SELECT name, n_rack_units::int AS n FROM "${wider.table}" WHERE n_rack_units IS NOT NULL ORDER BY name`)
    expect(rows.rows).toEqual([{ name: 'db-01', n: 2 }, { name: 'webx03', n: 4 }])
  })
})
