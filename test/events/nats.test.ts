import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomBytes } from 'node:crypto'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { eventually } from '../helpers/webhook-receiver.js'
import { tcpProxy } from '../helpers/tcp-proxy.js'
import { attachNats, CLOSE_TIMEOUT_MS, CONNECT_TIMEOUT_MS, NATS_MAX_PINGS_OUT, NATS_PING_INTERVAL_MS, NatsStreamError } from '../../src/events/nats.js'

const NATS_URL = process.env.TEST_NATS_URL

for (const store of STORES) {
  describe.runIf(NATS_URL)(`${store}: events published to NATS JetStream (CONTRACT §13)`, () => {
    let t: TestApp
    let nc: NatsConnection
    let jsm: JetStreamManager
    const stream = `KBIS_TEST_${randomBytes(5).toString('hex').toUpperCase()}`
    beforeAll(async () => {
      nc = await connect({ servers: NATS_URL })
      jsm = await jetstreamManager(nc)
      t = await createTestApp(store, undefined, { natsUrl: NATS_URL, natsStream: stream })
      // The app attaches its sink in the background; on a loaded machine that takes a moment.
      await eventually(async () => jsm.streams.info(stream).then(() => true, () => false), 30_000, 100).catch(async () => {
        const held: string[] = []
        for await (const info of jsm.streams.list()) held.push(`${info.config.name} (${info.config.subjects.join(', ')})`)
        throw new Error(`the app did not create stream ${stream}; the server holds: ${held.join('; ') || 'no stream'}`)
      })
    })
    afterAll(async () => {
      await t.app.close()
      await t.close()
      await jsm.streams.delete(stream).catch(() => undefined)
      await nc.close()
    })

    async function messages(count: number): Promise<{ subject: string; msgId: string | undefined; event: any }[]> {
      const consumer = await jetstream(nc).consumers.get(stream)
      const out: { subject: string; msgId: string | undefined; event: any }[] = []
      const batch = await consumer.fetch({ max_messages: count, expires: 3000 })
      for await (const m of batch) {
        out.push({ subject: m.subject, msgId: m.headers?.get('Nats-Msg-Id'), event: m.json() })
        if (out.length === count) break
      }
      return out
    }

    async function until(check: () => Promise<boolean>): Promise<void> {
      await eventually(check, 20_000, 50)
    }

    it('creates the stream and publishes every event to kbis.<org>.<type> with Nats-Msg-Id = event id', async () => {
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'nats-1' } })
      await t.request('PATCH', `/api/v1/assets/${created.body.data.id}`, { body: { name: 'nats-2' } })
      const feed = (await t.request('GET', `/api/v1/events?filter[subject]=assets/${created.body.data.id}`)).body.data
      expect(feed).toHaveLength(2)
      // On PGlite the events are in the feed at once and marked for publication by the relay's round.
      await t.settled()
      await until(async () => (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE pending_publish')).rows[0]!.n === 0)
      const info = await jsm.streams.info(stream)
      expect(info.config.subjects).toEqual(['kbis.>'])
      const all = await messages(info.state.messages)
      const ours = all.filter((m) => feed.some((e: any) => e.id === m.event.id))
      expect(ours).toEqual(feed.map((e: any) => ({ subject: `kbis.acme.${e.type}`, msgId: e.id, event: e })))
    })

    it('publishes an event larger than the server\'s max_payload without its data (dataomitted), and the events after it as usual', async () => {
      const max = (nc.info as { max_payload: number }).max_payload
      const text = (c: string) => c.repeat(Math.ceil(max * 0.7))
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'nats-big', properties: { body: text('a') } } })
      expect(created.status).toBe(201)
      // From and to: the update's event is about 1.4 times the server's limit.
      expect((await t.request('PATCH', `/api/v1/assets/${created.body.data.id}`, { body: { properties: { body: text('b') } } })).status).toBe(200)
      const after = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'nats-after-big' } })
      await t.settled()
      await until(async () => (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE pending_publish')).rows[0]!.n === 0)
      const feed = (await t.request('GET', '/api/v1/events?filter[type]=asset.updated,asset.created&page[size]=1000')).body.data as any[]
      const updated = feed.find((e) => e.type === 'asset.updated' && e.subject === `assets/${created.body.data.id}`)
      const next = feed.find((e) => e.subject === `assets/${after.body.data.id}`)
      const all = await messages((await jsm.streams.info(stream)).state.messages)
      const byId = new Map(all.map((m) => [m.msgId, m.event]))
      expect(JSON.stringify(updated).length).toBeGreaterThan(max)
      expect(byId.get(updated.id)).toEqual({ ...updated, data: null, dataomitted: true })
      expect(byId.get(next.id)).toEqual(next)
      expect(all.filter((m) => m.msgId === next.id)).toHaveLength(1)
    })

    it('republishes events a crash left unpublished; the stream drops the duplicates', async () => {
      const before = (await jsm.streams.info(stream)).state.messages
      await t.store.db.query(`UPDATE events SET pending_publish = true, time = now() - interval '1 minute'`)
      await t.app.close()
      t = { ...t, app: await (await import('../../src/app.js')).buildApp({ db: t.store.db, config: (await import('../../src/core/config.js')).loadConfig({}, { natsUrl: NATS_URL, natsStream: stream }) }) }
      await t.app.ready()
      await until(async () => (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE pending_publish')).rows[0]!.n === 0)
      expect((await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE pending_publish')).rows[0]!.n).toBe(0)
      expect((await jsm.streams.info(stream)).state.messages).toBe(before)
    })

    it('a NATS outage after connecting holds up neither the relay nor feed reads; the events are published once it ends', { timeout: 90_000 }, async () => {
      // The app reaches NATS through a proxy this test cuts and restores.
      const proxy = await tcpProxy(NATS_URL!, 4222)
      const cut = await createTestApp(store, undefined, { natsUrl: proxy.url, natsStream: stream })
      try {
        await t.settled()
        const first = await cut.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'before-outage' } })
        expect(first.status).toBe(201)
        await cut.settled()
        await until(async () => (await pendingPublish(cut)) === 0)
        const before = (await jsm.streams.info(stream)).state.messages

        await proxy.stop()
        const created = await cut.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'during-outage' } })
        expect(created.status).toBe(201)
        await cut.settled()
        // The relay's round published nothing (NATS unreachable) and the next ones do not wait for
        // its time-out (5 s): each of these used to take that long.
        for (const name of ['during-outage-2', 'during-outage-3']) {
          await cut.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })
          const started = Date.now()
          await cut.app.events.flush()
          const feed = await cut.request('GET', '/api/v1/events?filter[type]=asset.created')
          expect(feed.body.data.map((e: any) => e.data.object.name)).toContain(name)
          expect(Date.now() - started).toBeLessThan(2500)
        }
        expect(await pendingPublish(cut)).toBe(3)

        // NATS back: the sweep publishes what the outage left pending (events older than 10 s; aged
        // here so as not to wait), each once.
        await proxy.start()
        await cut.store.db.query(`UPDATE events SET time = now() - interval '1 minute' WHERE pending_publish`)
        await until(async () => (await pendingPublish(cut)) === 0)
        expect((await jsm.streams.info(stream)).state.messages).toBe(before + 3)
      } finally {
        await cut.app.close()
        await cut.close()
        await proxy.close()
      }
    })

    it('a NATS that stops answering after connecting holds up neither writes nor the close; what it did not take stays pending', { timeout: 60_000 }, async () => {
      const proxy = await tcpProxy(NATS_URL!, 4222)
      const frozen = await createTestApp(store, undefined, { natsUrl: proxy.url, natsStream: stream })
      let closed = false
      try {
        const first = await frozen.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'before-freeze' } })
        expect(first.status).toBe(201)
        await frozen.settled()
        await until(async () => (await pendingPublish(frozen)) === 0)

        // The connection stays open and nothing comes back: no error, no close, only silence.
        proxy.freeze()
        for (const name of ['frozen-1', 'frozen-2']) {
          const started = Date.now()
          const created = await frozen.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })
          expect(created.status).toBe(201)
          await frozen.settled()
          const feed = await frozen.request('GET', '/api/v1/events?filter[type]=asset.created')
          expect(feed.body.data.map((e: any) => e.data.object.name)).toContain(name)
          expect(Date.now() - started).toBeLessThan(2500)
        }
        // nats.js's drain waits for NATS's answer with no time-out: the close used to wait forever.
        const started = Date.now()
        await frozen.app.close()
        closed = true
        expect(Date.now() - started).toBeLessThan(CLOSE_TIMEOUT_MS + 2500)
        expect(await pendingPublish(frozen)).toBe(2)
      } finally {
        if (!closed) await frozen.app.close()
        await frozen.close()
        await proxy.close()
      }
    })
  })
}

