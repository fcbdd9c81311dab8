import { describe, expect, it } from 'vitest'
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import { buildSerializer, forSerializer } from '../../src/core/serializer.js'
import { assetResponses } from '../../src/assets/schemas.js'

describe('response serializers', () => {
  it('turn free-form objects into any-value schemas, leaving declared objects and the route schema alone', () => {
    const schema = {
      type: 'object',
      required: ['data'],
      properties: {
        data: { type: 'object', additionalProperties: true, description: 'free' },
        meta: { type: 'object', additionalProperties: true, properties: { n: { type: 'integer' } } },
        tags: { type: 'array', items: { type: 'object', additionalProperties: true } },
        kind: { type: 'string', enum: ['a', 'b'] },
      },
    }
    const copy = structuredClone(schema)
    expect(forSerializer(schema)).toEqual({
      type: 'object',
      required: ['data'],
      properties: {
        data: { description: 'free' },
        meta: { type: 'object', additionalProperties: true, properties: { n: { type: 'integer' } } },
        tags: { type: 'array', items: {} },
        kind: { type: 'string', enum: ['a', 'b'] },
      },
    })
    expect(schema).toEqual(copy)
  })

  it('write an asset list exactly as the default serializer does, and as JSON.stringify would', () => {
    const asset = (i: number) => ({
      id: `0190f3a0-0000-7000-8000-00000000000${i}`, asset_type_key: 'server', name: `srv "${i}"\n`, access_domain_key: i % 2 ? null : 'it',
      properties: { hostname: `h-${i}`, tags: ['pci', 'dmz'], cost: { amount: 12.5, currency: 'EUR' }, notes: 'a\u2028b "q" \\', cpu_count: i, nested: { deep: [1, { x: null }] } },
      created_at: '2026-01-31T09:15:00Z', updated_at: '2026-01-31T09:15:00Z',
    })
    const body = { data: [asset(1), asset(2), asset(3)], meta: { page: { number: 1, size: 100, total_items: 3, total_pages: 1, total_items_exact: true } }, links: { self: '/api/v1/assets' } }
    const route = { method: 'GET', url: '/api/v1/assets', httpStatus: '200', schema: assetResponses.list }
    const ours = buildSerializer({}, {})(route)(body)
    const theirs = SerializerSelector()({}, {})(route)(body)
    expect(ours).toBe(theirs)
    expect(JSON.parse(ours)).toEqual(body)
  })

  it('are built once per distinct schema: routes and statuses answering an equal schema share one', () => {
    const build = buildSerializer({}, {})
    const error = () => ({ type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' } } } } })
    const first = build({ method: 'GET', url: '/a', httpStatus: '404', schema: error() })
    expect(build({ method: 'POST', url: '/b', httpStatus: '422', schema: error() })).toBe(first)
    const other = build({ method: 'GET', url: '/a', httpStatus: '200', schema: { type: 'object', properties: { data: { type: 'string' } } } })
    expect(other).not.toBe(first)
    expect(first({ error: { code: 'not_found', extra: 1 } })).toBe('{"error":{"code":"not_found"}}')
    expect(other({ data: 'x', error: 1 })).toBe('{"data":"x"}')
  })
})
