import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@electric-sql/pglite'
import { hasLevel, levelOn, scopeCondition } from '../../../src/access/scope.js'
import { LEVELS, type Grant, type Level } from '../../../src/core/auth/levels.js'
import type { AuthContext } from '../../../src/core/auth/context.js'
import type { KeyPermission } from '../../../src/core/auth/permissions.js'
import { Params } from '../../../src/store/sql.js'

function auth(grants: Grant[], permission: KeyPermission = 'Editor'): AuthContext {
  return {
    orgId: 'o', orgKey: 'acme', keyId: 'k', userId: 'u', keyPermission: permission, ownerPermission: permission, permission,
    roleKeys: [], grants, rateLimit: { requests: 1, windowSeconds: 1 },
  }
}

const grant = (access_domain_key: string | null, asset_type_keys: string[], level: Level): Grant => ({ access_domain_key, asset_type_keys, level })
const IT_EDITOR = [grant('it', ['*'], 'delete'), grant('finance', ['server'], 'view')]

describe('scopeCondition', () => {
  const sql = (a: AuthContext, level: Level) => {
    const params = new Params(['org'])
    return { text: scopeCondition(a, 'a', level, params), values: params.values.slice(1) }
  }

  it('is TRUE when one grant covers every domain and type at the level', () => {
    expect(sql(auth([grant('*', ['*'], 'edit')]), 'edit')).toEqual({ text: 'TRUE', values: [] })
  })

  it('is FALSE without grants, and for a Viewer key at any level above view', () => {
    expect(sql(auth([]), 'view')).toEqual({ text: 'FALSE', values: [] })
    expect(sql(auth([grant('*', ['*'], 'edit_access_domain')], 'Viewer'), 'edit')).toEqual({ text: 'FALSE', values: [] })
    expect(sql(auth([grant('*', ['*'], 'edit_access_domain')], 'Viewer'), 'view')).toEqual({ text: 'TRUE', values: [] })
  })

  it('ORs the grants that reach the level, with values only as parameters', () => {
    expect(sql(auth(IT_EDITOR), 'view')).toEqual({
      text: '(a."access_domain_key" = $2 OR (a."access_domain_key" = $3 AND a."asset_type_key" = ANY($4::text[])))',
      values: ['it', 'finance', ['server']],
    })
    expect(sql(auth(IT_EDITOR), 'edit')).toEqual({ text: 'a."access_domain_key" = $2', values: ['it'] })
    expect(sql(auth(IT_EDITOR), 'edit_access_domain')).toEqual({ text: 'FALSE', values: [] })
  })

  it('reads a null domain as "assets without a domain" and "*" as every domain and none', () => {
    expect(sql(auth([grant(null, ['note'], 'edit')]), 'view')).toEqual({
      text: `((a."access_domain_key" IS NULL OR a."access_domain_key" = '') AND a."asset_type_key" = ANY($2::text[]))`,
      values: [['note']],
    })
    expect(sql(auth([grant('*', ['note'], 'view')]), 'view')).toEqual({ text: 'a."asset_type_key" = ANY($2::text[])', values: [['note']] })
  })
})

describe('levelOn and hasLevel', () => {
  const server = (domain: string | null) => ({ access_domain_key: domain, asset_type_key: 'server' })

  it('gives the highest level of the matching grants', () => {
    const a = auth([grant('it', ['*'], 'view'), grant('it', ['server'], 'delete'), grant('*', ['server'], 'edit')])
    expect(levelOn(a, server('it'))).toBe('delete')
    expect(levelOn(a, server('finance'))).toBe('edit')
    expect(levelOn(a, { access_domain_key: 'it', asset_type_key: 'note' })).toBe('view')
  })

  it('hides an asset that no grant matches', () => {
    expect(levelOn(auth(IT_EDITOR), { access_domain_key: 'finance', asset_type_key: 'note' })).toBeNull()
    expect(levelOn(auth(IT_EDITOR), server(null))).toBeNull()
    expect(hasLevel(auth(IT_EDITOR), server(null), 'view')).toBe(false)
  })

  it('matches null-domain grants only to assets without a domain, "*" to all', () => {
    expect(levelOn(auth([grant(null, ['*'], 'edit')]), server(null))).toBe('edit')
    expect(levelOn(auth([grant(null, ['*'], 'edit')]), server('it'))).toBeNull()
    expect(levelOn(auth([grant('*', ['*'], 'edit')]), server(null))).toBe('edit')
  })

  it('caps a Viewer key at view whatever its roles grant', () => {
    const viewer = auth([grant('*', ['*'], 'edit_access_domain')], 'Viewer')
    expect(levelOn(viewer, server('it'))).toBe('view')
    expect(hasLevel(viewer, server('it'), 'edit')).toBe(false)
  })

  it('orders the levels view < edit < delete < edit_access_domain', () => {
    const a = auth([grant('it', ['*'], 'delete')])
    expect(LEVELS.map((level) => hasLevel(a, server('it'), level))).toEqual([true, true, true, false])
  })
})

/** Runs scopeCondition for real and compares it with levelOn on every kind of asset. */
describe('scopeCondition agrees with levelOn on PGlite', () => {
  let db: PGlite
  const domains = ['it', 'finance', null]
  const types = ['server', 'note']
  const assets = domains.flatMap((d) => types.map((t) => ({ access_domain_key: d, asset_type_key: t })))

  beforeAll(async () => {
    db = new PGlite()
    await db.exec('CREATE TABLE assets (n int, asset_type_key text, access_domain_key text)')
    for (const [n, a] of assets.entries()) {
      await db.query('INSERT INTO assets VALUES ($1, $2, $3)', [n, a.asset_type_key, a.access_domain_key])
    }
  })
  afterAll(async () => db.close())

  const grantSets: Grant[][] = [
    [],
    IT_EDITOR,
    [grant(null, ['*'], 'delete'), grant('finance', ['note'], 'edit')],
    [grant('*', ['server'], 'view'), grant('it', ['note'], 'edit_access_domain')],
    [grant('*', ['*'], 'edit_access_domain')],
  ]

  for (const [i, grants] of grantSets.entries()) {
    for (const permission of ['Viewer', 'Editor'] as const) {
      it(`grant set ${i}, ${permission} key, every level`, async () => {
        const a = auth(grants, permission)
        for (const level of LEVELS) {
          const params = new Params()
          const where = scopeCondition(a, 'a', level, params)
          const rows = (await db.query<{ n: number }>(`SELECT n FROM assets a WHERE ${where} ORDER BY n`, params.values as unknown[])).rows
          const expected = assets.flatMap((asset, n) => (hasLevel(a, asset, level) ? [n] : []))
          expect(rows.map((r) => r.n), level).toEqual(expected)
        }
      })
    }
  }
})
