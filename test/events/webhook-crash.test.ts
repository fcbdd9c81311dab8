import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import net from 'node:net'
import { STORES } from '../helpers/stores.js'
import { prepareServerStore, startServerProcess, type ServerProcess, type ServerStore } from '../helpers/processes.js'
import { eventually, startReceiver, verify, type Receiver } from '../helpers/webhook-receiver.js'

async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

interface Delivery { status: string; attempts: number; last_error: string | null; event_id: string }

/**
 * A real server process (kill -9 needs one) on a PostgreSQL schema or a PGlite data directory;
 * the delivery is read through the API, so the same test holds for both stores (a PGlite
 * directory belongs to the one server process that has it open).
 */
for (const kind of STORES) {
  describe(`${kind}: a pending webhook delivery survives kill -9 of the server`, () => {
    let prepared: ServerStore | null = null
    let env: Record<string, string | undefined>
    let key: string
    let server: ServerProcess | null = null
    let receiver: Receiver | null = null

    beforeAll(async () => {
      prepared = await prepareServerStore(kind, 'webhook-crash')
      env = prepared.env
      key = prepared.key
    }, 60_000)
    afterAll(async () => {
      if (server && server.child.exitCode === null) server.child.kill('SIGKILL')
      await receiver?.close()
      await prepared?.drop()
    })

    const call = async (method: string, url: string, body?: object) => {
      const res = await fetch(`${server!.address}/api/v1${url}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}),
      })
      return { status: res.status, body: await res.json() as any }
    }
    const delivery = async (webhookId: string): Promise<Delivery | undefined> => {
      const res = await call('GET', `/webhooks/${webhookId}/deliveries`)
      expect(res.status).toBe(200)
      expect(res.body.data.length).toBeLessThanOrEqual(1)
      return res.body.data[0]
    }

    it('keeps the delivery in the store and sends it after a restart once the receiver is up', async () => {
      const port = await freePort()
      env = {
        ...env,
        KBIS_WEBHOOK_ALLOW_PRIVATE: 'true', KBIS_WEBHOOK_RETRY_SCHEDULE: Array(60).fill('1').join(','),
        KBIS_WEBHOOK_TIMEOUT_MS: '1000', KBIS_WEBHOOK_POLL_MS: '100',
      }
      server = await startServerProcess(env)
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

      // Restarted with the receiver still down: the delivery is still there, still pending.
      server = await startServerProcess(env)
      expect(await delivery(hook.id)).toMatchObject({ status: 'pending', event_id: ping.body.data.event_id })
      receiver = await startReceiver(port)
      const [got] = await receiver.waitFor(1, 30_000)
      expect(verify(hook.secret, got!)).toMatchObject({ id: ping.body.data.event_id, type: 'webhook.test' })
      const done = await eventually(async () => {
        const d = await delivery(hook.id)
        return d?.status === 'succeeded' ? d : null
      }, 30_000)
      expect(done.attempts).toBeGreaterThanOrEqual(2)
      expect(done.last_error).toBeNull()
    }, 240_000)
  })
}
