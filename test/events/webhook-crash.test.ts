import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import net from 'node:net'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { startServerProcess, type ServerProcess } from '../helpers/processes.js'
import { eventually, startReceiver, verify, type Receiver } from '../helpers/webhook-receiver.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { ACME } from '../helpers/fixtures.js'

async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

// A real server process (kill -9 needs one); several processes share one store on PostgreSQL only.
describe.runIf(STORES.includes('postgres'))('postgres: a pending webhook delivery survives kill -9 of the server', () => {
  let store: TestStore
  let key: string
  let server: ServerProcess | null = null
  let receiver: Receiver | null = null

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, ACME as unknown as SetupFile)
    key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'crash', type: 'Admin', roles: ['all'] })).secret
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await store?.drop()
  })

  const delivery = async (webhookId: string) =>
    (await store.db.query<{ status: string; attempts: number; last_error: string | null; event_id: string }>(
      'SELECT status, attempts, last_error, event_id FROM webhook_deliveries WHERE webhook_id = $1', [webhookId])).rows[0]

  it('keeps the delivery in the store and sends it after a restart once the receiver is up', async () => {
    const port = await freePort()
    const env = {
      DATABASE_URL: process.env.TEST_DATABASE_URL, KBIS_TEST_SCHEMA: store.schema!,
      KBIS_WEBHOOK_ALLOW_PRIVATE: 'true', KBIS_WEBHOOK_RETRY_SCHEDULE: Array(60).fill('1').join(','),
      KBIS_WEBHOOK_TIMEOUT_MS: '1000', KBIS_WEBHOOK_POLL_MS: '100',
    }
    server = await startServerProcess(env)
    const call = async (method: string, path: string, body?: object) => {
      const res = await fetch(`${server!.address}/api/v1${path}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}),
      })
      return { status: res.status, body: await res.json() as any }
    }
    const hook = (await call('POST', '/webhooks', { url: `http://127.0.0.1:${port}/hook`, event_types: ['asset.created'] })).body.data
    const ping = await call('POST', `/webhooks/${hook.id}/test`)
    expect(ping.status).toBe(202)
    // The receiver is down: the first attempt fails and the delivery waits for its retry.
    const failing = await eventually(async () => {
      const d = await delivery(hook.id)
      return d && d.attempts >= 1 ? d : null
    }, 30_000)
    expect(failing).toMatchObject({ status: 'pending', last_error: 'connection refused', event_id: ping.body.data.event_id })

    const exited = new Promise((resolve) => server!.child.once('exit', resolve))
    server.child.kill('SIGKILL')
    await exited
    expect((await delivery(hook.id))!.status).toBe('pending')

    server = await startServerProcess(env)
    receiver = await startReceiver(port)
    const [got] = await receiver.waitFor(1, 30_000)
    expect(verify(hook.secret, got!)).toMatchObject({ id: ping.body.data.event_id, type: 'webhook.test' })
    const done = await eventually(async () => {
      const d = await delivery(hook.id)
      return d?.status === 'succeeded' ? d : null
    }, 30_000)
    expect(done.attempts).toBeGreaterThanOrEqual(2)
  }, 240_000)
})