async function pendingPublish(app: TestApp): Promise<number> {
  return (await app.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE pending_publish')).rows[0]!.n
}

describe.runIf(NATS_URL)('pglite: a closed app leaves NATS alone', () => {
  it('starts no attempt to reach NATS after close: a retry due later creates no stream', { timeout: 30_000 }, async () => {
    const nc = await connect({ servers: NATS_URL })
    const jsm = await jetstreamManager(nc)
    const suffix = randomBytes(5).toString('hex').toUpperCase()
    // A stream holding kbis.> already makes the app's own creation fail: it retries in 5 s.
    const blocker = `KBIS_TEST_BLOCK_${suffix}`
    const stream = `KBIS_TEST_LATE_${suffix}`
    await jsm.streams.add({ name: blocker, subjects: ['kbis.>'] })
    const t = await createTestApp('pglite', undefined, { natsUrl: NATS_URL, natsStream: stream })
    try {
      // What the app logs then: the stream's own trouble, not "NATS unreachable".
      const failed = await attachNats(t.app.events, t.store.db, { url: NATS_URL!, stream }).then(() => null, (err: unknown) => err as Error)
      expect(failed).toBeInstanceOf(NatsStreamError)
      expect(failed!.message).toMatch(new RegExp(`^NATS stream ${stream} \\(subjects kbis\\.>\\) could not be found or created: .*subjects overlap with an existing stream`))
      await new Promise((resolve) => setTimeout(resolve, 500))
      await t.app.close()
      await jsm.streams.delete(blocker)
      await new Promise((resolve) => setTimeout(resolve, 6000))
      const names: string[] = []
      for await (const name of jsm.streams.names()) names.push(name)
      expect(names).not.toContain(stream)
    } finally {
      await t.close()
      await jsm.streams.delete(stream).catch(() => undefined)
      await jsm.streams.delete(blocker).catch(() => undefined)
      await nc.close()
    }
  })
})

describe.runIf(NATS_URL)('pglite: a NATS connection that goes silent while NATS is fine', () => {
  it('is taken for dead once its PINGs go unanswered, made again, and what waited is published', { timeout: 60_000 }, async () => {
    const nc = await connect({ servers: NATS_URL })
    const jsm = await jetstreamManager(nc)
    const stream = `KBIS_TEST_STALE_${randomBytes(5).toString('hex').toUpperCase()}`
    const proxy = await tcpProxy(NATS_URL!, 4222)
    const t = await createTestApp('pglite', undefined, { natsUrl: proxy.url, natsStream: stream })
    try {
      const write = async (name: string) => {
        expect((await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })).status).toBe(201)
        await t.settled()
      }
      await write('before-silence')
      await eventually(async () => (await pendingPublish(t)) === 0, 30_000, 50)
      const before = (await jsm.streams.info(stream)).state.messages

      // The connection stays open and carries nothing back; NATS and new connections are fine.
      proxy.freezeOpen()
      await write('during-silence')
      // Aged, so that a sweep (every 5 s) takes it rather than leave it to the relay for 10 s.
      await t.store.db.query(`UPDATE events SET time = now() - interval '1 minute' WHERE pending_publish`)
      // Two PINGs unanswered (NATS_PING_INTERVAL_MS apart), a new connection, then a sweep: well
      // within a minute, where nats.js's default (2 minutes, twice) took 4 to 6.
      const silentAt = Date.now()
      await eventually(async () => (await pendingPublish(t)) === 0, 45_000, 100)
      expect(Date.now() - silentAt).toBeLessThan(NATS_PING_INTERVAL_MS * (NATS_MAX_PINGS_OUT + 1) + 10_000)
      expect((await jsm.streams.info(stream)).state.messages).toBe(before + 1)
    } finally {
      await t.app.close()
      await t.close()
      await proxy.close()
      await jsm.streams.delete(stream).catch(() => undefined)
      await nc.close()
    }
  })
})

