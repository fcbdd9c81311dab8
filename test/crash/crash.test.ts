import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { prepareServerStore, startServerProcess, type ServerProcess, type ServerStore } from '../helpers/processes.js'

/**
 * kill -9 of a real server process in the middle of a 10,000-item bulk create and of a bulk
 * update, then a restart on the same store (a PGlite data directory, a PostgreSQL schema): every
 * bulk request is one transaction, so the store holds all of it or none of it.
 */
const ITEMS = 10_000

for (const store of STORES) {
  describe(`${store}: kill -9 during bulk writes`, () => {
    let env: Record<string, string | undefined>
    let prepared: ServerStore | null = null
    let key = ''
    let server: ServerProcess | null = null

    beforeAll(async () => {
      prepared = await prepareServerStore(store, 'crash')
      env = prepared.env
      key = prepared.key
    }, 180_000)
    afterAll(async () => {
      if (server && server.child.exitCode === null) server.child.kill('SIGKILL')
      await prepared?.drop()
    })

    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${server!.address}${url}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      return { status: res.status, body: await res.json().catch(() => null) }
    }
    const count = async (filter: string) => {
      const res = await call('GET', `/api/v1/assets?${filter}&page[size]=1&page[count]=exact`)
      expect(res.status).toBe(200)
      return res.body.meta.page.total_items as number
    }

    /** Sends the request, kills the server (SIGKILL) after `delayMs`, restarts it; the answer if one came first. */
    async function killDuring(method: string, url: string, body: unknown, delayMs: number): Promise<number | null> {
      const sent = call(method, url, body).then((r) => r.status, () => null)
      await new Promise((resolve) => setTimeout(resolve, delayMs))
      const exited = new Promise((resolve) => server!.child.once('exit', resolve))
      server!.child.kill('SIGKILL')
      await exited
      const status = await sent
      server = await startServerProcess(env)
      return status
    }

    it('keeps all or nothing of a 10,000-item bulk create and of a bulk update', async () => {
      server = await startServerProcess(env)
      const items = Array.from({ length: ITEMS }, (_, i) => ({ asset_type_key: 'note', name: `crash-${i}`, properties: { body: 'old' }, client_ref: `r${i}` }))
      // Kill at several points of the request; whatever the point, 0 or 10,000 rows.
      const outcomes: string[] = []
      let created = false
      for (const delay of [300, 1_500]) {
        if (created) break
        const status = await killDuring('POST', '/api/v1/bulk/assets', items, delay)
        const rows = await count('filter[asset_type_key]=note')
        outcomes.push(`create killed at ${delay} ms: answer ${status ?? 'none'}, ${rows} rows`)
        expect([0, ITEMS], outcomes.join('; ')).toContain(rows)
        if (status === 201) expect(rows).toBe(ITEMS)
        created = rows === ITEMS
      }
      if (!created) {
        const res = await call('POST', '/api/v1/bulk/assets', items)
        expect(res.status).toBe(201)
      }
      expect(await count('filter[asset_type_key]=note')).toBe(ITEMS)

      // Every id in one request (the export), not 100 pages of 100.
      const exported = await fetch(`${server!.address}/api/v1/export/assets?format=ndjson&filter[asset_type_key]=note`, { headers: { authorization: `Bearer ${key}` } })
      expect(exported.status).toBe(200)
      const ids = (await exported.text()).trimEnd().split('\n').map((line) => (JSON.parse(line) as { id: string }).id)
      expect(new Set(ids).size).toBe(ITEMS)
      const patch = ids.map((id) => ({ id, name: `renamed-${id}`, properties: { body: 'new' } }))
      for (const delay of [300, 1_500]) {
        const status = await killDuring('PATCH', '/api/v1/bulk/assets', patch, delay)
        const fresh = await count('filter[properties.body]=new')
        const stale = await count('filter[properties.body]=old')
        outcomes.push(`update killed at ${delay} ms: answer ${status ?? 'none'}, ${fresh} new, ${stale} old`)
        expect(fresh + stale, outcomes.join('; ')).toBe(ITEMS)
        expect([0, ITEMS], outcomes.join('; ')).toContain(fresh)
        if (status === 200) expect(fresh).toBe(ITEMS)
        if (fresh === ITEMS) break
      }
      console.log(`${store}: ${outcomes.join('; ')}`)
      await server!.stop()
    }, 600_000)
  })
}
