import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import type { StoreKind } from '../../src/store/db.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { createTestStore, type TestStore } from './stores.js'
import { ACME } from './fixtures.js'
import { DATA_CHANGED_CHANNEL } from '../../src/counts/cache.js'

export interface Response<T = any> {
  status: number
  body: T
  headers: Record<string, string | string[] | number | undefined>
}

export interface TestApp {
  app: FastifyInstance
  store: TestStore
  orgId: string
  /** An Admin key of the Owner with role `all`. */
  adminKey: string
  request<T = any>(method: string, url: string, options?: { key?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<Response<T>>
  givenKey(spec: { user?: string; type: 'Viewer' | 'Editor' | 'Admin'; roles?: string[]; org?: string }): Promise<string>
  /**
   * Waits until the background work of the writes so far is done: the relay has stamped their
   * events and every notification of its rounds (which drop the count cache) has arrived.
   */
  settled(): Promise<void>
  close(): Promise<void>
}

/**
 * A store holding organization acme and an Admin key of it, for tests that build their own Db
 * and app over it (a statement timeout, a proxy in front of PostgreSQL).
 */
export async function createAcmeStore(kind: StoreKind, keyName: string): Promise<{ store: TestStore; key: string }> {
  const store = await createTestStore(kind)
  await applySetup(store.db, ACME as unknown as SetupFile)
  const key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: keyName, type: 'Admin', roles: ['all'] })).secret
  return { store, key }
}

/** A running app (not listening) over a fresh store seeded with `setup` (ACME by default). */
export async function createTestApp(kind: StoreKind, setup: unknown = ACME, configOverrides = {}): Promise<TestApp> {
  const store = await createTestStore(kind)
  const report = await applySetup(store.db, setup as SetupFile)
  const app = await buildApp({ db: store.db, config: loadConfig({}, configOverrides) })
  await app.ready()
  const orgKey = (setup as { organization: { key: string } }).organization.key
  const givenKey: TestApp['givenKey'] = async (spec) =>
    (
      await createKeyFromCli(store.db, {
        org: spec.org ?? orgKey,
        user: spec.user ?? 'owner@acme.test',
        name: `test ${spec.type}`,
        type: spec.type,
        roles: spec.roles ?? ['all'],
      })
    ).secret
  const adminKey = await givenKey({ type: 'Admin' })
  return {
    app,
    store,
    orgId: report.organization.id,
    adminKey,
    givenKey,
    async request(method, url, options = {}) {
      const key = options.key === undefined ? adminKey : options.key
      const res = await app.inject({
        method: method as 'GET',
        url,
        headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(options.headers ?? {}) },
        ...(options.body !== undefined ? { payload: options.body as object } : {}),
      })
      const text = res.body
      const body = text === '' ? null : JSON.parse(text)
      return { status: res.statusCode, body: withoutRequestIds(body, res.headers['x-request-id']), headers: res.headers }
    },
    async settled() {
      // Queued behind the relay's own round: once it resolves, every round so far has stamped
      // its events and sent its notifications (waiting for "no unstamped events" is not enough:
      // a round's notification could still be on its way). A sentinel sent after them, heard
      // here, comes after them.
      await app.events.flush()
      const sentinel = `sentinel-${Math.random()}`
      let hear = () => {}
      const heard = new Promise<void>((resolve) => { hear = resolve })
      await store.db.listen(DATA_CHANGED_CHANNEL, (payload) => { if (payload === sentinel) hear() })
      // Sent by SQL on PostgreSQL (Db.notify would also hand it to this process's handlers at once).
      if (store.db.kind === 'postgres') await store.db.query('SELECT pg_notify($1, $2)', [DATA_CHANGED_CHANNEL, sentinel])
      else await store.db.notify(DATA_CHANGED_CHANNEL, sentinel)
      await heard
    },
    async close() {
      await app.close()
      await store.drop()
    },
  }
}

/** Shorthand for the error body's first entry. */
export function firstError(body: { errors: { code: string; detail: string; status: string }[] }) {
  return body.errors[0]
}

/**
 * Every error carries the request id in `meta.request_id` (CONTRACT §17). Checked here for every
 * error any suite receives — it must be the id of the response's X-Request-Id header — then left
 * out, so that feature suites compare the rest of the body whole (test/ops/request-id.test.ts
 * compares whole bodies with it).
 */
export function withoutRequestIds(body: any, requestId: unknown): any {
  if (body === null || typeof body !== 'object' || !Array.isArray(body.errors)) return body
  if (typeof requestId !== 'string' || requestId === '') throw new Error('an error response without an X-Request-Id header')
  return {
    ...body,
    errors: body.errors.map((entry: { meta?: Record<string, unknown> }) => {
      if (entry.meta?.request_id !== requestId) throw new Error(`error meta.request_id ${String(entry.meta?.request_id)} is not the response's X-Request-Id ${requestId}`)
      const { request_id: _, ...meta } = entry.meta
      const { meta: __, ...rest } = entry
      return Object.keys(meta).length > 0 ? { ...rest, meta } : rest
    }),
  }
}

/** n `note` assets created by one bulk (names `prefix-0` …), their ids in item order. */
export async function createNoteAssets(t: TestApp, prefix: string, n: number): Promise<string[]> {
  const items = Array.from({ length: n }, (_, i) => ({ asset_type_key: 'note', name: `${prefix}-${i}` }))
  const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
  if (res.status !== 201) throw new Error(`POST /bulk/assets: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.map((d: { id: string }) => d.id)
}

/**
 * Every event of the feed after `cursor` (from the oldest kept when null), following `next_cursor`
 * to the end, 1,000 at a time; `query` is appended to each page's URL, `key` reads as that key.
 */
export async function readFeed(t: TestApp, cursor: string | null, query = '', key?: string): Promise<{ events: any[]; cursor: string }> {
  const events: any[] = []
  for (;;) {
    const after = cursor === null ? '' : `after=${cursor}&`
    const res = await t.request('GET', `/api/v1/events?${after}page[size]=1000${query}`, key ? { key } : {})
    if (res.status !== 200) throw new Error(`GET /events: ${res.status} ${JSON.stringify(res.body)}`)
    events.push(...res.body.data)
    cursor = res.body.meta.next_cursor
    if (!res.body.meta.has_more) return { events, cursor: cursor! }
  }
}
