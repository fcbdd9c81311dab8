import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES, type TestStore } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { eventually, startReceiver, verify, type Receiver } from '../helpers/webhook-receiver.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { newId } from '../../src/core/time.js'
import { enqueueDeliveries } from '../../src/webhooks/enqueue.js'
import { insertWebhook } from '../../src/webhooks/sql.js'
import { newWebhookSecret } from '../../src/webhooks/signing.js'
import { parseRetryAfter } from '../../src/webhooks/worker.js'
import type { CloudEvent } from '../../src/outbox/cloud-event.js'

/** A stamped event as the relay hands it to its onStamped hooks. */
function cloudEvent(type: string, sequence: number, subject = `assets/${newId()}`): CloudEvent {
  return {
    specversion: '1.0', id: newId(), type, source: '/organizations/acme', subject, time: '2026-11-23T10:00:00Z',
    datacontenttype: 'application/json', sequence: String(sequence), requestid: 'req-1',
    data: { object: { id: subject.split('/')[1], name: 'web-01' }, actor: { api_key_id: null, user_id: null } },
  }
}

/** A second app (another "process") on the same store; on PostgreSQL with its own connection pool. */
async function secondApp(store: TestStore, overrides: object): Promise<{ app: FastifyInstance; db: Db }> {
  const db = store.schema ? await openDb({ databaseUrl: process.env.TEST_DATABASE_URL, schema: store.schema, poolSize: 5 }) : store.db
  const app = await buildApp({ db, config: loadConfig({}, overrides) })
  await app.ready()
  return { app, db }
}

