import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '../../src/core/config.js'
import type { Db } from '../../src/store/db.js'
import { openStore } from '../../src/open-store.js'
import { buildApp } from '../../src/app.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { STORES } from '../helpers/stores.js'
import { postgresSchema } from '../helpers/cli-server.js'
import { ACME } from '../helpers/fixtures.js'

/**
 * A database or role may set its sessions' output styles (`ALTER DATABASE … SET datestyle = 'SQL,
 * DMY'`, a TimeZone of its region, the pre-9.1 reading of backslashes in string literals, triggers
 * off with session_replication_role = replica, a lock_timeout): the service's answers do not change
 * with them, or are the retryable answers of the CONTRACT.
 */
describe.runIf(STORES.includes('postgres'))('postgres: session settings of the database or role', () => {
  let pg: Awaited<ReturnType<typeof postgresSchema>>
  let db: Db
  let app: FastifyInstance
  let key: string

  beforeAll(async () => {
    pg = await postgresSchema()
    // As the database or role would set them, here through the URL's startup options.
    const url = new URL(pg.url)
    url.searchParams.set('options', `${url.searchParams.get('options')} -c DateStyle=SQL,DMY -c TimeZone=Pacific/Kiritimati -c standard_conforming_strings=off -c session_replication_role=replica -c lock_timeout=200ms`)
    db = await openStore(loadConfig({ DATABASE_URL: url.href }))
    await applySetup(db, ACME as unknown as SetupFile)
    key = (await createKeyFromCli(db, { org: 'acme', user: 'owner@acme.test', name: 'styles', type: 'Admin', roles: ['all'] })).secret
    app = await buildApp({ db, config: loadConfig({}) })
  }, 60_000)
  afterAll(async () => {
    await app?.close()
    await db?.close()
    await pg?.drop()
  })

  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(payload ? { payload } : {}) })

  it('answers every timestamp as UTC ISO 8601 under a DateStyle of SQL, DMY and a TimeZone other than UTC', async () => {
    const session = (await db.query<{ style: string }>("SELECT current_setting('DateStyle') AS style")).rows[0]!
    expect(session.style).toBe('ISO, DMY')
    const created = await call('POST', '/api/v1/assets', { asset_type_key: 'server', name: 'styles-01', properties: { hostname: 'styles-01' } })
    expect(created.statusCode).toBe(201)
    const record = created.json().data
    expect(record.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(Math.abs(Date.parse(record.created_at) - Date.now())).toBeLessThan(60_000)
    expect(record.updated_at).toBe(record.created_at)
    // Read back one by one and in a list (whose timestamps are written in SQL): the same text.
    expect((await call('GET', `/api/v1/assets/${record.id}`)).json().data).toEqual(record)
    expect((await call('GET', '/api/v1/assets?filter[name]=styles-01')).json().data).toEqual([record])
    const keys = (await call('GET', '/api/v1/api-keys')).json().data as { created_at: string }[]
    expect(keys.map((k) => k.created_at).every((t) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(t))).toBe(true)
  })

  it('fires its triggers under session_replication_role = replica: a new asset is searched, counted and aggregated', async () => {
    const session = (await db.query<{ role: string }>("SELECT current_setting('session_replication_role') AS role")).rows[0]!
    expect(session.role).toBe('origin')
    const created = await call('POST', '/api/v1/assets', { asset_type_key: 'server', name: 'replica-role', properties: { hostname: 'replica-role', environment: 'prod' } })
    expect(created.statusCode).toBe(201)
    const found = await call('POST', '/api/v1/search/assets', { filter: { field: 'properties.hostname', operator: 'equals', value: 'replica-role' } })
    expect(found.json().data.map((a: { name: string }) => a.name)).toEqual(['replica-role'])
    const counted = (await call('GET', '/api/v1/assets?filter[asset_type_key]=server')).json().meta.page.total_items
    const stored = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE asset_type_key = 'server' AND archived_at IS NULL")).rows[0]!.n
    expect(counted).toBe(stored)
    const grouped = (await call('POST', '/api/v1/analytics/assets', { filter: { field: 'name', operator: 'equals', value: 'replica-role' }, group_by: ['properties.environment'] })).json().data
    expect(grouped).toEqual([{ group: { 'properties.environment': 'prod' }, measures: { count: 1 } }])
  })

  it('answers 503 with Retry-After, not 500, when the database\'s lock_timeout runs out behind another writer', async () => {
    const created = (await call('POST', '/api/v1/assets', { asset_type_key: 'server', name: 'locked-01', properties: { hostname: 'locked-01' } })).json().data
    // Another writer holds the row (a long transaction of another client of the database).
    const holder = await openStore(loadConfig({ DATABASE_URL: pg.url }))
    try {
      await holder.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM assets WHERE id = $1 FOR UPDATE', [created.id])
        const res = await call('PATCH', `/api/v1/assets/${created.id}`, { name: 'locked-02' })
        expect(res.statusCode, res.body).toBe(503)
        expect(res.headers['retry-after']).toBe('1')
        expect(res.json().errors[0]).toMatchObject({ code: 'service_unavailable', detail: 'a concurrent write held what this request needed for longer than the database lets it wait; retry it' })
      })
    } finally {
      await holder.close()
    }
    expect((await call('PATCH', `/api/v1/assets/${created.id}`, { name: 'locked-02' })).json().data.name).toBe('locked-02')
  })

  it('refuses to start on a database that takes no writes, saying so and naming it', async () => {
    const url = new URL(pg.url)
    url.searchParams.set('options', `${url.searchParams.get('options')} -c default_transaction_read_only=on`)
    await expect(openStore(loadConfig({ DATABASE_URL: url.href }))).rejects.toThrow(new RegExp(
      '^cannot use PostgreSQL at \\S+ \\(DATABASE_URL\\): cannot execute .* in a read-only transaction \\(the database is read-only: DATABASE_URL must name a primary'))
  })

  it('reads string literals as the SQL standard does: a search by part of a name (ILIKE … ESCAPE) answers', async () => {
    const session = (await db.query<{ on: string }>("SELECT current_setting('standard_conforming_strings') AS on")).rows[0]!
    expect(session.on).toBe('on')
    const found = await call('POST', '/api/v1/search/assets', { filter: { field: 'name', operator: 'contains', value: 'STYLES-0' } })
    expect(found.statusCode).toBe(200)
    expect(found.json().data.map((a: { name: string }) => a.name)).toEqual(['styles-01'])
  })
})
