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
  })
}
