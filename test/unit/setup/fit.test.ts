import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compilePropertiesValidator } from '../../../src/metamodel/validate.js'
import { countLiveNotFitting } from '../../../src/setup/guards.js'
import type { PropertySpec } from '../../../src/setup/types.js'
import { createTestStore, STORES, type TestStore } from '../../helpers/stores.js'
import { apply, givenAsset } from './helpers.js'

function def(type: PropertySpec['type'], extra: Partial<PropertySpec> = {}): PropertySpec {
  return { key: 'v', name: 'v', description: null, type, required: false, options: null, currency: null, min: null, max: null, ...extra }
}

/** [definition, values that fit, values that do not]. */
const CASES: [string, PropertySpec, unknown[], unknown[]][] = [
  ['text', def('text'), ['x', ''], [1, true, [], {}]],
  ['rich_text', def('rich_text'), ['<b>x</b>'], [false]],
  ['url', def('url'), ['https://example.com/a?b=1', 'mailto:a@b.test', 'HTTPS://EXAMPLE.COM/%C3%A4', 'http://[::1]:8080/x', 'urn:isbn:0451450523', 'a:b'],
    // An outside audit's values: the former SQL test (a scheme, then no white space) took them, the API did not.
    ['example.com', 'http://a b', 3, 'http://[::1', 'x:%zz', 'http://exa%mple', 'http://ex.com/ä', '']],
  ['unique_key', def('unique_key'), ['web-01', 'a.b_c~d'], ['', 'a b', 'a:b', 'a/b', 'a#b', "a'b", 'a\\b', 'a*b', 'a\u00a0b', 'a\ufeffb', 'a\u0085b', 'x'.repeat(501), 5]],
  ['number', def('number', { min: -1, max: 10 }), [0, -1, 10, 2.5], [11, -1.5, '3', true]],
  ['currency', def('currency', { currency: 'EUR' }), [0, 1e9, -3.25], ['1.00', []]],
  ['integer', def('integer', { min: 1 }), [1, 3, 1e6], [0, 2.5, '3']],
  ['percentage', def('percentage'), [0, 55.5, 100], [-1, 100.5, '5']],
  ['score', def('score', { min: 0, max: 5 }), [0, 5], [6, -1, 2.5, '2']],
  ['date', def('date'), ['2024-02-29', '2026-12-31', '2000-02-29'], ['2026-02-29', '1900-02-29', '0000-01-01', '0000-02-29', '2026-13-01', '2026-04-31', '2026-00-10', '2026-1-01', '2026-01-01T00:00:00Z', 20260101]],
  ['boolean', def('boolean'), [true, false], ['true', 0]],
  ['select', def('select', { options: ['a', 'b'] }), ['a', 'b'], ['c', ['a'], 1]],
  ['multi_select', def('multi_select', { options: ['a', 'b'] }), [[], ['a'], ['b', 'a']], [['a', 'a'], ['c'], 'a', [1], {}]],
]

const validity = (p: PropertySpec) => {
  const validate = compilePropertiesValidator({
    key: 't', name: 't', description: null, unique_property_key: null,
    properties: [{ ...p, asset_type_key: 't' }],
  })
  return (value: unknown) => validate({ v: value }, '').length === 0
}

for (const kind of STORES) {
  describe(`${kind}: stored values checked in SQL against a property definition`, () => {
    let store: TestStore
    let orgId: string
    beforeAll(async () => {
      store = await createTestStore(kind)
      const report = await apply(store.db, { organization: { key: 'fit' }, metamodel: { asset_types: [{ key: 't' }] } })
      orgId = report.organization.id
    })
    afterAll(async () => {
      await store.drop()
    })

    async function fits(p: PropertySpec, value: unknown): Promise<boolean> {
      const id = await givenAsset(store.db, orgId, 't', { v: value })
      const bad = await countLiveNotFitting(store.db, orgId, 't', p)
      await store.db.query('DELETE FROM assets WHERE org_id = $1 AND id = $2', [orgId, id])
      return bad === 0
    }

    it.each(CASES)('%s: accepts what fits and counts what does not, as the API validates', async (type, p, good, bad) => {
      const api = validity(p)
      for (const value of good) {
        expect({ type, value, fits: await fits(p, value) }).toEqual({ type, value, fits: true })
        expect({ type, value, api: api(value) }).toEqual({ type, value, api: true })
      }
      for (const value of bad) {
        expect({ type, value, fits: await fits(p, value) }).toEqual({ type, value, fits: false })
        expect({ type, value, api: api(value) }).toEqual({ type, value, api: false })
      }
    })

    it('ignores missing values, JSON null and archived assets', async () => {
      await givenAsset(store.db, orgId, 't', {})
      await givenAsset(store.db, orgId, 't', { v: null })
      await givenAsset(store.db, orgId, 't', { v: 'not a number' }, { archived: true })
      expect(await countLiveNotFitting(store.db, orgId, 't', def('number'))).toBe(0)
    })
  })
}
