import { readFileSync } from 'node:fs'
import { PGlite } from '@electric-sql/pglite'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Params } from '../../../src/store/sql.js'
import { parseFilter } from '../../../src/query/parse.js'
import { parseListFilters, resolveListFilters } from '../../../src/query/list.js'
import { andNodes, resolveFilter, sqlNode, type ResolvedNode } from '../../../src/query/resolve.js'
import { compileFilter } from '../../../src/query/compile.js'
import { compileOrderBy, parseSortParam } from '../../../src/query/sort.js'
import { ORG_ID, givenMetamodel } from './fixtures.js'

/**
 * Runs compiled filters on the real schema (migration 0001) in an in-memory PGlite: the SQL is
 * valid, and the semantics (empty values, guarded casts, ILIKE escaping) hold on real rows.
 */

const mm = givenMetamodel()
const id = (n: number): string => `0190b3b0-0000-7000-8000-00000000000${n}`
let db: PGlite

interface Seed {
  name: string
  access: string | null
  properties: Record<string, unknown>
  unique?: string
  archived?: boolean
}

const ASSETS: Seed[] = [
  { name: 'web-01', access: 'it', unique: 'web-01', properties: { hostname: 'web-01', environment: 'prod', cpu_count: 16, memory_gb: 32.5, purchased_on: '2025-06-01', tags: ['web', 'cache'], managed: true, owner: '100%_ann' } },
  { name: 'db-01', access: null, unique: 'db-01', properties: { hostname: 'db-01', environment: 'staging', cpu_count: 8, memory_gb: 64, purchased_on: '2026-01-31', tags: ['db'], managed: false, owner: 'Bob' } },
  // Empty values of every kind, and a number property holding a string (bad stored data).
  { name: 'web_02', access: 'ops', unique: 'web-02', properties: { hostname: 'web-02', environment: '', cpu_count: '16', tags: [], owner: null } },
  { name: 'cache-1', access: null, properties: {} },
  { name: 'webx03', access: 'it', unique: 'app-01', properties: { hostname: 'app-01', environment: 'dev', cpu_count: 32, purchased_on: '2026-02-01', tags: ['web'], managed: null, owner: '100xann' } },
  // Archived, with the same hostname as web-01 (uniqueness holds among live assets only).
  { name: 'old-web-01', access: 'it', unique: 'web-01', archived: true, properties: { hostname: 'web-01', environment: 'prod' } },
]

beforeAll(async () => {
  db = new PGlite()
  await db.exec(readFileSync(new URL('../../../src/store/migrations/0001_init.sql', import.meta.url), 'utf8'))
  await db.query('INSERT INTO organizations (id, key, name) VALUES ($1, $2, $3)', [ORG_ID, 'acme', 'Acme'])
  await db.query("INSERT INTO asset_types (org_id, key, name) VALUES ($1, 'server', 'Server')", [ORG_ID])
  await db.query("INSERT INTO relationship_types (org_id, key, name) VALUES ($1, 'runs_on', 'Runs on')", [ORG_ID])
  for (const [i, a] of ASSETS.entries()) {
    await db.query(
      `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, archived_at, created_at, updated_at)
       VALUES ($1, $2, 'server', $3, $4, $5::jsonb, $6, $7, $8, $8)`,
      [ORG_ID, id(i + 1), a.name, a.access, JSON.stringify(a.properties), a.unique ?? null, a.archived ? '2026-03-01T00:00:00Z' : null, `2026-01-0${i + 1}T00:00:00Z`],
    )
  }
  const rels: [number, number, number][] = [[1, 1, 2], [2, 5, 2], [3, 3, 4], [4, 6, 2]]
  for (const [n, source, target] of rels) {
    await db.query(
      "INSERT INTO relationships (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at) VALUES ($1, $2, 'runs_on', $3, $4, now(), now())",
      [ORG_ID, `0190b3b0-0000-7000-9000-00000000000${n}`, id(source), id(target)],
    )
  }
})

afterAll(async () => {
  await db.close()
})