describe.runIf(NATS_URL)('pglite: a NATS that accepts connections and never answers', () => {
  it('the API serves, and the close gives the attempt up without waiting for its time-out; a greeting after the close creates no stream', { timeout: 30_000 }, async () => {
    const nc = await connect({ servers: NATS_URL })
    const jsm = await jetstreamManager(nc)
    const stream = `KBIS_TEST_SILENT_${randomBytes(5).toString('hex').toUpperCase()}`
    const proxy = await tcpProxy(NATS_URL!, 4222)
    proxy.freeze()
    const t = await createTestApp('pglite', undefined, { natsUrl: proxy.url, natsStream: stream })
    try {
      await t.settled()
      const before = await pendingPublish(t)
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'silent-nats' } })
      expect(created.status).toBe(201)
      const started = Date.now()
      await t.app.close()
      // nats.js waits 20 s for a greeting by default; the app's attempt waits CONNECT_TIMEOUT_MS,
      // and its close does not wait for that.
      expect(Date.now() - started).toBeLessThan(Math.min(2500, CONNECT_TIMEOUT_MS))
      // NATS answers after all: the connection the attempt then gets is closed, nothing created.
      proxy.thaw()
      await new Promise((resolve) => setTimeout(resolve, 1500))
      const names: string[] = []
      for await (const name of jsm.streams.names()) names.push(name)
      expect(names).not.toContain(stream)
      expect(await pendingPublish(t)).toBe(before + 1)
    } finally {
      await t.close()
      await proxy.close()
      await jsm.streams.delete(stream).catch(() => undefined)
      await nc.close()
    }
  })
})