for (const store of STORES) {
  describe(`${store}: webhook delivery`, () => {
    let t: TestApp
    let receiver: Receiver

    beforeAll(async () => {
      t = await createTestApp(store, undefined, { webhookAllowPrivate: true, webhookPollMs: 50, webhookRetrySchedule: [0, 0], webhookTimeoutMs: 5000 })
      receiver = await startReceiver()
      // Events of the set-up (its keys) are stamped now, before any webhook exists to receive them.
      await t.app.events.flush()
    })
    afterAll(async () => {
      await t.close()
      await receiver.close()
    })

    const create = async (body: object) => {
      const res = await t.request('POST', '/api/v1/webhooks', { body })
      expect(res.status).toBe(201)
      return res.body.data as { id: string; secret: string; url: string }
    }
    const deliveries = async (id: string) => (await t.request('GET', `/api/v1/webhooks/${id}/deliveries?page[size]=100`)).body.data
    const settled = (id: string, n = 1) => eventually(async () => {
      const list = await deliveries(id)
      return list.length >= n && list.every((d: { status: string }) => d.status !== 'pending') ? list : null
    }, 60_000)

    it('queues one delivery per matching enabled webhook in one statement, and sends the exact event JSON', async () => {
      const assets = await create({ url: `${receiver.url}/assets`, event_types: ['asset.*'] })
      const all = await create({ url: `${receiver.url}/all`, event_types: ['*'] })
      const created = await create({ url: `${receiver.url}/created`, event_types: ['relationship.created', 'asset.created'] })
      const off = await create({ url: `${receiver.url}/off`, event_types: ['*'], enabled: false })
      const events = [cloudEvent('asset.created', 1), cloudEvent('asset.updated', 2), cloudEvent('relationship.deleted', 3, `relationships/${newId()}`)]
      const before = receiver.received.length
      let statements = 0
      const queued = await t.store.db.transaction((tx) => enqueueDeliveries({
        query: (sql, params) => {
          if (sql.includes('INSERT INTO webhook_deliveries')) statements++
          return tx.query(sql, params)
        },
      } as typeof tx, events.map((event) => ({ orgId: t.orgId, event }))))
      expect(statements).toBe(1)
      expect(queued).toBe(2 + 3 + 1)
      // Not again: an event reaches a webhook once.
      expect(await t.store.db.transaction((tx) => enqueueDeliveries(tx, events.map((event) => ({ orgId: t.orgId, event }))))).toBe(0)
      await t.app.webhooks.notify()
      const got = (await receiver.waitFor(before + 6)).slice(before)
      const types = (secret: string) => got.flatMap((r) => {
        try {
          return [(verify(secret, r) as CloudEvent).type]
        } catch {
          return []
        }
      }).sort()
      expect(types(assets.secret)).toEqual(['asset.created', 'asset.updated'])
      expect(types(all.secret)).toEqual(['asset.created', 'asset.updated', 'relationship.deleted'])
      expect(types(created.secret)).toEqual(['asset.created'])
      expect(types(off.secret)).toEqual([])
      for (const r of got) {
        const event = events.find((e) => e.id === r.headers['webhook-id'])!
        expect(r.body).toBe(JSON.stringify(event))
      }
      expect((await settled(assets.id, 2)).map((d: { event_type: string; status: string }) => [d.event_type, d.status]).sort())
        .toEqual([['asset.created', 'succeeded'], ['asset.updated', 'succeeded']])
      expect(await deliveries(off.id)).toEqual([])
    })

    it('delivers asset.created of a real write, signed, with the event as the feed has it', async () => {
      const hook = await create({ url: `${receiver.url}?assets`, event_types: ['asset.created'] })
      const before = receiver.received.length
      const res = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'server', name: 'hook-web-01', properties: { hostname: 'hook-web-01' } }, headers: { 'x-request-id': 'hook-create-1' },
      })
      expect(res.status).toBe(201)
      const mine = await eventually(async () => receiver.received.slice(before).find((r) => verifies(hook.secret, r)), 30_000)
      const event = verify(hook.secret, mine) as CloudEvent
      expect(event).toMatchObject({
        specversion: '1.0', type: 'asset.created', source: '/organizations/acme', subject: `assets/${res.body.data.id}`,
        datacontenttype: 'application/json', sequence: expect.stringMatching(/^\d+$/), requestid: 'hook-create-1',
        data: { object: { id: res.body.data.id, name: 'hook-web-01' } },
      })
      expect(mine.headers['webhook-id']).toBe(event.id)
      const feed = (await t.request('GET', '/api/v1/events?filter[type]=asset.created&page[size]=1000')).body.data as CloudEvent[]
      expect(feed.find((e) => e.id === event.id)).toEqual(event)
      // The same members in the same order in the feed (written by the store) and in the webhook body.
      expect(Object.keys(feed.find((e) => e.id === event.id)!)).toEqual(Object.keys(event))
      expect((await settled(hook.id))[0]).toMatchObject({ event_id: event.id, event_type: 'asset.created', status: 'succeeded' })
    })

    it('retries after the schedule and then fails, recording status code and reason', async () => {
      const hook = await create({ url: `${receiver.url}?fail`, event_types: ['api_key.deleted'] })
      receiver.respond = (r, res) => {
        if (r.headers['webhook-id'] && verifies(hook.secret, r)) { res.statusCode = 500; return res.end('boom') }
        res.statusCode = 204
        res.end()
      }
      const ping = (await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data
      const [d] = await settled(hook.id)
      expect(d).toEqual({
        ...ping, status: 'failed', attempts: 3, last_attempt_at: expect.any(String), last_status_code: 500,
        last_error: 'the receiver answered 500', next_attempt_at: null,
      })
      expect(receiver.received.filter((r) => r.headers['webhook-id'] === ping.event_id)).toHaveLength(3)
    })

    /** Runs `use` with a second app as the only sender of deliveries (the main app's is stopped meanwhile). */
    const withSoleSender = async (overrides: object, use: (app: FastifyInstance) => Promise<void>): Promise<void> => {
      const second = await secondApp(t.store, { webhookAllowPrivate: true, ...overrides })
      await t.app.webhooks.stop()
      try {
        await use(second.app)
      } finally {
        await second.app.close()
        if (second.db !== t.store.db) await second.db.close()
        await t.app.webhooks.start()
      }
    }
    /** The first two attempts at delivering event `eventId`, and the time between them. */
    const firstTwoAttempts = async (eventId: string, timeoutMs: number) => {
      const attempts = await eventually(async () => {
        const got = receiver.received.filter((r) => r.headers['webhook-id'] === eventId)
        return got.length >= 2 ? got : null
      }, timeoutMs)
      return { attempts, gap: attempts[1]!.at - attempts[0]!.at }
    }

    it('honours Retry-After (seconds) over the schedule', async () => {
      await withSoleSender({ webhookPollMs: 50, webhookRetrySchedule: [3600] }, async (app) => {
        const hook = await create({ url: `${receiver.url}?retry-after`, event_types: ['api_key.deleted'] })
        let calls = 0
        receiver.respond = (r, res) => {
          if (verifies(hook.secret, r) && ++calls === 1) {
            res.statusCode = 503
            res.setHeader('Retry-After', '1')
            return res.end()
          }
          res.statusCode = 200
          res.end('ok')
        }
        const ping = (await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data
        await app.webhooks.notify()
        const { attempts, gap } = await firstTwoAttempts(ping.event_id, 10_000)
        expect(gap).toBeGreaterThanOrEqual(900)
        expect(gap).toBeLessThan(5000)
        const [d] = await settled(hook.id)
        expect(d).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 200, last_error: null })
        // The second attempt had a timestamp of its own, and the same webhook-id.
        expect(attempts[0]!.headers['webhook-id']).toBe(attempts[1]!.headers['webhook-id'])
      })
    })

    it('sends a retry when it is due (the schedule ±10 %), not at the next poll', async () => {
      // Polls 3 s apart and a 4 s retry: claimed at the poll it came 6 s after the first attempt.
      await withSoleSender({ webhookPollMs: 3000, webhookRetrySchedule: [4] }, async (app) => {
        const hook = await create({ url: `${receiver.url}?due`, event_types: ['api_key.deleted'] })
        let calls = 0
        receiver.respond = (r, res) => {
          res.statusCode = verifies(hook.secret, r) && ++calls === 1 ? 500 : 204
          res.end()
        }
        const ping = (await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data
        await app.webhooks.notify()
        const { gap } = await firstTwoAttempts(ping.event_id, 15_000)
        expect(gap).toBeGreaterThanOrEqual(3600)
        expect(gap).toBeLessThan(5000)
      })
    })

    it('keeps the delivery log as long as the events: retention deletes old finished deliveries, never pending ones', async () => {
      const hook = await create({ url: `${receiver.url}?retention`, event_types: ['api_key.deleted'] })
      receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
      const pings: string[] = []
      for (let i = 0; i < 3; i++) pings.push((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data.id)
      await settled(hook.id, 3)
      // The first two are older than the retention (90 days by default); one of them pending again.
      await t.store.db.query(`UPDATE webhook_deliveries SET created_at = now() - interval '100 days' WHERE id = ANY($1::uuid[])`, [pings.slice(0, 2)])
      await t.store.db.query(`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now() + interval '1 day' WHERE id = $1`, [pings[1]])
      await t.app.events.purgeNow()
      const kept = await deliveries(hook.id)
      expect(kept.map((d: { id: string }) => d.id).sort()).toEqual([pings[1], pings[2]].sort())
      expect(kept.find((d: { id: string }) => d.id === pings[1])).toMatchObject({ status: 'pending' })
    })

    it('disables the webhook when the receiver answers 410 Gone; a disabled webhook gets a test, nothing else', async () => {
      const hook = await create({ url: `${receiver.url}?gone`, event_types: ['api_key.deleted'] })
      const sent = () => receiver.received.filter((r) => r.url.endsWith('?gone')).length
      receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
      // A real delivery first (succeeded), to retry once the webhook is disabled.
      await t.store.db.transaction((tx) => enqueueDeliveries(tx, [{ orgId: t.orgId, event: cloudEvent('api_key.deleted', 8) }]))
      await t.app.webhooks.notify()
      const [real] = await settled(hook.id)
      expect(real).toMatchObject({ event_type: 'api_key.deleted', status: 'succeeded', attempts: 1 })
      receiver.respond = (r, res) => {
        res.statusCode = verifies(hook.secret, r) ? 410 : 204
        res.end()
      }
      const ping = (await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data
      const gone = (await settled(hook.id, 2)).find((d: { id: string }) => d.id === ping.id)
      expect(gone).toEqual({
        ...ping, status: 'failed', attempts: 1, last_attempt_at: expect.any(String), last_status_code: 410,
        last_error: 'the receiver answered 410 Gone: the webhook is disabled', next_attempt_at: null,
      })
      expect((await t.request('GET', `/api/v1/webhooks/${hook.id}`)).body.data.enabled).toBe(false)
      // A disabled webhook gets no new events, and a queued delivery is not sent.
      await t.store.db.transaction((tx) => enqueueDeliveries(tx, [{ orgId: t.orgId, event: cloudEvent('api_key.deleted', 9) }]))
      expect(await deliveries(hook.id)).toHaveLength(2)
      const before = sent()
      expect(before).toBe(2)
      expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/${real.id}/retry`)).status).toBe(202)
      const retried = await eventually(async () => {
        const d = (await deliveries(hook.id)).find((x: { id: string }) => x.id === real.id)
        return d.status === 'failed' ? d : null
      }, 60_000)
      expect(retried).toMatchObject({ status: 'failed', attempts: 1, last_error: 'the webhook is disabled' })
      expect(sent()).toBe(before)
      // A test is sent all the same: an Admin checks the receiver before enabling the webhook again.
      receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
      const check = (await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data
      const checked = (await settled(hook.id, 3)).find((d: { id: string }) => d.id === check.id)
      expect(checked).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 204 })
      expect(sent()).toBe(before + 1)
      expect((await t.request('GET', `/api/v1/webhooks/${hook.id}`)).body.data.enabled).toBe(false)
    })

    it('gives up on a receiver that does not answer within the timeout', async () => {
      const slow = await secondApp(t.store, { webhookAllowPrivate: true, webhookPollMs: 50, webhookRetrySchedule: [0], webhookTimeoutMs: 500 })
      await t.app.webhooks.stop()
      try {
        const hook = await create({ url: `${receiver.url}?slow`, event_types: ['api_key.deleted'] })
        receiver.respond = (r, res) => {
          if (verifies(hook.secret, r)) return void setTimeout(() => { res.statusCode = 204; res.end() }, 3000)
          res.statusCode = 204
          res.end()
        }
        await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)
        await slow.app.webhooks.notify()
        const [d] = await settled(hook.id)
        expect(d).toMatchObject({ status: 'failed', attempts: 2, last_status_code: null, last_error: 'no answer within 0.5 s' })
      } finally {
        receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
        await slow.app.close()
        if (slow.db !== t.store.db) await slow.db.close()
        await t.app.webhooks.start()
      }
    })

    it('refuses at connect time a host name that resolves to a loopback address (DNS rebinding), unless allowed', async () => {
      // Saved while it passed the check (e.g. it resolved to a public address then): written directly.
      const strict = await secondApp(t.store, { webhookPollMs: 50, webhookRetrySchedule: [0, 0] })
      await t.app.webhooks.stop()
      try {
        const port = receiver.port
        const ids: Record<string, string> = {}
        for (const [name, url] of [['named', `http://localhost:${port}/hook`], ['literal', `http://127.0.0.1:${port}/hook`]] as const) {
          ids[name] = newId()
          await insertWebhook(t.store.db, t.orgId, { id: ids[name]!, url: url!, description: null, event_types: ['api_key.deleted'], enabled: true, secret: newWebhookSecret(), viewer: { userId: newId(), roleKeys: [] } }, 100)
        }
        const before = receiver.received.length
        for (const id of Object.values(ids)) expect((await t.request('POST', `/api/v1/webhooks/${id}/test`)).status).toBe(202)
        await strict.app.webhooks.notify()
        const [named] = await settled(ids.named!)
        expect(named).toMatchObject({ status: 'failed', attempts: 1, last_status_code: null })
        expect(named.last_error).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), which is in a loopback range; webhooks may only reach public addresses/)
        const [literal] = await settled(ids.literal!)
        expect(literal).toMatchObject({ status: 'failed', attempts: 1, last_status_code: null })
        expect(literal.last_error).toMatch(/^the address 127\.0\.0\.1 is in a loopback range/)
        expect(receiver.received.length).toBe(before)
      } finally {
        await strict.app.close()
        if (strict.db !== t.store.db) await strict.db.close()
        await t.app.webhooks.start()
      }
      // The app with KBIS_WEBHOOK_ALLOW_PRIVATE=true sends to the same host name.
      const allowed = await create({ url: `http://localhost:${receiver.port}/hook`, event_types: ['api_key.deleted'] })
      await t.request('POST', `/api/v1/webhooks/${allowed.id}/test`)
      expect((await settled(allowed.id))[0]).toMatchObject({ status: 'succeeded', last_status_code: 204 })
    })

    it('shares deliveries between two app instances on one store without sending one twice', async () => {
      const other = await secondApp(t.store, { webhookAllowPrivate: true, webhookPollMs: 20, webhookRetrySchedule: [0, 0], webhookConcurrency: 8 })
      try {
        // Only this webhook takes the events below.
        await t.store.db.query('UPDATE webhooks SET enabled = false WHERE org_id = $1', [t.orgId])
        const hook = await create({ url: `${receiver.url}?shared`, event_types: ['relationship.created'] })
        receiver.respond = (_r, res) => setTimeout(() => { res.statusCode = 204; res.end() }, 2)
        const events = Array.from({ length: 400 }, (_, i) => cloudEvent('relationship.created', 100 + i, `relationships/${newId()}`))
        const before = receiver.received.length
        await t.store.db.transaction((tx) => enqueueDeliveries(tx, events.map((event) => ({ orgId: t.orgId, event }))))
        await t.app.webhooks.notify()
        other.app.webhooks.wake()
        const started = Date.now()
        await receiver.waitFor(before + 400, 60_000)
        const states = await eventually(async () => {
          const rows = (await t.store.db.query<{ status: string; attempts: number; n: number }>(
            'SELECT status, attempts, count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 GROUP BY 1, 2', [hook.id])).rows
          return rows.length === 1 && rows[0]!.status === 'succeeded' ? rows : null
        }, 60_000)
        expect(states).toEqual([{ status: 'succeeded', attempts: 1, n: 400 }])
        expect(Date.now() - started).toBeLessThan(60_000)
        await new Promise((r) => setTimeout(r, 300))
        const ids = receiver.received.slice(before).filter((r) => r.url === '/hook?shared').map((r) => String(r.headers['webhook-id']))
        expect(ids).toHaveLength(400)
        expect(new Set(ids).size).toBe(400)
      } finally {
        receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
        await other.app.close()
        if (other.db !== t.store.db) await other.db.close()
      }
    }, 120_000)

    it('lets webhooks take turns: one whose receiver hangs does not keep another\'s delivery behind its backlog', async () => {
      const sender = await secondApp(t.store, { webhookAllowPrivate: true, webhookPollMs: 50, webhookRetrySchedule: [], webhookTimeoutMs: 1000, webhookConcurrency: 4 })
      await t.app.webhooks.stop()
      let hog: { id: string } | null = null
      try {
        await t.store.db.query('UPDATE webhooks SET enabled = false WHERE org_id = $1', [t.orgId])
        hog = await create({ url: `${receiver.url}?hog`, event_types: ['relationship.created'] })
        await create({ url: `${receiver.url}?fair`, event_types: ['relationship.deleted'] })
        // The hog's receiver never answers: each of its deliveries holds a slot for the whole 1 s timeout.
        receiver.respond = (r, res) => {
          if (r.url.endsWith('?hog')) return
          res.statusCode = 204
          res.end()
        }
        const backlog = Array.from({ length: 40 }, (_, i) => cloudEvent('relationship.created', 1000 + i, `relationships/${newId()}`))
        await t.store.db.transaction((tx) => enqueueDeliveries(tx, backlog.map((event) => ({ orgId: t.orgId, event }))))
        await sender.app.webhooks.notify()
        await eventually(async () => (receiver.received.filter((r) => r.url.endsWith('?hog')).length >= 4 ? true : null), 10_000)
        // Every slot is busy with the hog; 36 of its deliveries are due before this one.
        const queued = Date.now()
        await t.store.db.transaction((tx) => enqueueDeliveries(tx, [{ orgId: t.orgId, event: cloudEvent('relationship.deleted', 2000, `relationships/${newId()}`) }]))
        await sender.app.webhooks.notify()
        const fair = await eventually(async () => receiver.received.find((r) => r.url.endsWith('?fair') && r.at >= queued) ?? null, 30_000)
        // One timeout for a slot to come free (and a poll), not the ten the backlog before it takes.
        expect(fair.at - queued).toBeLessThan(4_000)
        expect(receiver.received.filter((r) => r.url.endsWith('?hog') && r.at <= fair.at).length).toBeLessThan(16)
      } finally {
        receiver.respond = (_r, res) => { res.statusCode = 204; res.end() }
        await sender.app.close()
        if (sender.db !== t.store.db) await sender.db.close()
        if (hog) await t.store.db.query('DELETE FROM webhook_deliveries WHERE webhook_id = $1', [hog.id])
        await t.app.webhooks.start()
      }
    }, 60_000)
  })
}