async function assetNames(node: ResolvedNode, sort = 'name'): Promise<string[]> {
  const params = new Params([ORG_ID])
  const where = compileFilter(node, params, 'a')
  const orderBy = compileOrderBy(parseSortParam(sort), 'assets', mm, 'a')
  const result = await db.query<{ name: string }>(
    `SELECT a.name FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL AND ${where} ORDER BY ${orderBy}`, params.values)
  return result.rows.map((row) => row.name)
}

const search = (body: unknown, sort?: string) => assetNames(resolveFilter(parseFilter(body), 'assets', mm), sort)

describe('compiled filters on PGlite', () => {
  it.each<[string, unknown, string[]]>([
    ['equals on a select', { field: 'properties.environment', operator: 'equals', value: 'prod' }, ['web-01']],
    ['not_equals matches "" and missing', { field: 'properties.environment', operator: 'not_equals', value: 'prod' }, ['cache-1', 'db-01', 'web_02', 'webx03']],
    ['equals 16 matches the number only, not the string "16"', { field: 'properties.cpu_count', operator: 'equals', value: 16 }, ['web-01']],
    ['greater_than skips a bad stored value without a cast error', { field: 'properties.cpu_count', operator: 'greater_than', value: 10 }, ['web-01', 'webx03']],
    ['not_in matches missing and non-numbers', { field: 'properties.cpu_count', operator: 'not_in', value: [16] }, ['cache-1', 'db-01', 'web_02', 'webx03']],
    ['in on numbers', { field: 'properties.memory_gb', operator: 'in', value: [64, 32.5] }, ['db-01', 'web-01']],
    ['less_than on dates', { field: 'properties.purchased_on', operator: 'less_than', value: '2026-01-31' }, ['web-01']],
    ['greater_than_or_equals on dates', { field: 'properties.purchased_on', operator: 'greater_than_or_equals', value: '2026-01-31' }, ['db-01', 'webx03']],
    ['includes on a multi-select', { field: 'properties.tags', operator: 'includes', value: 'web' }, ['web-01', 'webx03']],
    ['not_includes matches [] and missing', { field: 'properties.tags', operator: 'not_includes', value: 'web' }, ['cache-1', 'db-01', 'web_02']],
    ['is_empty: [] and missing', { field: 'properties.tags', operator: 'is_empty' }, ['cache-1', 'web_02']],
    ['is_empty: null and missing', { field: 'properties.owner', operator: 'is_empty' }, ['cache-1', 'web_02']],
    ['is_empty: "" and missing', { field: 'properties.environment', operator: 'is_empty' }, ['cache-1', 'web_02']],
    ['is_not_empty', { field: 'properties.environment', operator: 'is_not_empty' }, ['db-01', 'web-01', 'webx03']],
    ['is_empty on a boolean: null and missing, not false', { field: 'properties.managed', operator: 'is_empty' }, ['cache-1', 'web_02', 'webx03']],
    ['not_equals on a boolean matches false, null and missing', { field: 'properties.managed', operator: 'not_equals', value: true }, ['cache-1', 'db-01', 'web_02', 'webx03']],
    ['contains escapes % and _', { field: 'properties.owner', operator: 'contains', value: '%_' }, ['web-01']],
    ['not_contains matches null and missing', { field: 'properties.owner', operator: 'not_contains', value: '%_' }, ['cache-1', 'db-01', 'web_02', 'webx03']],
    ['contains is case-insensitive', { field: 'properties.owner', operator: 'contains', value: 'BOB' }, ['db-01']],
    ['starts_with escapes _', { field: 'name', operator: 'starts_with', value: 'web_' }, ['web_02']],
    ['not_equals on a nullable column matches NULL', { field: 'access_domain_key', operator: 'not_equals', value: 'it' }, ['cache-1', 'db-01', 'web_02']],
    ['is_empty on a nullable column', { field: 'access_domain_key', operator: 'is_empty' }, ['cache-1', 'db-01']],
    ['in on a text column', { field: 'name', operator: 'in', value: ['web-01', 'db-01'] }, ['db-01', 'web-01']],
    ['in on ids', { field: 'id', operator: 'in', value: [id(1), id(2)] }, ['db-01', 'web-01']],
    ['not_in on ids', { field: 'id', operator: 'not_in', value: [id(1), id(2)] }, ['cache-1', 'web_02', 'webx03']],
    ['greater_than on created_at with a date', { field: 'created_at', operator: 'greater_than', value: '2026-01-03' }, ['cache-1', 'webx03']],
    ['equals on created_at with a timestamp and offset', { field: 'created_at', operator: 'equals', value: '2026-01-02T01:00:00+01:00' }, ['db-01']],
    ['empty or', { or: [] }, []],
    ['the CONTRACT §4 example', { or: [
      { and: [{ field: 'properties.environment', operator: 'equals', value: 'prod' }, { field: 'properties.cpu_count', operator: 'greater_than_or_equals', value: 16 }] },
      { field: 'name', operator: 'starts_with', value: 'db-' }] }, ['db-01', 'web-01']],
  ])('%s', async (_, body, names) => {
    expect(await search(body)).toEqual(names)
  })

  it('keeps a hostile value harmless', async () => {
    expect(await search({ field: 'properties.owner', operator: 'equals', value: "x'); DROP TABLE assets;--" })).toEqual([])
    expect(await search({ and: [] })).toHaveLength(5)
  })

  it('runs list filters', async () => {
    const node = resolveListFilters(parseListFilters({ 'filter[properties.tags]': 'web', 'filter[properties.cpu_count]': '32' }), 'assets', mm)
    expect(await assetNames(node)).toEqual(['webx03'])
  })

  it('ANDs an access scope fragment', async () => {
    const filter = resolveFilter(parseFilter({ field: 'properties.tags', operator: 'includes', value: 'web' }), 'assets', mm)
    expect(await assetNames(andNodes(filter, sqlNode('a.access_domain_key = ANY($1::text[])', [['it', 'ops']])))).toEqual(['web-01', 'webx03'])
  })

  it('sorts numbers numerically, empty values last ascending and first descending, ties by id', async () => {
    expect(await search({ and: [] }, 'properties.cpu_count')).toEqual(['db-01', 'web-01', 'webx03', 'web_02', 'cache-1'])
    expect(await search({ and: [] }, '-properties.cpu_count')).toEqual(['web_02', 'cache-1', 'webx03', 'web-01', 'db-01'])
    expect(await search({ and: [] }, '-access_domain_key,name')).toEqual(['cache-1', 'db-01', 'web_02', 'web-01', 'webx03'])
  })
})

