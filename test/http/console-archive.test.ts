import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { STORES } from '../helpers/stores.js'
import { Browser, givenPasswords } from '../helpers/console.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { ACME } from '../helpers/fixtures.js'

/** Restore and permanent deletion keep the live counters and the typed search projection right. */
for (const kind of STORES) {
  describe(`${kind}: restore and permanent deletion through the console`, () => {
    let t: TestApp
    let owner: Browser
    beforeAll(async () => {
      t = await createTestApp(kind)
      await givenPasswords(t, ['owner@acme.test'])
      owner = new Browser(t)
      expect((await owner.signIn('owner@acme.test')).statusCode).toBe(303)
    }, 120_000)
    afterAll(async () => t.close())

    const post = async (url: string, form: Record<string, string> = {}) => owner.send('POST', url, { _csrf: await owner.csrf('/console/archived'), ...form })
    const count = async () => (await t.request('GET', '/api/v1/assets?filter[asset_type_key]=server')).body.meta.page.total_items
    const searched = async () => (await t.request('POST', '/api/v1/search/assets', {
      body: { filter: { field: 'properties.environment', operator: 'equals', value: 'prod' } },
    })).body.data.map((a: { name: string }) => a.name)

    it('restores: counted again, found by search again, events written; deletes: gone from both', async () => {
      const ids = (await t.request('POST', '/api/v1/bulk/assets', { body: [
        { asset_type_key: 'server', name: 's-1', properties: { hostname: 's-1', environment: 'prod' } },
        { asset_type_key: 'server', name: 's-2', properties: { hostname: 's-2', environment: 'prod' } },
      ] })).body.data.map((d: { id: string }) => d.id) as string[]
      expect(await searched()).toEqual(['s-1', 's-2'])
      for (const id of ids) expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      expect([await count(), await searched()]).toEqual([0, []])

      expect((await post(`/console/archived/${ids[0]}/restore`)).statusCode).toBe(303)
      expect([await count(), await searched()]).toEqual([1, ['s-1']])
      expect((await post(`/console/archived/${ids[1]}/delete`, { confirm_name: 's-2' })).statusCode).toBe(303)
      expect([await count(), await searched()]).toEqual([1, ['s-1']])
      expect((await t.store.db.query('SELECT 1 FROM assets WHERE id = $1', [ids[1]])).rows).toEqual([])

      const events = (await t.store.db.query<{ type: string; subject: string; actor: unknown }>(
        `SELECT type, subject, data->'actor' AS actor FROM events WHERE type IN ('asset.restored', 'asset.deleted') ORDER BY id`)).rows
      const ownerId = (await t.request('GET', '/api/v1/users')).body.data.find((u: { email: string }) => u.email === 'owner@acme.test').id
      expect(events).toEqual([
        { type: 'asset.restored', subject: `assets/${ids[0]}`, actor: { api_key_id: null, user_id: ownerId } },
        { type: 'asset.deleted', subject: `assets/${ids[1]}`, actor: { api_key_id: null, user_id: ownerId } },
      ])
    })

    it('goes back to the archived list the restore came from, and to its first page for a back that is no path of it (a line break: no 500)', async () => {
      const cases: [string, string][] = [
        ['/console/archived?page=2', '/console/archived?page=2'],
        ['/console/archived\r\nX-Injected: 1', '/console/archived'],
        ['/console/archivedevil', '/console/archived'],
        ['https://example.com/console/archived', '/console/archived'],
        // Dot segments resolved: these name the API, not the list.
        ['/console/archived/../../api/v1/assets', '/console/archived'],
        ['/console/archived/%2e%2e/%2e%2e/api/v1/assets', '/console/archived'],
        ['/console/archived/./?page=3', '/console/archived/?page=3'],
      ]
      const ids = (await t.request('POST', '/api/v1/bulk/assets', { body: cases.map((_, i) => ({ asset_type_key: 'server', name: `back-${i}`, properties: { hostname: `back-${i}` } })) })).body.data.map((d: { id: string }) => d.id) as string[]
      for (const id of ids) expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      for (const [i, [back, location]] of cases.entries()) {
        const res = await post(`/console/archived/${ids[i]!}/restore`, { back })
        expect([res.statusCode, res.headers.location, res.headers['x-injected']], back).toEqual([303, location, undefined])
        expect((await t.request('GET', `/api/v1/assets/${ids[i]!}`)).status).toBe(200)
      }
    })

    it('refuses to restore what the metamodel no longer allows (an option and an access domain since removed), naming each value; restores once it is allowed again', async () => {
      const acme = ACME as unknown as SetupFile
      const apply = async (setup: SetupFile) => {
        await applySetup(t.store.db, setup)
        // PostgreSQL tells the app through LISTEN, a moment later: not waited for here.
        t.app.metamodels.invalidate()
      }
      const id = (await t.request('POST', '/api/v1/assets', { body: {
        asset_type_key: 'server', name: 'old-staging', access_domain_key: 'finance', properties: { hostname: 'old-staging', environment: 'staging' },
      } })).body.data.id as string
      expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      // Accepted by kbis apply: no live asset holds staging or sits in finance (archived ones are not checked).
      const narrowed = structuredClone(ACME)
      const server = narrowed.metamodel.asset_types.find((a) => a.key === 'server')!
      ;(server.properties.find((p) => p.key === 'environment') as { options: string[] }).options = ['dev', 'prod']
      narrowed.access_domains = narrowed.access_domains.filter((d) => d.key !== 'finance')
      for (const role of narrowed.roles) role.grants = role.grants.filter((g) => g.access_domain_key !== 'finance')
      try {
        await apply(narrowed as unknown as SetupFile)
        const refused = await post(`/console/archived/${id}/restore`)
        expect(refused.statusCode).toBe(303)
        const page = (await owner.send('GET', refused.headers.location as string)).body
        expect(/class="error" role="alert">([^<]*)</.exec(page)?.[1]).toBe(
          'old-staging cannot be restored: the metamodel no longer allows what it holds (environment must be one of dev, prod; unknown access domain finance). '
          + 'Allow it again with kbis apply to restore it, or delete it permanently.')
        expect((await t.request('GET', `/api/v1/assets/${id}`)).status).toBe(404)
      } finally {
        await apply(acme)
      }
      expect((await post(`/console/archived/${id}/restore`)).statusCode).toBe(303)
      expect((await t.request('GET', `/api/v1/assets/${id}`)).body.data).toMatchObject({ name: 'old-staging', access_domain_key: 'finance', properties: { environment: 'staging' } })
    })

    it('restores nothing when the metamodel changed between the page\'s check and the restore\'s transaction (an apply meanwhile): 503, still archived', async () => {
      const id = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'fenced', properties: { hostname: 'fenced', environment: 'staging' } } })).body.data.id as string
      expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      const token = await owner.csrf('/console/archived')
      // An apply removing staging, not yet heard of by the server (its cache keeps the metamodel that allows it).
      await t.store.db.transaction(async (tx) => {
        await tx.query("UPDATE property_definitions SET options = ARRAY['dev', 'prod'] WHERE org_id = $1 AND asset_type_key = 'server' AND key = 'environment'", [t.orgId])
        await tx.query('UPDATE organizations SET metamodel_version = metamodel_version + 1 WHERE id = $1', [t.orgId])
      })
      try {
        const fenced = await owner.send('POST', `/console/archived/${id}/restore`, { _csrf: token })
        expect(fenced.statusCode).toBe(503)
        // The console's page of a 5xx: try again.
        expect(fenced.body).toContain('Try again in a moment.')
        expect((await t.request('GET', `/api/v1/assets/${id}`)).status).toBe(404)
        // Sent again: checked against the metamodel without staging, and refused by name.
        const refused = await owner.send('POST', `/console/archived/${id}/restore`, { _csrf: token })
        expect(refused.statusCode).toBe(303)
        const page = (await owner.send('GET', refused.headers.location as string)).body
        expect(/class="error" role="alert">([^<]*)</.exec(page)?.[1]).toMatch(/^fenced cannot be restored: the metamodel no longer allows what it holds \(environment must be one of dev, prod\)/)
        expect((await t.request('GET', `/api/v1/assets/${id}`)).status).toBe(404)
      } finally {
        await applySetup(t.store.db, ACME as unknown as SetupFile)
        t.app.metamodels.invalidate()
      }
    })

    it('refuses what the user may not (403 page); hidden or unknown assets are 404 pages', async () => {
      const id = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'n-1' } })).body.data.id
      expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      await givenPasswords(t, ['editor@acme.test'])
      const editor = new Browser(t)
      await editor.signIn('editor@acme.test')
      // The editor's role (it_editor) has `delete` only in domain it: a note without a domain is hidden.
      const token = await editor.csrf('/console/archived')
      expect((await editor.send('POST', `/console/archived/${id}/restore`, { _csrf: token })).statusCode).toBe(404)
      // As in the API, a permission type too low is refused before any asset is looked at.
      expect((await editor.send('POST', `/console/archived/${id}/delete`, { _csrf: token, confirm_name: 'n-1' })).statusCode).toBe(403)
      const itNote = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'n-2', access_domain_key: 'it' } })).body.data.id
      expect((await t.request('DELETE', `/api/v1/assets/${itNote}`)).status).toBe(204)
      // Nor is the confirmation form shown to a user who may not delete (the owner gets it).
      const form = await editor.send('GET', `/console/archived/${itNote}/delete`)
      expect(form.statusCode).toBe(403)
      expect(form.body).not.toContain('Confirm name')
      expect((await owner.send('GET', `/console/archived/${itNote}/delete`)).body).toContain('Confirm name')
      const denied = await editor.send('POST', `/console/archived/${itNote}/delete`, { _csrf: token, confirm_name: 'n-2' })
      expect(denied.statusCode).toBe(403)
      expect(denied.body).toContain('only an Admin or the Owner can delete assets permanently')
      expect((await editor.send('POST', `/console/archived/${itNote}/restore`, { _csrf: token })).statusCode).toBe(303)
      expect((await t.request('GET', `/api/v1/assets/${itNote}`)).status).toBe(200)
      expect((await post('/console/archived/not-a-uuid/restore')).statusCode).toBe(404)
    })

    it('counts in its notices only the relationships whose both ends the user sees', async () => {
      const asset = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string
      // it_editor (the editor) sees domain it and finance servers; not finance notes nor assets without a domain.
      const source = await asset({ asset_type_key: 'server', name: 'rel-src', access_domain_key: 'it', properties: { hostname: 'rel-src' } })
      const ends = [
        await asset({ asset_type_key: 'note', name: 'rel-it', access_domain_key: 'it' }),
        await asset({ asset_type_key: 'server', name: 'rel-fin-server', access_domain_key: 'finance', properties: { hostname: 'rel-fin-server' } }),
        await asset({ asset_type_key: 'note', name: 'rel-fin-note', access_domain_key: 'finance' }),
        await asset({ asset_type_key: 'note', name: 'rel-none' }),
      ]
      for (const target of ends) {
        expect((await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: source, target_asset_id: target } })).status).toBe(201)
      }
      const notice = async (b: Browser) => /role="status"[^>]*>([^<]*)</.exec((await b.send('GET', '/console/archived')).body)?.[1]
      expect((await t.request('DELETE', `/api/v1/assets/${source}`)).status).toBe(204)
      const editor = new Browser(t)
      await editor.signIn('editor@acme.test')
      expect((await editor.send('POST', `/console/archived/${source}/restore`, { _csrf: await editor.csrf('/console/archived') })).statusCode).toBe(303)
      expect(await notice(editor)).toBe('Restored rel-src with 2 relationships.')
      // The owner sees all four ends: the same count, over every relationship the deletion removes.
      expect((await t.request('DELETE', `/api/v1/assets/${source}`)).status).toBe(204)
      expect((await post(`/console/archived/${source}/delete`, { confirm_name: 'rel-src' })).statusCode).toBe(303)
      expect(await notice(owner)).toBe('Deleted rel-src permanently, with 4 relationships.')
      expect((await t.store.db.query('SELECT count(*)::int AS n FROM relationships WHERE source_asset_id = $1', [source])).rows[0]!.n).toBe(0)
    })

    it('shows an http(s) url property as a link and any other value as text', async () => {
      const create = async (name: string, homepage: string) => (await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'server', name, properties: { hostname: name, homepage, summary: '<b>bold</b>' } },
      })).body.data.id as string
      const web = await create('url-1', 'https://intranet.example.com/a?b=1&c=2')
      const page = (await owner.send('GET', `/console/assets/${web}`)).body
      expect(page).toContain('<a href="https://intranet.example.com/a?b=1&amp;c=2" rel="noopener noreferrer">https://intranet.example.com/a?b=1&amp;c=2</a>')
      expect(page).toContain('&lt;b&gt;bold&lt;/b&gt;')
      const script = await create('url-2', 'javascript:alert(1)')
      const other = (await owner.send('GET', `/console/assets/${script}`)).body
      expect(other).toContain('<td>javascript:alert(1)</td>')
      expect(other).not.toContain('href="javascript:')
    })

    it('names the other end of a relationship in the history: a live one links to its page, an archived one to it in the archived assets, a hidden one stays an id', async () => {
      const asset = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string
      const app = await asset({ asset_type_key: 'application', name: 'hist-shop', access_domain_key: 'it', properties: { code: 'hist-shop' } })
      const live = await asset({ asset_type_key: 'server', name: 'hist-live', access_domain_key: 'it', properties: { hostname: 'hist-live' } })
      const gone = await asset({ asset_type_key: 'server', name: 'hist-gone', access_domain_key: 'it', properties: { hostname: 'hist-gone' } })
      const hidden = await asset({ asset_type_key: 'note', name: 'hist-hidden', access_domain_key: 'finance' })
      for (const [type, target] of [['runs_on', live], ['runs_on', gone], ['depends_on', hidden]] as const) {
        expect((await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: type, source_asset_id: app, target_asset_id: target } })).status).toBe(201)
      }
      expect((await t.request('DELETE', `/api/v1/assets/${gone}`)).status).toBe(204)
      // Moved into it from finance, where the editor (it_editor) could not see it.
      const moved = await asset({ asset_type_key: 'application', name: 'hist-secret', access_domain_key: 'finance', properties: { code: 'hist-moved' } })
      expect((await t.request('PATCH', `/api/v1/assets/${moved}`, { body: { access_domain_key: 'it', name: 'hist-public' } })).status).toBe(200)
      await t.settled()
      const links = async (b: Browser, id: string) => {
        const page = (await b.send('GET', `/console/assets/${id}`)).body
        return [...page.slice(page.indexOf('id="history-h"')).matchAll(/<td>([^<]*)(?: <a href="([^"]*)">([^<]*)<\/a>)?<\/td><td>[^<]*<\/td><\/tr>/g)].map((m) => [m[1], m[2] ?? null, m[3] ?? null])
      }
      const shown = await links(owner, app)
      expect(shown).toContainEqual(['runs_on →', `/console/assets/${live}`, 'hist-live'])
      expect(shown).toContainEqual(['runs_on →', '/console/archived?name=hist-gone&amp;type=server', 'hist-gone (archived)'])
      expect(shown).toContainEqual(['depends_on →', `/console/assets/${hidden}`, 'hist-hidden'])
      await givenPasswords(t, ['editor@acme.test'])
      const editor = new Browser(t)
      expect((await editor.signIn('editor@acme.test')).statusCode).toBe(303)
      const seen = await links(editor, app)
      expect(seen).toContainEqual(['runs_on →', '/console/archived?name=hist-gone&amp;type=server', 'hist-gone (archived)'])
      expect(seen.filter((row) => row[0] === 'depends_on →')).toEqual([])
      const move = await links(editor, moved)
      expect(move).toEqual([['name: → hist-public; access_domain_key: → it', null, null]])
      // Deleted for good since: its id, as text, not a link to a page that is gone.
      expect((await post(`/console/archived/${gone}/delete`, { confirm_name: 'hist-gone' })).statusCode).toBe(303)
      await t.settled()
      const after = (await links(owner, app)).filter((row) => row[0]!.includes(gone))
      expect(after).toEqual([[`runs_on → ${gone}`, null, null], [`runs_on → ${gone}`, null, null]])
    })

    it('pages an asset\'s history and names who acted, as far as the signed-in user may know them', async () => {

      const editorKey = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
      const keys = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data as { id: string; name: string; secret_prefix: string; owner_user_id: string }[]
      const mine = keys.find((k) => editorKey.startsWith(`${k.secret_prefix}_`))!
      const admin = keys.find((k) => t.adminKey.startsWith(`${k.secret_prefix}_`))!
      const id = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'hist-1', access_domain_key: 'it' } })).body.data.id as string
      for (let i = 0; i < 54; i++) {
        expect((await t.request('PATCH', `/api/v1/assets/${id}`, { key: editorKey, body: { properties: { body: `v${i}` } } })).status).toBe(200)
      }
      await t.settled()
      const history = async (b: Browser, query = '') => {
        const page = (await b.send('GET', `/console/assets/${id}${query}`)).body
        const section = page.slice(page.indexOf('id="history-h"'))
        return { rows: [...section.matchAll(/<tr><td>[^<]*<\/td><td>(asset\.[a-z]+)<\/td><td>[^]*?<\/td><td>([^<]*)<\/td><\/tr>/g)].map((m) => [m[1], m[2]]), section }
      }
      // 55 events: 50 newest first, then the last 5 behind "Next page".
      const first = await history(owner)
      expect(first.rows).toHaveLength(50)
      expect(first.rows[0]).toEqual(['asset.updated', `API key ${mine.name} (${mine.secret_prefix})`])
      expect(first.section).toContain(`href="/console/assets/${id}?history_page=2"`)
      expect(first.section).toContain('Page 1 of 2 · 55 items')
      const second = await history(owner, '?history_page=2')
      expect(second.rows).toHaveLength(5)
      expect(second.rows.at(-1)).toEqual(['asset.created', `API key ${admin.name} (${admin.secret_prefix})`])
      // The editor knows its own key by name; another's key only by the random end of its id.
      const editor = new Browser(t)
      await editor.signIn('editor@acme.test')
      expect((await history(editor)).rows[0]).toEqual(['asset.updated', `API key ${mine.name} (${mine.secret_prefix})`])
      expect((await history(editor, '?history_page=2')).rows.at(-1)).toEqual(['asset.created', `API key …${admin.id.slice(-12)}`])
    })
  })
}
