import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** A sum beyond a 64-bit float is a clear 422, never a silent `null`. */
for (const store of STORES) {
  describe(`${store}: analytics overflow`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      const res = await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          { asset_type_key: 'server', name: 'big1', properties: { hostname: 'big1', memory_gb: 1.7e308, environment: 'prod', cost: 1 } },
          { asset_type_key: 'server', name: 'big2', properties: { hostname: 'big2', memory_gb: 1.7e308, environment: 'prod', cost: 2 } },
          { asset_type_key: 'server', name: 'small', properties: { hostname: 'small', memory_gb: 1, environment: 'dev', cost: 3 } },
        ],
      })
      expect(res.status).toBe(201)
    })
    afterAll(async () => t.close())

    it('answers 422 with a pointer to the measure whose sum overflows', async () => {
      for (const body of [
        { measures: [{ type: 'count' }, { type: 'sum', field: 'properties.memory_gb' }] },
        { measures: [{ type: 'count' }, { type: 'sum', field: 'properties.memory_gb', as: 'mem' }], group_by: ['properties.environment'] },
        { measures: [{ type: 'count' }, { type: 'sum', field: 'properties.memory_gb' }], breakdown_by: 'properties.environment' },
      ]) {
        const res = await t.request('POST', '/api/v1/analytics/assets', { body })
        expect(res.status, JSON.stringify(body)).toBe(422)
        expect(res.body.errors).toHaveLength(1)
        expect(res.body.errors[0]).toMatchObject({ status: '422', code: 'validation_failed', source: { pointer: '/measures/1' } })
        expect(res.body.errors[0].detail).toMatch(/^the sum "(sum:properties\.memory_gb|mem)" is out of range: it does not fit a 64-bit float/)
      }
    })

    it('still sums what fits', async () => {
      const res = await t.request('POST', '/api/v1/analytics/assets', {
        body: { measures: [{ type: 'sum', field: 'properties.memory_gb' }, { type: 'sum', field: 'properties.cost' }], filter: { field: 'name', operator: 'equals', value: 'small' } },
      })
      expect(res.status).toBe(200)
      expect(res.body.data).toEqual([{ group: {}, measures: { 'sum:properties.memory_gb': 1, 'sum:properties.cost': 3 } }])
      const one = await t.request('POST', '/api/v1/analytics/assets', {
        body: { measures: [{ type: 'sum', field: 'properties.memory_gb' }], filter: { field: 'name', operator: 'in', value: ['big1', 'small'] } },
      })
      expect(one.status).toBe(200)
      expect(one.body.data[0].measures['sum:properties.memory_gb']).toBe(1.7e308)
    })

    it('answers an average whose sum would not fit: computed exactly, it lies between its values', async () => {
      const res = await t.request('POST', '/api/v1/analytics/assets', {
        body: { measures: [{ type: 'average', field: 'properties.memory_gb' }], group_by: ['properties.environment'] },
      })
      expect(res.status).toBe(200)
      expect(res.body.data).toEqual([
        { group: { 'properties.environment': 'dev' }, measures: { 'average:properties.memory_gb': 1 } },
        { group: { 'properties.environment': 'prod' }, measures: { 'average:properties.memory_gb': 1.7e308 } },
      ])
    })
  })
}
