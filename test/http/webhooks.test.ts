import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES } from '../helpers/stores.js'
import { createTestApp, withoutRequestIds, type Response, type TestApp } from '../helpers/app.js'
import { eventually, startReceiver, verify, type Receiver } from '../helpers/webhook-receiver.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const invalid = (detail: string | RegExp, pointer: string) => ({
  status: '422', code: 'validation_failed', detail: typeof detail === 'string' ? detail : expect.stringMatching(detail), source: { pointer },
})

for (const store of STORES) {
  describe(`${store}: webhooks (CONTRACT §14)`, () => {
    let t: TestApp
    let strict: FastifyInstance
    let receiver: Receiver
    let editorKey: string
    let viewerKey: string

    beforeAll(async () => {
      // This app may reach the local receiver; `strict` (same store) applies the SSRF guard.
      t = await createTestApp(store, undefined, { webhookAllowPrivate: true, webhookPollMs: 50, webhookRetrySchedule: [0] })
      strict = await buildApp({ db: t.store.db, config: loadConfig({}) })
      await strict.ready()
      // Only `t` sends: `strict`'s sender would refuse the local receiver (tested in webhook-delivery.test.ts).
      await strict.webhooks.stop()
      receiver = await startReceiver()
      editorKey = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      viewerKey = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
    })
    // The webhooks made only to be checked (hooks.example.com, a public address, localhost:9) go
    // with their test: the events of the next tests would be delivered to them, and a lookup or a
    // connection this machine cannot make would hold each sender's slot, and the close, for up to
    // the webhook timeout (15 s).
    afterEach(async () => {
      const hooks = (await t.request('GET', '/api/v1/webhooks?page[size]=100')).body.data as { id: string; url: string }[]
      for (const hook of hooks.filter((h) => !h.url.startsWith(receiver.url))) {
        expect((await t.request('DELETE', `/api/v1/webhooks/${hook.id}`)).status).toBe(204)
      }
    })
    afterAll(async () => {
      await strict.close()
      await t.close()
      await receiver.close()
    })

    const create = (body: object, key?: string) => t.request('POST', '/api/v1/webhooks', { body, ...(key ? { key } : {}) })
    const strictRequest = async (method: 'POST' | 'PATCH', url: string, body: object): Promise<Response> => {
      const res = await strict.inject({ method, url, headers: { authorization: `Bearer ${t.adminKey}` }, payload: body })
      return { status: res.statusCode, body: withoutRequestIds(JSON.parse(res.body), res.headers['x-request-id']), headers: res.headers }
    }
    const deliveries = async (id: string, query = '') => (await t.request('GET', `/api/v1/webhooks/${id}/deliveries${query}`)).body

    it('creates a webhook and shows its secret once, in the 201 only', async () => {
      const res = await create({ url: 'https://hooks.example.com/kbis', description: 'CMDB sync', event_types: ['asset.*', 'relationship.created'] })
      expect(res.status).toBe(201)
      const { secret, ...record } = res.body.data
      expect(record).toEqual({
        id: expect.stringMatching(UUID), url: 'https://hooks.example.com/kbis', description: 'CMDB sync',
        event_types: ['asset.*', 'relationship.created'], enabled: true,
        created_at: expect.stringMatching(TIMESTAMP), updated_at: record.created_at,
      })
      expect(secret).toMatch(SECRET)
      expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32)
      // Where it lives, as every create says (the OpenAPI documents the header).
      expect(res.headers.location).toBe(`/api/v1/webhooks/${record.id}`)
      expect(await t.request('GET', `/api/v1/webhooks/${record.id}`)).toMatchObject({ status: 200, body: { data: record } })
      const list = await t.request('GET', '/api/v1/webhooks?page[size]=100')
      expect(list.status).toBe(200)
      expect(list.body.data).toContainEqual(record)
      expect(JSON.stringify(list.body)).not.toContain(secret)
    })

    it('lets only Admin keys manage webhooks (403 forbidden for Editor and Viewer)', async () => {
      const { id } = (await create({ url: 'https://hooks.example.com/a', event_types: ['*'] })).body.data
      const calls: [string, string, object?][] = [
        ['GET', '/api/v1/webhooks'], ['POST', '/api/v1/webhooks', { url: 'https://hooks.example.com/b', event_types: ['*'] }],
        ['GET', `/api/v1/webhooks/${id}`], ['PATCH', `/api/v1/webhooks/${id}`, { enabled: false }], ['DELETE', `/api/v1/webhooks/${id}`],
        ['POST', `/api/v1/webhooks/${id}/rotate-secret`], ['GET', `/api/v1/webhooks/${id}/deliveries`],
        ['POST', `/api/v1/webhooks/${id}/deliveries/${id}/retry`], ['POST', `/api/v1/webhooks/${id}/test`],
      ]
      for (const key of [editorKey, viewerKey]) {
        const permission = key === editorKey ? 'Editor' : 'Viewer'
        for (const [method, url, body] of calls) {
          const res = await t.request(method, url, { key, ...(body ? { body } : {}) })
          expect({ method, url, status: res.status, body: res.body }).toEqual({
            method, url, status: 403,
            body: { errors: [{ status: '403', code: 'forbidden', detail: `this requires the Admin permission; the key acts as ${permission}` }] },
          })
        }
      }
      expect((await t.request('GET', `/api/v1/webhooks/${id}`)).body.data.enabled).toBe(true)
    })

    it('validates event types and patterns, with a pointer to each unknown one', async () => {
      for (const event_types of [['*'], ['asset.*', 'api_key.*'], ['relationship.deleted', 'api_key.updated']]) {
        expect((await create({ url: 'https://hooks.example.com/p', event_types })).status).toBe(201)
      }
      const res = await create({ url: 'https://hooks.example.com/p', event_types: ['asset.created', 'asset.exploded', 'assets.*', 'webhook.test'] })
      expect(res.status).toBe(422)
      expect(res.body.errors).toEqual([
        invalid(/^unknown event type or pattern "asset.exploded"; use one of \*, asset\.\*, relationship\.\*, api_key\.\*, asset\.created/, '/event_types/1'),
        invalid(/^unknown event type or pattern "assets.\*"/, '/event_types/2'),
        invalid(/^unknown event type or pattern "webhook.test"/, '/event_types/3'),
      ])
      expect((await create({ url: 'https://hooks.example.com/p', event_types: [] })).status).toBe(422)
      const repeated = await create({ url: 'https://hooks.example.com/p', event_types: ['asset.created', '*', 'asset.created'] })
      expect(repeated.status).toBe(422)
      expect(repeated.body.errors).toEqual([invalid('event_types must not list the same value twice (entries 0 and 2 are equal)', '/event_types/2')])
      expect((await create({ url: 'https://hooks.example.com/p' })).status).toBe(422)
      expect((await create({ url: 'https://hooks.example.com/p', event_types: ['*'], secret: 'mine' })).status).toBe(400)
    })

    it('accepts http and https URLs only', async () => {
      for (const [url, detail] of [
        ['ftp://hooks.example.com/x', 'url must use http or https, not ftp'],
        ['hooks.example.com/x', 'url must be an absolute http or https URL'],
        ['https://user:pw@hooks.example.com/x', 'url must not contain credentials (user:password@)'],
        // What the URL parser would repair into some host's URL, stored as sent.
        ...['http:///hooks.example.com/x', 'https:hooks.example.com/x', 'https:\\\\hooks.example.com\\x', ' https://hooks.example.com/x', 'https://hooks.example.com/a b']
          .map((written) => [written, 'url must be written in full, http://host/… or https://host/…, without blanks'] as const),
        // Read otherwise than written, so deliveries would go elsewhere than the URL shown back.
        ['https://hooks.example.com/a\\b', 'url must not hold a backslash before its query: a URL parser reads it as / (write / if that is meant)'],
        ['https://hooks.example.com:8443\\..\\x', 'url must not hold a backslash before its query: a URL parser reads it as / (write / if that is meant)'],
        ['https://hooks.ex%61mple.com/x', 'the host of url must be written without percent-encoding'],
        ['https://hooks.example.com:0/x', 'url must not name port 0: give a port from 1 to 65535, or none for the scheme\'s own'],
        ['https://.hooks.example.com/x', 'the host of url, .hooks.example.com, has an empty label'],
        ['https://hooks..example.com/x', 'the host of url, hooks..example.com, has an empty label'],
      ] as const) {
        const res = await create({ url, event_types: ['*'] })
        expect({ url, status: res.status, body: res.body }).toEqual({ url, status: 422, body: { errors: [invalid(detail, '/url')] } })
      }
      expect((await create({ url: 'HTTPS://hooks.example.com/x?a=1#f', event_types: ['*'] })).status).toBe(201)
      // A backslash or a % in the query or the path's own percent-encoding is sent as written.
      expect((await create({ url: 'https://hooks.example.com/a%20b?q=c\\d&p=%41', event_types: ['*'] })).status).toBe(201)
    })

    it('refuses loopback, private, link-local and unique-local addresses, literal or resolved (SSRF)', async () => {
      for (const [url, range] of [
        ['http://127.0.0.1:8080/hook', 'loopback'], ['http://10.1.2.3/hook', 'private'], ['http://192.168.0.10/hook', 'private'],
        ['http://169.254.169.254/latest/meta-data', 'link-local'], ['http://[::1]/hook', 'loopback'], ['http://[fd00::1]/hook', 'unique-local'],
        ['http://100.64.0.1/', 'carrier-grade NAT'], ['http://[2001:db8::1]/hook', 'reserved'], ['http://[64:ff9b::808:808]/hook', 'RFC 6052 translation'],
        ['http://[::ffff:127.0.0.1]/hook', 'loopback'], ['http://0.0.0.0/hook', 'unspecified'], ['http://2130706433/hook', 'loopback'],
        // IPv4-compatible (deprecated) and other IPv6 outside global unicast 2000::/3.
        ['http://[::127.0.0.1]/hook', 'reserved'], ['http://[::8.8.8.8]/hook', 'reserved'], ['http://[fe00::1]/hook', 'reserved'],
      ] as const) {
        const res = await strictRequest('POST', '/api/v1/webhooks', { url, event_types: ['*'] })
        expect({ url, status: res.status, body: res.body }).toEqual({
          url, status: 422, body: { errors: [invalid(new RegExp(`is in a ${range} range; webhooks may only reach public addresses \\(KBIS_WEBHOOK_ALLOW_PRIVATE=true allows it\\)$`), '/url')] },
        })
      }
      const named = await strictRequest('POST', '/api/v1/webhooks', { url: 'http://localhost:9/hook', event_types: ['*'] })
      expect(named.status).toBe(422)
      const loopbackName = (host: string) => `${host} is a loopback name (localhost and the names under it); webhooks may only reach public addresses (KBIS_WEBHOOK_ALLOW_PRIVATE=true allows it)`
      expect(named.body.errors).toEqual([invalid(loopbackName('localhost'), '/url')])
      // Names under localhost are loopback without asking a resolver (which may not know them, or answer late).
      for (const host of ['app.localhost', 'LOCALHOST.', 'a.b.Localhost']) {
        const res = await strictRequest('POST', '/api/v1/webhooks', { url: `http://${host}:9/hook`, event_types: ['*'] })
        expect(res.status, host).toBe(422)
        expect(res.body.errors, host).toEqual([invalid(loopbackName(host.toLowerCase()), '/url')])
      }
      // A public literal address passes; a PATCH to a refused one does not.
      const ok = await strictRequest('POST', '/api/v1/webhooks', { url: 'https://93.184.215.14/hook', event_types: ['*'] })
      expect(ok.status).toBe(201)
      const patched = await strictRequest('PATCH', `/api/v1/webhooks/${ok.body.data.id}`, { url: 'http://127.0.0.1/hook' })
      expect(patched.status).toBe(422)
      expect(patched.body.errors[0].source).toEqual({ pointer: '/url' })
      // With KBIS_WEBHOOK_ALLOW_PRIVATE=true (the app `t`), the same addresses are accepted.
      expect((await create({ url: 'http://localhost:9/hook', event_types: ['*'] })).status).toBe(201)
      expect((await create({ url: 'http://127.0.0.1:9/hook', event_types: ['*'] })).status).toBe(201)
    })

    it('changes url, description, event types and enabled with PATCH, and deletes', async () => {
      const created = (await create({ url: 'https://hooks.example.com/c', event_types: ['*'] })).body.data
      await new Promise((r) => setTimeout(r, 1100))
      const res = await t.request('PATCH', `/api/v1/webhooks/${created.id}`, {
        body: { url: 'https://hooks.example.com/d', description: 'renamed', event_types: ['api_key.*'], enabled: false },
      })
      expect(res.status).toBe(200)
      const { secret: _, ...before } = created
      expect(res.body.data).toEqual({
        ...before, url: 'https://hooks.example.com/d', description: 'renamed', event_types: ['api_key.*'], enabled: false,
        updated_at: expect.stringMatching(TIMESTAMP),
      })
      expect(res.body.data.updated_at > created.updated_at).toBe(true)
      const bad = await t.request('PATCH', `/api/v1/webhooks/${created.id}`, { body: { event_types: ['nope'] } })
      expect(bad.body).toEqual({ errors: [invalid(/^unknown event type or pattern "nope"/, '/event_types/0')] })
      expect((await t.request('DELETE', `/api/v1/webhooks/${created.id}`)).status).toBe(204)
      for (const [method, url] of [['GET', created.id], ['PATCH', created.id], ['DELETE', created.id], ['GET', 'not-a-uuid']] as const) {
        const gone = await t.request(method, `/api/v1/webhooks/${url}`, method === 'PATCH' ? { body: { enabled: true } } : {})
        expect(gone).toMatchObject({ status: 404, body: { errors: [{ status: '404', code: 'not_found', detail: `webhook ${url} not found` }] } })
      }
    })

    it('answers a test of a webhook deleted while the test is under way 404, not 500', async () => {
      for (let round = 0; round < 3; round++) {
        const created = (await create({ url: 'https://hooks.example.com/gone', event_types: ['*'] })).body.data
        // The DELETE is sent the moment the test has read the webhook, before it queues its delivery.
        let deleted: Promise<unknown> | null = null
        t.store.db.onQuery = (sql) => {
          if (deleted === null && /FROM webhooks/.test(sql) && !sql.includes('webhook_deliveries')) {
            deleted = t.request('DELETE', `/api/v1/webhooks/${created.id}`)
          }
        }
        try {
          const res = await t.request('POST', `/api/v1/webhooks/${created.id}/test`)
          // Queued before the DELETE (on PostgreSQL the two may run in either order: 202), or not
          // found: before its delivery is queued, or its delivery gone with the webhook just after.
          if (res.status !== 202) {
            expect(res.status, JSON.stringify(res.body)).toBe(404)
            expect(res.body.errors[0]).toMatchObject({ code: 'not_found', detail: expect.stringMatching(/ not found$/) })
          }
        } finally {
          t.store.db.onQuery = null
        }
        expect(await deleted).toMatchObject({ status: 204 })
      }
    })

    it('sends a webhook.test event to that webhook only, signed per Standard Webhooks', async () => {
      const { secret, ...hook } = (await create({ url: receiver.url, description: 'test target', event_types: ['asset.created'] })).body.data
      const other = (await create({ url: `${receiver.url}?other`, event_types: ['*'] })).body.data
      const before = receiver.received.length
      const res = await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { headers: { 'x-request-id': 'test-ping-1' } })
      expect(res.status).toBe(202)
      expect(res.body.data).toEqual({
        id: expect.stringMatching(UUID), event_id: expect.stringMatching(UUID), event_type: 'webhook.test', status: expect.stringMatching(/^pending$/),
        attempts: 0, last_attempt_at: null, last_status_code: null, last_error: null, next_attempt_at: expect.stringMatching(TIMESTAMP),
      })
      const [got] = (await receiver.waitFor(before + 1)).slice(before)
      expect(got!.headers['content-type']).toBe('application/json')
      expect(got!.headers['webhook-id']).toBe(res.body.data.event_id)
      expect(Number(got!.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -1)
      expect(got!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
      const event = verify(secret, got!)
      expect(event).toEqual({
        specversion: '1.0', id: res.body.data.event_id, type: 'webhook.test', source: '/organizations/acme', subject: `webhooks/${hook.id}`,
        time: expect.stringMatching(TIMESTAMP), datacontenttype: 'application/json', requestid: 'test-ping-1',
        data: { object: hook, actor: { api_key_id: expect.stringMatching(UUID), user_id: expect.stringMatching(UUID) } },
      })
      expect(() => verify(other.secret, got!)).toThrow()
      const log = await eventually(async () => {
        const body = await deliveries(hook.id)
        return body.data[0]?.status === 'succeeded' ? body : null
      })
      expect(log.data).toEqual([{
        ...res.body.data, status: 'succeeded', attempts: 1, last_attempt_at: expect.stringMatching(TIMESTAMP),
        last_status_code: 204, last_error: null, next_attempt_at: null,
      }])
      // Only the tested webhook got it.
      await new Promise((r) => setTimeout(r, 200))
      expect(receiver.received.slice(before)).toHaveLength(1)
      expect((await deliveries(other.id)).data).toEqual([])
    })

    it('rotates the secret: for 24 hours both secrets sign, space-separated', async () => {
      const created = (await create({ url: receiver.url, event_types: ['*'] })).body.data
      const rotated = await t.request('POST', `/api/v1/webhooks/${created.id}/rotate-secret`)
      expect(rotated.status).toBe(200)
      const { secret: _, ...record } = created
      expect(rotated.body.data).toEqual({ ...record, updated_at: expect.stringMatching(TIMESTAMP), secret: expect.stringMatching(SECRET) })
      expect(rotated.body.data.secret).not.toBe(created.secret)
      const before = receiver.received.length
      expect((await t.request('POST', `/api/v1/webhooks/${created.id}/test`)).status).toBe(202)
      const [got] = (await receiver.waitFor(before + 1)).slice(before)
      expect(String(got!.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/)
      expect(verify(rotated.body.data.secret, got!).type).toBe('webhook.test')
      expect(verify(created.secret, got!).type).toBe('webhook.test')
      const stranger = (await create({ url: receiver.url, event_types: ['*'] })).body.data.secret
      expect(() => verify(stranger, got!)).toThrow()
      // After the overlap only the new secret signs.
      await t.store.db.query(`UPDATE webhooks SET previous_secret_until = now() - interval '1 second' WHERE id = $1`, [created.id])
      expect((await t.request('POST', `/api/v1/webhooks/${created.id}/test`)).status).toBe(202)
      const [later] = (await receiver.waitFor(before + 2)).slice(before + 1)
      expect(String(later!.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
      expect(verify(rotated.body.data.secret, later!).type).toBe('webhook.test')
      expect(() => verify(created.secret, later!)).toThrow()
    })

    it('lists deliveries newest first with pages, and queues one again with retry (same webhook-id)', async () => {
      const hook = (await create({ url: receiver.url, event_types: ['asset.created'] })).body.data
      const sent: string[] = []
      for (let i = 0; i < 3; i++) sent.push((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).body.data.id)
      await eventually(async () => (await deliveries(hook.id)).data.every((d: { status: string }) => d.status === 'succeeded'))
      const page1 = await deliveries(hook.id, '?page[size]=2')
      expect(page1.data.map((d: { id: string }) => d.id)).toEqual([sent[2], sent[1]])
      expect(page1.meta).toEqual({ page: { number: 1, size: 2, total_items: 3, total_items_exact: true, total_pages: 2 } })
      expect(page1.links.next).toMatch(/\/api\/v1\/webhooks\/.*\/deliveries\?page\[size\]=2&page\[number\]=2$|page\[number\]=2&page\[size\]=2$/)
      const page2 = await deliveries(hook.id, '?page[number]=2&page[size]=2')
      expect(page2.data.map((d: { id: string }) => d.id)).toEqual([sent[0]])

      const first = page2.data[0]
      const before = receiver.received.length
      const retried = await t.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/${first.id}/retry`)
      expect(retried.status).toBe(202)
      expect(retried.body.data).toMatchObject({ id: first.id, event_id: first.event_id, status: 'pending', attempts: 1 })
      const [again] = (await receiver.waitFor(before + 1)).slice(before)
      expect(again!.headers['webhook-id']).toBe(first.event_id)
      expect(verify(hook.secret, again!).id).toBe(first.event_id)
      await eventually(async () => (await deliveries(hook.id)).data.find((d: { id: string; attempts: number }) => d.id === first.id && d.attempts === 2))

      const unknown = await t.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/${hook.id}/retry`)
      expect(unknown).toMatchObject({ status: 404, body: { errors: [{ code: 'not_found', detail: `delivery ${hook.id} of webhook ${hook.id} not found` }] } })
      expect((await t.request('GET', `/api/v1/webhooks/${sent[0]}/deliveries`)).status).toBe(404)
      expect((await t.request('POST', `/api/v1/webhooks/${sent[0]}/test`)).status).toBe(404)
    })

    it('delivers only the events that the roles of the key that set its URL see, as the feed does', async () => {
      // it_editor: everything in it, finance servers only; notes in finance and assets without a domain are hidden.
      const narrow = await t.givenKey({ user: 'owner@acme.test', type: 'Admin', roles: ['it_editor'] })
      const types = ['asset.created', 'relationship.created', 'api_key.created']
      const hook = (await create({ url: `${receiver.url}?narrow`, event_types: types }, narrow)).body.data
      const wide = (await create({ url: `${receiver.url}?wide`, event_types: types })).body.data
      const asset = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string
      const sIt = await asset({ asset_type_key: 'server', name: 'wh-s-it', access_domain_key: 'it', properties: { hostname: 'wh-s-it' } })
      const sFin = await asset({ asset_type_key: 'server', name: 'wh-s-fin', access_domain_key: 'finance', properties: { hostname: 'wh-s-fin' } })
      const nFin = await asset({ asset_type_key: 'note', name: 'wh-n-fin', access_domain_key: 'finance', properties: { body: 'payroll' } })
      const nNone = await asset({ asset_type_key: 'note', name: 'wh-n-none', properties: { body: 'nobody' } })
      const relationship = async (target: string) => (await t.request('POST', '/api/v1/relationships', {
        body: { relationship_type_key: 'depends_on', source_asset_id: sIt, target_asset_id: target },
      })).body.data.id as string
      const seen = await relationship(sFin)
      const hidden = await relationship(nFin)
      const key = (await t.request('POST', '/api/v1/api-keys', { body: { name: 'wh-scope', permission_type: 'Viewer', role_keys: ['all'] } })).body.data.id as string
      const all = [`assets/${sIt}`, `assets/${sFin}`, `assets/${nFin}`, `assets/${nNone}`, `relationships/${seen}`, `relationships/${hidden}`, `api-keys/${key}`]
      // What a webhook's receiver got of `subjects`, once every delivery queued to it succeeded.
      const received = async (id: string, tag: string, subjects: string[]) => eventually(async () => {
        const queued = (await deliveries(id, '?page[size]=100')).data as { status: string }[]
        if (!queued.every((d) => d.status === 'succeeded')) return null
        return receiver.received.filter((r) => r.url === `/hook?${tag}`).map((r) => JSON.parse(r.body).subject as string).filter((s) => subjects.includes(s)).sort()
      })
      // Both webhooks' deliveries are queued in one statement: once the wide one has all seven,
      // the narrow one has all it will get.
      await eventually(async () => (await received(wide.id, 'wide', all)).length === all.length)
      expect(await received(hook.id, 'narrow', all)).toEqual([`assets/${sIt}`, `assets/${sFin}`, `relationships/${seen}`, `api-keys/${key}`].sort())

      // A PATCH that sets the URL gives the webhook the sight of the key that sent it.
      expect((await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { body: { url: `${receiver.url}?narrow` } })).status).toBe(200)
      const later = await asset({ asset_type_key: 'note', name: 'wh-n-fin-2', access_domain_key: 'finance', properties: { body: 'payroll' } })
      await eventually(async () => (await received(hook.id, 'narrow', [`assets/${later}`])).length === 1)
    })

    it('sends a move out of a domain its roles do not see without the values from before it, signed as sent', async () => {
      const narrow = await t.givenKey({ user: 'owner@acme.test', type: 'Admin', roles: ['it_editor'] })
      const hook = (await create({ url: `${receiver.url}?moves`, event_types: ['asset.updated'] }, narrow)).body.data
      const a = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'wh-fin-secret', access_domain_key: 'finance', properties: { body: 'wh-fin-body' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: 'it', name: 'wh-now-it' } })
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'wh-later' } })
      // And out of no access domain, which it_editor does not see either.
      const b = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'wh-nodomain-secret', properties: { body: 'wh-nodomain-body' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${b.id}`, { body: { access_domain_key: 'it', name: 'wh-nodomain-now-it' } })
      const got = await eventually(async () => {
        const hits = receiver.received.filter((r) => r.url === '/hook?moves')
        return hits.length >= 3 ? hits : null
      })
      const events = (got.map((r) => verify(hook.secret, r)) as { sequence: string; subject: string; data: { changes: unknown; object: { name: string } } }[])
        .sort((x, y) => Number(x.sequence) - Number(y.sequence))
      expect(events.map((e) => [e.subject, e.data.changes, e.data.object.name])).toEqual([
        [`assets/${a.id}`, { access_domain_key: { to: 'it' }, name: { to: 'wh-now-it' } }, 'wh-now-it'],
        [`assets/${a.id}`, { name: { from: 'wh-now-it', to: 'wh-later' } }, 'wh-later'],
        [`assets/${b.id}`, { access_domain_key: { to: 'it' }, name: { to: 'wh-nodomain-now-it' } }, 'wh-nodomain-now-it'],
      ])
      expect(got.map((r) => r.body).join('')).not.toMatch(/wh-fin-secret|wh-nodomain-secret/)
    })

    it('never sends a delivery queued under an earlier URL to a new one whose roles do not see its event', async () => {
      const narrow = await t.givenKey({ user: 'owner@acme.test', type: 'Admin', roles: ['it_editor'] })
      const hook = (await create({ url: `${receiver.url}?before`, event_types: ['asset.created'] })).body.data
      const asset = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string
      const hidden = await asset({ asset_type_key: 'note', name: 'wh-move-fin', access_domain_key: 'finance', properties: { body: 'salaries' } })
      const seen = await asset({ asset_type_key: 'server', name: 'wh-move-it', access_domain_key: 'it', properties: { hostname: 'wh-move-it' } })
      const log = async () => eventually(async () => {
        const data = (await deliveries(hook.id, '?page[size]=100')).data as { id: string; status: string; event_id: string; last_error: string | null }[]
        return data.length >= 2 && data.every((d) => d.status !== 'pending') ? data : null
      })
      const eventOf = async (subject: string) => (await t.request('GET', `/api/v1/events?filter[subject]=${subject}`)).body.data[0].id as string
      const [hiddenEvent, seenEvent] = [await eventOf(`assets/${hidden}`), await eventOf(`assets/${seen}`)]
      const sent = await log()
      const [hiddenDelivery, seenDelivery] = [sent.find((d) => d.event_id === hiddenEvent)!, sent.find((d) => d.event_id === seenEvent)!]
      expect([hiddenDelivery.status, seenDelivery.status]).toEqual(['succeeded', 'succeeded'])

      // The narrow Admin points the webhook at its own URL, then asks for both deliveries again.
      expect((await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { key: narrow, body: { url: `${receiver.url}?after` } })).status).toBe(200)
      for (const d of [hiddenDelivery, seenDelivery]) {
        expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key: narrow })).status).toBe(202)
      }
      const after = await eventually(async () => {
        const data = (await deliveries(hook.id, '?page[size]=100')).data as { id: string; status: string; attempts: number; last_error: string | null }[]
        const [h, s] = [data.find((d) => d.id === hiddenDelivery.id)!, data.find((d) => d.id === seenDelivery.id)!]
        return h.status !== 'pending' && s.status === 'succeeded' && s.attempts === 2 ? { h, s } : null
      })
      expect(after.h).toMatchObject({ status: 'failed', attempts: 1, last_error: "not sent: the roles of the key that set the webhook's URL do not see this event" })
      const atNewUrl = receiver.received.filter((r) => r.url === '/hook?after').map((r) => JSON.parse(r.body).id as string)
      expect(atNewUrl).toEqual([seenEvent])
    })

    it('documents every webhook route in the OpenAPI document', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      expect(Object.keys(doc.paths).filter((p) => p.startsWith('/api/v1/webhooks')).sort()).toEqual([
        '/api/v1/webhooks', '/api/v1/webhooks/{id}', '/api/v1/webhooks/{id}/deliveries',
        '/api/v1/webhooks/{id}/deliveries/{delivery_id}/retry', '/api/v1/webhooks/{id}/rotate-secret', '/api/v1/webhooks/{id}/test',
      ])
      // 409: a request with the same Idempotency-Key still running (CONTRACT §16).
      // 431 and 500: what any operation may answer (CONTRACT §1).
      expect(Object.keys(doc.paths['/api/v1/webhooks'].post.responses).sort()).toEqual(['201', '400', '401', '403', '409', '413', '422', '429', '431', '500', '503'])
    })
  })
}

for (const store of STORES) {
  describe(`${store}: webhooks per organization`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())
    const create = (path: string) => t.request('POST', '/api/v1/webhooks', { body: { url: `https://hooks.example.com/${path}`, event_types: ['*'] } })

    it('takes 25 webhooks, refuses a 26th with 422 and writes nothing, and takes one again after a delete', async () => {
      const ids: string[] = []
      for (let n = 1; n <= 25; n++) {
        const res = await create(String(n))
        expect(res.status, `webhook ${n}`).toBe(201)
        ids.push(res.body.data.id)
      }
      const over = await create('26')
      expect([over.status, over.body.errors]).toEqual([422, [{ status: '422', code: 'validation_failed', detail: 'an organization has at most 25 webhooks; delete one to add another', source: { pointer: '' } }]])
      expect((await t.request('GET', '/api/v1/webhooks?page[size]=100')).body.meta.page.total_items).toBe(25)
      expect((await t.request('DELETE', `/api/v1/webhooks/${ids[0]}`)).status).toBe(204)
      expect((await create('27')).status).toBe(201)
    })

    it('counts creates that arrive at once against the same 25: ten at 20 make 5 webhooks and 5 refusals', async () => {
      const list = (await t.request('GET', '/api/v1/webhooks?page[size]=100')).body.data as { id: string }[]
      for (const { id } of list.slice(20)) expect((await t.request('DELETE', `/api/v1/webhooks/${id}`)).status).toBe(204)
      for (let n = list.length; n < 20; n++) expect((await create(`at-once/${100 + n}`)).status).toBe(201)
      expect((await t.request('GET', '/api/v1/webhooks?page[size]=100')).body.meta.page.total_items).toBe(20)
      const statuses = (await Promise.all(Array.from({ length: 10 }, (_, n) => create(`at-once/${n}`)))).map((res) => res.status)
      expect(statuses.sort()).toEqual([201, 201, 201, 201, 201, 422, 422, 422, 422, 422])
      expect((await t.request('GET', '/api/v1/webhooks?page[size]=100')).body.meta.page.total_items).toBe(25)
    })
  })
}
