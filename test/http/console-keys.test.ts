import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { STORES } from '../helpers/stores.js'
import { Browser, givenPasswords } from '../helpers/console.js'

/** The console's key forms offer what the API accepts (CONTRACT §15: "key management follows the API-key rules exactly"). */
for (const kind of STORES) {
  describe(`${kind}: API keys in the console's developer settings`, () => {
    let t: TestApp
    let owner: Browser
    let users: Record<string, string>
    beforeAll(async () => {
      t = await createTestApp(kind)
      await givenPasswords(t, ['owner@acme.test'])
      owner = new Browser(t)
      expect((await owner.signIn('owner@acme.test')).statusCode).toBe(303)
      users = Object.fromEntries((await t.request('GET', '/api/v1/users')).body.data.map((u: { email: string; id: string }) => [u.email, u.id]))
    }, 120_000)
    afterAll(async () => t.close())

    const SETTINGS = '/console/developer-settings'
    const editorKey = async (name: string) => (await t.request('POST', '/api/v1/api-keys', {
      body: { name, permission_type: 'Editor', role_keys: ['it_editor'], owner_user_id: users['editor@acme.test'] },
    })).body.data.id as string
    const record = async (id: string) => (await t.request('GET', `/api/v1/api-keys/${id}`)).body.data
    const options = (html: string, select: string) => {
      const list = new RegExp(`<select id="${select}"[^>]*>([\\s\\S]*?)</select>`).exec(html)?.[1] ?? ''
      return [...list.matchAll(/<option value="([^"]+)"( selected)?/g)].map((m) => `${m[1]}${m[2] ? ' (selected)' : ''}`)
    }
    const notice = async () => /role="(?:status|alert)"[^>]*>([^<]*)</.exec((await owner.send('GET', SETTINGS)).body)?.[1]

    it('says a page past the last holds no keys, and leads back to the last, rather than "No API keys yet."', async () => {
      const total = (await t.request('GET', '/api/v1/api-keys?page[size]=1')).body.meta.page.total_items as number
      expect(total).toBeGreaterThan(0)
      const past = (await owner.send('GET', `${SETTINGS}?page=9999`)).body
      expect(past).not.toContain('No API keys yet.')
      expect(past).toContain(`<a href="/console/developer-settings?page=1">Previous page</a>`)
      expect(past).toContain(`<span>No items on page 9999: the last page is 1 · ${total} ${total === 1 ? 'item' : 'items'}</span>`)
    })

    it('edits another user\'s key: its owner\'s roles are offered, the key\'s own chosen, and a rename saves', async () => {
      const id = await editorKey('annk')
      const form = (await owner.send('GET', `${SETTINGS}?edit=${id}`)).body
      // The editor user holds it_editor only: the owner's own role "all" is not the key owner's.
      expect(options(form, 'key-roles')).toEqual(['it_editor (selected)'])
      const token = /name="_csrf" value="([^"]+)"/.exec(form)![1]!
      const saved = await owner.send('POST', `${SETTINGS}/keys/${id}`, { _csrf: token, name: 'annk renamed', description: '', permission_type: 'Editor', role_keys: ['it_editor'] })
      expect(saved.statusCode).toBe(303)
      expect(await notice()).toBe('Saved the API key annk renamed.')
      expect(await record(id)).toMatchObject({ name: 'annk renamed', role_keys: ['it_editor'], owner_user_id: users['editor@acme.test'] })
    })

    it('transfers a key with new roles the new owner has, in one request; without them it is refused, naming the role', async () => {
      const id = await editorKey('handover')
      const form = (await owner.send('GET', `${SETTINGS}?transfer=${id}`)).body
      expect(options(form, 'transfer-roles')).toEqual(['all', 'it_editor (selected)'])
      const token = /name="_csrf" value="([^"]+)"/.exec(form)![1]!
      // The viewer user holds "all" only.
      const refused = await owner.send('POST', `${SETTINGS}/keys/${id}/transfer`, { _csrf: token, owner_user_id: users['viewer@acme.test']!, role_keys: ['it_editor'] })
      expect(refused.statusCode).toBe(303)
      expect(await notice()).toMatch(/does not have the role it_editor/)
      expect(await record(id)).toMatchObject({ owner_user_id: users['editor@acme.test'], role_keys: ['it_editor'] })
      const moved = await owner.send('POST', `${SETTINGS}/keys/${id}/transfer`, {
        _csrf: await owner.csrf(`${SETTINGS}?transfer=${id}`), owner_user_id: users['viewer@acme.test']!, role_keys: ['all'],
      })
      expect(moved.statusCode).toBe(303)
      expect(await notice()).toBe('Transferred the API key handover.')
      expect(await record(id)).toMatchObject({ owner_user_id: users['viewer@acme.test'], role_keys: ['all'] })
    })

    it('offers as new owners the users whose keys would work (enabled, with a sign-in method), and the key\'s own owner', async () => {
      const id = await editorKey('to inactive owners')
      const owners = async () => options((await owner.send('GET', `${SETTINGS}?transfer=${id}`)).body, 'new-owner')
      const before = await owners()
      expect(before).toContain(users['viewer@acme.test'])
      expect(before).toContain(`${users['editor@acme.test']} (selected)`)
      const set = (email: string, sql: string) => t.store.db.query(`UPDATE users SET ${sql} WHERE email = $1`, [email])
      try {
        await set('viewer@acme.test', 'enabled = false')
        await set('editor@acme.test', "sign_in_methods = '{}'")
        expect(await owners()).toEqual(before.filter((o) => o !== users['viewer@acme.test']))
      } finally {
        await set('viewer@acme.test', 'enabled = true')
        await set('editor@acme.test', "sign_in_methods = '{password}'")
      }
      expect(await owners()).toEqual(before)
    })

    it('a refused form comes back with its message and what was typed into it, once (keys, transfer, webhooks)', async () => {
      const follow = async (res: { statusCode: number; headers: Record<string, unknown> }) => {
        expect(res.statusCode).toBe(303)
        return (await owner.send('GET', res.headers.location as string)).body
      }
      const value = (html: string, id: string) => new RegExp(`id="${id}"[^>]*value="([^"]*)"`).exec(html)?.[1]
      const text = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>([^<]*)</textarea>`).exec(html)?.[1]

      // A new key without roles: refused, the name, description and type kept, no role chosen.
      let page = await follow(await owner.send('POST', `${SETTINGS}/keys`, {
        _csrf: await owner.csrf(`${SETTINGS}?new=key`), name: 'nightly <sync>', description: 'typed & kept', permission_type: 'Editor',
      }))
      expect(page).toContain('Roles: choose at least one role.')
      expect(value(page, 'key-name')).toBe('nightly &lt;sync&gt;')
      expect(text(page, 'key-description')).toBe('typed &amp; kept')
      expect(page).toMatch(/<option selected>Editor<\/option>/)
      expect(options(page, 'key-roles').filter((o) => o.endsWith('(selected)'))).toEqual([])
      // Shown once: the form opened again is empty, every role chosen as for any new key.
      page = (await owner.send('GET', `${SETTINGS}?new=key`)).body
      expect(value(page, 'key-name')).toBe('')
      expect(options(page, 'key-roles')).toEqual(['all (selected)', 'it_editor (selected)'])

      // An edit refused: the new name typed is in that key's form.
      const id = await editorKey('kept')
      page = await follow(await owner.send('POST', `${SETTINGS}/keys/${id}`, {
        _csrf: await owner.csrf(`${SETTINGS}?edit=${id}`), name: 'renamed but refused', description: '', permission_type: 'Editor',
      }))
      expect(page).toContain('Roles: choose at least one role.')
      expect(value(page, 'key-name')).toBe('renamed but refused')
      expect((await record(id)).name).toBe('kept')

      // A transfer refused: the new owner and the roles chosen stay chosen.
      page = await follow(await owner.send('POST', `${SETTINGS}/keys/${id}/transfer`, {
        _csrf: await owner.csrf(`${SETTINGS}?transfer=${id}`), owner_user_id: users['viewer@acme.test']!, role_keys: ['it_editor'],
      }))
      expect(page).toMatch(/does not have the role it_editor/)
      expect(new RegExp(`<option value="${users['viewer@acme.test']}" selected>`).test(page)).toBe(true)
      expect(options(page, 'transfer-roles')).toEqual(['all', 'it_editor (selected)'])

      // A webhook refused: its URL, events and description kept.
      page = await follow(await owner.send('POST', `${SETTINGS}/webhooks`, {
        _csrf: await owner.csrf(`${SETTINGS}?new=webhook`), url: 'ftp://hooks.example.com/in', event_types: 'asset.*', description: 'the CMDB',
      }))
      expect(page).toMatch(/class="error" role="alert">[^<]*url/i)
      expect([value(page, 'webhook-url'), value(page, 'webhook-events'), value(page, 'webhook-description')]).toEqual(['ftp://hooks.example.com/in', 'asset.*', 'the CMDB'])
      // The API's limits hold for the form too: a URL over 2,048 characters, a description over 2,000.
      for (const [url, description, message] of [
        [`https://hooks.example.com/${'a'.repeat(3000)}`, '', 'url must be at most 2048 characters'],
        ['https://hooks.example.com/in', 'd'.repeat(2001), 'description must be at most 2000 characters'],
      ] as const) {
        page = await follow(await owner.send('POST', `${SETTINGS}/webhooks`, { _csrf: await owner.csrf(`${SETTINGS}?new=webhook`), url, event_types: '*', description }))
        expect(page).toContain(message)
      }
      expect((await t.request('GET', '/api/v1/webhooks')).body.data).toEqual([])
    })
  })
}