describe('compiled relationship filters on PGlite', () => {
  async function relationshipIds(node: ResolvedNode): Promise<string[]> {
    const params = new Params([ORG_ID])
    const where = compileFilter(node, params, 'r')
    const result = await db.query<{ id: string }>(
      `SELECT r.id FROM relationships r WHERE r.org_id = $1 AND ${where} ORDER BY ${compileOrderBy([], 'relationships', mm, 'r')}`, params.values)
    return result.rows.map((row) => row.id.slice(-1))
  }

  it.each<[string, unknown, string[]]>([
    ['source_asset.* through EXISTS', { field: 'source_asset.properties.environment', operator: 'equals', value: 'prod' }, ['1', '4']],
    ['target_asset.* through EXISTS', { field: 'target_asset.name', operator: 'starts_with', value: 'db' }, ['1', '2', '4']],
    ['a negative operator on the related asset', { field: 'source_asset.properties.tags', operator: 'not_includes', value: 'web' }, ['3', '4']],
    ['a composite key names the live asset only', { field: 'source_asset_id', operator: 'equals', value: 'server:hostname:web-01' }, ['1']],
    ['not_equals a composite key', { field: 'source_asset_id', operator: 'not_equals', value: 'server:hostname:web-01' }, ['2', '3', '4']],
  ])('%s', async (_, body, ids) => {
    expect(await relationshipIds(resolveFilter(parseFilter(body), 'relationships', mm))).toEqual(ids)
  })

  it('runs list filters with a composite key', async () => {
    const node = resolveListFilters(parseListFilters({ 'filter[target_asset_id]': 'server:hostname:db-01', 'filter[relationship_type_key]': 'runs_on' }), 'relationships', mm)
    expect(await relationshipIds(node)).toEqual(['1', '2', '4'])
  })
})
