import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

for (const store of STORES) {
  describe(`${store}: asset history (CONTRACT §13)`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    it('lists an asset\'s events newest first, with the relationship events touching it, by UUID and composite key', async () => {
      const server = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'h-1', access_domain_key: 'it', properties: { hostname: 'h-1' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${server.id}`, { body: { properties: { cpu_count: 2 } } })
      const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'h-app', properties: { code: 'h-app' } } })).body.data
      const rel = (await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: server.id } })).body.data
      await t.request('PATCH', `/api/v1/assets/${server.id}`, { body: { name: 'h-1b' } })
      const other = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'unrelated' } })).body.data

      const byId = await t.request('GET', `/api/v1/assets/${server.id}/history`)
      expect(byId.status).toBe(200)
      expect(byId.body.data.map((e: any) => `${e.type} ${e.subject}`)).toEqual([
        `asset.updated assets/${server.id}`,
        `relationship.created relationships/${rel.id}`,
        `asset.updated assets/${server.id}`,
        `asset.created assets/${server.id}`,
      ])
      expect(byId.body.meta.page).toEqual({ number: 1, size: 50, total_items: 4, total_items_exact: true, total_pages: 1 })
      expect(byId.body.data[0].data.changes).toEqual({ name: { from: 'h-1', to: 'h-1b' } })
      const sequences = byId.body.data.map((e: any) => BigInt(e.sequence))
      expect(sequences).toEqual([...sequences].sort((a, b) => (a > b ? -1 : 1)))

      const byKey = await t.request('GET', '/api/v1/assets/server:hostname:h-1/history')
      expect(byKey.body.data).toEqual(byId.body.data)
      const paged = await t.request('GET', `/api/v1/assets/${server.id}/history?page[size]=3&page[number]=2`)
      expect(paged.body.data).toEqual(byId.body.data.slice(3))
      expect(paged.body.meta.page).toMatchObject({ number: 2, size: 3, total_items: 4, total_pages: 2 })
      // Full pages and a page past the end are counted too.
      for (const [number, slice] of [[1, [0, 2]], [2, [2, 4]], [3, [4, 4]]] as const) {
        const full = await t.request('GET', `/api/v1/assets/${server.id}/history?page[size]=2&page[number]=${number}`)
        expect(full.status, `page ${number}`).toBe(200)
        expect(full.body.data, `page ${number}`).toEqual(byId.body.data.slice(...slice))
        expect(full.body.meta.page, `page ${number}`).toEqual({ number, size: 2, total_items: 4, total_items_exact: true, total_pages: 2 })
      }
      expect((await t.request('GET', `/api/v1/assets/${other.id}/history`)).body.data.map((e: any) => e.type)).toEqual(['asset.created'])
    })

    it('answers in the feed the same CloudEvents as in the history, whatever their text holds', async () => {
      const tricky = 'q"uote \\ back\nline \u0001ctl </script> \u2028 日本 😀'
      const created = await t.request('POST', '/api/v1/assets', {
        headers: { 'idempotency-key': `feed-parity-${store}` },
        body: { asset_type_key: 'server', name: `p ${tricky}`, properties: { hostname: 'h-parity', owner: tricky, uptime: 1e-7, cpu_count: 9007199254740991 } },
      })
      expect(created.status).toBe(201)
      const id = created.body.data.id as string
      await t.request('PATCH', `/api/v1/assets/${id}`, { body: { properties: { owner: `${tricky}!`, memory_gb: 0.1 } } })
      const history = await t.request('GET', `/api/v1/assets/${id}/history`)
      const feed = await t.request('GET', `/api/v1/events?filter[subject]=assets/${id}`)
      expect(feed.status).toBe(200)
      expect(feed.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(feed.body.data.map((e: any) => e.type)).toEqual(['asset.created', 'asset.updated'])
      expect(feed.body.data).toEqual([...history.body.data].reverse())
      // The members in the order the schema declares them (and webhooks and NATS send them).
      const members = ['specversion', 'id', 'type', 'source', 'subject', 'time', 'datacontenttype', 'sequence', 'requestid', 'idempotencykey', 'data']
      expect(Object.keys(feed.body.data[0])).toEqual(members)
      expect(Object.keys(feed.body.data[1])).toEqual(members.filter((m) => m !== 'idempotencykey'))
      expect(history.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(Object.keys(history.body)).toEqual(['data', 'meta', 'links'])
      expect(history.body.data.map((e: any) => Object.keys(e))).toEqual([...feed.body.data].reverse().map((e: any) => Object.keys(e)))
      expect(feed.body.data[0].idempotencykey).toBe(`feed-parity-${store}`)
      expect('idempotencykey' in feed.body.data[1]).toBe(false)
      expect(feed.body.data[0].data.object.properties.owner).toBe(tricky)
      expect(feed.body.data[1].data.changes).toEqual({ 'properties.owner': { from: tricky, to: `${tricky}!` }, 'properties.memory_gb': { from: null, to: 0.1 } })
      expect(feed.body.meta).toEqual({ next_cursor: expect.any(String), has_more: false })
      const next = await t.request('GET', `/api/v1/events?filter[subject]=assets/${id}&after=${feed.body.meta.next_cursor}`)
      expect(next.body).toEqual({ data: [], meta: { next_cursor: feed.body.meta.next_cursor, has_more: false } })
    })

    it('answers 404 for an unknown, archived or hidden asset, and 400 for page[size] over 100', async () => {
      const fin = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'h-fin', access_domain_key: 'finance' } })).body.data
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      expect((await t.request('GET', `/api/v1/assets/${fin.id}/history`, { key: editor })).status).toBe(404)
      expect((await t.request('GET', '/api/v1/assets/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/history')).body.errors[0].code).toBe('not_found')
      expect((await t.request('GET', '/api/v1/assets/server:hostname:nope/history')).status).toBe(404)
      await t.request('DELETE', `/api/v1/assets/${fin.id}`)
      expect((await t.request('GET', `/api/v1/assets/${fin.id}/history`)).status).toBe(404)
      expect((await t.request('GET', `/api/v1/assets/server:hostname:h-1/history?page[size]=101`)).body.errors[0].code).toBe('invalid_page')
    })

    it('hides relationship events whose other end the key cannot see', async () => {
      const itServer = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'h-it', access_domain_key: 'it' } })).body.data
      const finNote = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'h-fin2', access_domain_key: 'finance' } })).body.data
      await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: itServer.id, target_asset_id: finNote.id } })
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const seen = await t.request('GET', `/api/v1/assets/${itServer.id}/history`, { key: editor })
      expect(seen.body.data.map((e: any) => e.type)).toEqual(['asset.created'])
      expect((await t.request('GET', `/api/v1/assets/${itServer.id}/history`)).body.data.map((e: any) => e.type)).toEqual(['relationship.created', 'asset.created'])
    })
  })
}