function verifies(secret: string, r: Parameters<typeof verify>[1]): boolean {
  try {
    verify(secret, r)
    return true
  } catch {
    return false
  }
}

describe('Retry-After', () => {
  it('reads delay-seconds and HTTP dates', () => {
    const now = Date.parse('2026-11-23T10:00:00Z')
    expect(parseRetryAfter('120', now)).toBe(120)
    expect(parseRetryAfter('Mon, 23 Nov 2026 10:00:30 GMT', now)).toBe(30)
    expect(parseRetryAfter('Mon, 23 Nov 2026 09:00:00 GMT', now)).toBe(0)
    expect(parseRetryAfter('Monday, 23-Nov-26 10:00:30 GMT', now)).toBe(30)
    expect(parseRetryAfter('Mon Nov 23 10:00:30 2026', now)).toBe(30)
    expect(parseRetryAfter('soon', now)).toBeNull()
    // Neither delay-seconds nor a date (Date.parse reads each as a date long past: retried at once).
    for (const odd of ['1.5', '-5', '-0', '+3', '3abc', '2026-11-23']) expect(parseRetryAfter(odd, now), odd).toBeNull()
    expect(parseRetryAfter(' 2 ', now)).toBe(2)
    expect(parseRetryAfter(undefined, now)).toBeNull()
    expect(parseRetryAfter('99999999', now)).toBe(7 * 86400)
  })
})
