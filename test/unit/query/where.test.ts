import { describe, expect, it } from 'vitest'
import { Params } from '../../../src/store/sql.js'
import { compileWhere, type WhereSpec } from '../../../src/query/where.js'
import { MATCH_ALL, MATCH_NONE, columnCondition, resolveFilter } from '../../../src/query/resolve.js'
import { parseFilter } from '../../../src/query/parse.js'
import { scopeFilter } from '../../../src/access/scope.js'
import { projectionStorage } from '../../../src/projection/storage.js'
import { columnName, projectionOf } from '../../../src/projection/columns.js'
import type { AuthContext } from '../../../src/core/auth/context.js'
import type { Grant } from '../../../src/core/auth/levels.js'
import { ORG_ID, givenMetamodel } from './fixtures.js'

/** Pure: compileWhere's text and values for each target and storage (no database). */

const mm = givenMetamodel()

function auth(grants: Grant[]): AuthContext {
  return {
    orgId: ORG_ID, orgKey: 'acme', keyId: 'k', userId: 'u', keyPermission: 'Editor', ownerPermission: 'Editor', permission: 'Editor',
    roleKeys: [], grants, rateLimit: { requests: 1, windowSeconds: 1 },
  }
}

const ALL = auth([{ access_domain_key: '*', asset_type_keys: ['*'], level: 'view' }])
const IT = auth([{ access_domain_key: 'it', asset_type_keys: ['*'], level: 'view' }])

function where(spec: Omit<WhereSpec, 'orgId'>): { text: string; values: unknown[] } {
  const params = new Params()
  const text = compileWhere({ ...spec, orgId: ORG_ID }, params)
  return { text, values: params.values }
}

const cpu = resolveFilter(parseFilter({ field: 'properties.cpu_count', operator: 'greater_than', value: 8 }), 'assets', mm)
const N = `(CASE WHEN jsonb_typeof(a.properties->'cpu_count') = 'number' THEN (a.properties->>'cpu_count')::numeric END)`

describe('compileWhere over assets', () => {
  it('adds the organization and liveness; a filter and a scope that match all add nothing', () => {
    expect(where({ target: 'assets', alias: 'a', filter: MATCH_ALL, scope: scopeFilter(ALL, 'view') }))
      .toEqual({ text: 'a.org_id = $1 AND a.archived_at IS NULL', values: [ORG_ID] })
  })

  it('ANDs the filter, then the scope, values in that order', () => {
    expect(where({ target: 'assets', alias: 'a', filter: cpu, scope: scopeFilter(IT, 'view') })).toEqual({
      text: `a.org_id = $1 AND a.archived_at IS NULL AND ${N} > $2 AND a."access_domain_key" = $3`,
      values: [ORG_ID, 8, 'it'],
    })
  })

  it('matches nothing for a key without grants at the level (a Viewer key above view)', () => {
    const viewer = { ...ALL, permission: 'Viewer' as const }
    expect(where({ target: 'assets', alias: 'a', filter: MATCH_ALL, scope: scopeFilter(viewer, 'edit') }).text)
      .toBe('a.org_id = $1 AND a.archived_at IS NULL AND FALSE')
    expect(where({ target: 'assets', alias: 'a', filter: MATCH_NONE, scope: MATCH_ALL }).text).toBe('a.org_id = $1 AND a.archived_at IS NULL AND FALSE')
  })

  it('leaves liveness and the organization to a storage of one organization\'s live assets (the typed projection), whose columns it reads', () => {
    const projection = projectionOf(ORG_ID, [{ key: 'cpu_count', kind: 'number', column: columnName('number', 'cpu_count') }])
    const storage = projectionStorage(projection)
    expect(where({ target: 'assets', alias: 'p', filter: resolveFilter(parseFilter({ field: 'properties.cpu_count', operator: 'not_equals', value: 8 }), 'assets', mm), scope: scopeFilter(IT, 'view'), storage })).toEqual({
      text: '(p."n_cpu_count" IS NULL OR p."n_cpu_count" <> $1) AND p."access_domain_key" = $2',
      values: [8, 'it'],
    })
    expect(where({ target: 'assets', alias: 'p', filter: MATCH_ALL, scope: scopeFilter(ALL, 'view'), storage })).toEqual({ text: 'TRUE', values: [] })
    // Relationships are not the projection's rows: their organization is always a condition.
    expect(where({ target: 'relationships', alias: 'r', filter: MATCH_ALL, scope: MATCH_ALL, storage }).text).toMatch(/^r\.org_id = \$1 AND /)
  })

  it('refuses an alias that is not a plain identifier', () => {
    expect(() => where({ target: 'assets', alias: 'a; DROP', filter: MATCH_ALL, scope: MATCH_ALL })).toThrow('not a table alias')
  })
})

describe('compileWhere over relationships', () => {
  const end = (e: string, column: string, scope = '') =>
    `EXISTS (SELECT 1 FROM (SELECT ${e}.* FROM assets ${e} WHERE ${e}.org_id = r.org_id AND ${e}.id = r.${column} OFFSET 0) ${e} WHERE ${e}.archived_at IS NULL${scope})`

  it('needs both ends live, whatever the scope', () => {
    expect(where({ target: 'relationships', alias: 'r', filter: MATCH_ALL, scope: scopeFilter(ALL, 'view') })).toEqual({
      text: `r.org_id = $1 AND ${end('vs', 'source_asset_id')} AND ${end('vt', 'target_asset_id')}`,
      values: [ORG_ID],
    })
  })

  it('applies the scope to each end, after the filter', () => {
    const id = '0190b3b0-0000-7000-8000-0000000000a1'
    expect(where({ target: 'relationships', alias: 'r', filter: columnCondition('relationships', 'id', id), scope: scopeFilter(IT, 'view') })).toEqual({
      text: `r.org_id = $1 AND r."id" = $2 AND ${end('vs', 'source_asset_id', ' AND vs."access_domain_key" = $3')} AND ${end('vt', 'target_asset_id', ' AND vt."access_domain_key" = $4')}`,
      values: [ORG_ID, id, 'it', 'it'],
    })
  })
})

describe('columnCondition', () => {
  it('names system columns only', () => {
    expect(() => columnCondition('relationships', 'properties.x', 'y')).toThrow('no column properties.x on relationships')
  })
})
