import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { STORES } from '../helpers/stores.js'
import { Browser, PASSWORD, givenPasswords } from '../helpers/console.js'
import { hashPassword } from '../../src/console/passwords.js'
import { setPasswordFromCli } from '../../src/console/cli.js'

for (const kind of STORES) {
  describe(`${kind}: console sessions, CSRF, throttling`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(kind, undefined, { consoleIdleMinutes: 1 })
      await givenPasswords(t, ['owner@acme.test', 'editor@acme.test'])
    }, 120_000)
    afterAll(async () => t.close())

    it('signs in with email and password: HttpOnly SameSite session cookie, then the pages answer', async () => {
      const b = new Browser(t)
      const res = await b.signIn('owner@acme.test')
      expect(res.statusCode).toBe(303)
      expect(res.headers.location).toBe('/console/assets')
      const cookie = (res.cookies as { name: string; httpOnly?: boolean; sameSite?: string; path?: string; secure?: boolean }[]).find((c) => c.name === 'kbis_console')!
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/console' })
      expect(cookie.secure).toBeFalsy()
      const page = await b.send('GET', '/console/assets')
      expect(page.statusCode).toBe(200)
      expect(page.body).toContain('<h1>Assets</h1>')
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8')
    })

    it('console pages (error pages too) may not be framed and load only what the console serves; API answers carry no such policy', async () => {
      const b = new Browser(t)
      await b.signIn('owner@acme.test')
      for (const [path, status] of [['/console/sign-in', 200], ['/console/assets', 200], ['/console/no-such-page', 404], ['/console/static/no-such-file.js', 404]] as const) {
        const page = await b.send('GET', path)
        expect(page.statusCode).toBe(status)
        // An unknown page or static file: the console's own 404 page.
        if (status === 404) expect([page.headers['content-type'], page.body.includes('There is no such page.')], path).toEqual(['text/html; charset=utf-8', true])
        expect(page.headers['x-frame-options']).toBe('DENY')
        expect(page.headers['content-security-policy']).toBe(
          "default-src 'self';base-uri 'none';form-action 'self';frame-ancestors 'none';object-src 'none';img-src 'self' data:;script-src 'self';style-src 'self'")
        expect(page.headers['x-content-type-options']).toBe('nosniff')
        expect(page.headers['referrer-policy']).toBe('same-origin')
        // Binding the whole host to https for a year is for whoever terminates TLS.
        expect(page.headers['strict-transport-security']).toBeUndefined()
      }
      const api = await t.request('GET', '/api/v1/metamodel/asset-types')
      expect(api.status).toBe(200)
      expect(api.headers['content-security-policy']).toBeUndefined()
    })

    it('sets the Secure flag when the request came over https (through a trusted proxy)', async () => {
      const app2 = await (await import('../../src/app.js')).buildApp({ db: t.store.db, config: (await import('../../src/core/config.js')).loadConfig({}, { trustedProxies: ['127.0.0.1'] }) })
      const b = new Browser({ ...t, app: app2 })
      const res = await b.send('POST', '/console/sign-in', { _csrf: await b.csrf(), email: 'owner@acme.test', password: PASSWORD }, { 'x-forwarded-proto': 'https' })
      const cookie = (res.cookies as { name: string; secure?: boolean }[]).find((c) => c.name === 'kbis_console')!
      expect(cookie.secure).toBe(true)
      await app2.close()
      // Behind a proxy not listed as trusted, an https KBIS_PUBLIC_URL says the same.
      const app3 = await (await import('../../src/app.js')).buildApp({ db: t.store.db, config: (await import('../../src/core/config.js')).loadConfig({ KBIS_PUBLIC_URL: 'https://inventory.example.com' }) })
      const b3 = new Browser({ ...t, app: app3 })
      const form = await b3.send('GET', '/console/sign-in')
      const signedIn = await b3.send('POST', '/console/sign-in', { _csrf: /name="_csrf" value="([^"]+)"/.exec(form.body)![1]!, email: 'owner@acme.test', password: PASSWORD })
      const secure = (cookies: unknown) => (cookies as { name: string; secure?: boolean }[]).map((c) => [c.name, c.secure === true])
      expect([...secure(form.cookies), ...secure(signedIn.cookies)]).toEqual([['kbis_console_csrf', true], ['kbis_console', true]])
      await app3.close()
    })

    it('answers every failure with one message: wrong password, unknown email, no password method, disabled user', async () => {
      const b = new Browser(t, '10.0.0.1')
      await t.store.db.query("UPDATE users SET enabled = false WHERE email = 'editor@acme.test'")
      try {
        for (const [email, password] of [['owner@acme.test', 'wrong password!'], ['nobody@acme.test', PASSWORD], ['viewer@acme.test', PASSWORD], ['editor@acme.test', PASSWORD]] as const) {
          const res = await b.signIn(email, password)
          expect(res.statusCode).toBe(401)
          expect(res.body).toContain('<p class="error" role="alert">Invalid email or password</p>')
          expect(b.cookies.has('kbis_console')).toBe(false)
        }
      } finally {
        await t.store.db.query("UPDATE users SET enabled = true WHERE email = 'editor@acme.test'")
        await t.store.db.query('DELETE FROM console_sign_in_failures')
      }
    })

    it('slows failed sign-ins per email: after 3 failures even the right password is refused for a while (stored in the database)', async () => {
      const b = new Browser(t, '10.0.0.2')
      for (let i = 0; i < 4; i++) expect((await b.signIn('editor@acme.test', `wrong ${i}`)).statusCode).toBe(401)
      expect((await b.signIn('editor@acme.test')).statusCode).toBe(401)
      const rows = (await t.store.db.query<{ subject: string; failures: number; locked: boolean }>(
        'SELECT subject, failures, coalesce(locked_until > now(), false) AS locked FROM console_sign_in_failures ORDER BY subject')).rows
      expect(rows).toEqual([
        { subject: 'email:editor@acme.test', failures: 4, locked: true },
        { subject: 'ip:10.0.0.2', failures: 4, locked: false },
      ])
      // Once the lock has passed, the right password works and clears the email's count.
      await t.store.db.query("UPDATE console_sign_in_failures SET locked_until = now() - interval '1 second'")
      expect((await new Browser(t, '10.0.0.3').signIn('editor@acme.test')).statusCode).toBe(303)
      expect((await t.store.db.query("SELECT 1 FROM console_sign_in_failures WHERE subject LIKE 'email:%'")).rows).toEqual([])
      await t.store.db.query('DELETE FROM console_sign_in_failures')
    })

    it('slows failed sign-ins per address across emails', async () => {
      const b = new Browser(t, '10.0.0.4')
      // 29 failures of other emails counted already (each real attempt costs a scrypt hash).
      await t.store.db.query(
        `INSERT INTO console_sign_in_failures (org_id, subject, failures, last_failure_at)
         VALUES ('00000000-0000-0000-0000-000000000000', 'ip:10.0.0.4', 29, now())`)
      expect((await b.signIn('someone-30@acme.test', 'nope nope nope')).statusCode).toBe(401)
      expect((await b.signIn('owner@acme.test')).statusCode).toBe(303)
      // Further failures lock the address for 2^(failures - 30) seconds: 32 s at the 35th.
      await t.store.db.query("UPDATE console_sign_in_failures SET failures = 34 WHERE subject = 'ip:10.0.0.4'")
      expect((await b.signIn('someone-31@acme.test', 'nope nope nope')).statusCode).toBe(401)
      expect((await t.store.db.query<{ failures: number; locked: boolean }>(
        "SELECT failures, locked_until > now() + interval '20 seconds' AS locked FROM console_sign_in_failures WHERE subject = 'ip:10.0.0.4'")).rows).toEqual([{ failures: 35, locked: true }])
      expect((await b.signIn('owner@acme.test')).statusCode).toBe(401)
      expect((await new Browser(t, '10.0.0.5').signIn('owner@acme.test')).statusCode).toBe(303)
      await t.store.db.query('DELETE FROM console_sign_in_failures')
    }, 120_000)

    it('refuses a state-changing request without the CSRF token (403), also when signed in; accepts the htmx header', async () => {
      const b = new Browser(t)
      expect((await b.send('POST', '/console/sign-in', { email: 'owner@acme.test', password: PASSWORD })).statusCode).toBe(403)
      await b.signIn('owner@acme.test')
      const token = await b.csrf('/console/developer-settings')
      const forged = await b.send('POST', '/console/developer-settings/keys', { name: 'x', permission_type: 'Viewer', role_keys: 'all' })
      expect(forged.statusCode).toBe(403)
      expect(forged.body).toContain('This form has expired or did not come from this console.')
      expect((await b.send('POST', '/console/developer-settings/keys', { _csrf: 'not-a-token', name: 'x', permission_type: 'Viewer', role_keys: 'all' })).statusCode).toBe(403)
      const viaHeader = await b.send('POST', '/console/developer-settings/keys', { name: 'htmx key', permission_type: 'Viewer', role_keys: 'all' }, { 'x-csrf-token': token })
      expect(viaHeader.statusCode).toBe(303)
      const keys = await t.request('GET', '/api/v1/api-keys')
      expect(keys.body.data.map((k: { name: string }) => k.name)).toContain('htmx key')
    })

    it('takes a form token only with the session it was made for (a secret and token planted from another session do not pass)', async () => {
      const attacker = new Browser(t)
      await attacker.signIn('editor@acme.test')
      const planted = await attacker.csrf('/console/developer-settings')
      const victim = new Browser(t)
      await victim.signIn('owner@acme.test')
      // Someone who can set cookies for the host gives the victim their CSRF secret, and a form with their token.
      victim.cookies.set('kbis_console_csrf', attacker.cookies.get('kbis_console_csrf')!)
      const forged = await victim.send('POST', '/console/developer-settings/keys', { _csrf: planted, name: 'planted', permission_type: 'Viewer', role_keys: 'all' })
      expect(forged.statusCode).toBe(403)
      expect(forged.body).toContain('This form has expired or did not come from this console.')
      // The victim's own page, made with that secret for the victim's session, works.
      const own = await victim.csrf('/console/developer-settings')
      expect((await victim.send('POST', '/console/developer-settings/keys', { _csrf: own, name: 'own', permission_type: 'Viewer', role_keys: 'all' })).statusCode).toBe(303)
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.map((k: { name: string }) => k.name)).toEqual(expect.arrayContaining(['own']))
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.map((k: { name: string }) => k.name)).not.toContain('planted')
    })

    it('signs out: the session is gone from the database', async () => {
      const b = new Browser(t)
      await b.signIn('owner@acme.test')
      const token = await b.csrf('/console/assets')
      const before = (await t.store.db.query('SELECT count(*)::int AS n FROM console_sessions')).rows[0] as { n: number }
      expect((await b.send('POST', '/console/sign-out', { _csrf: token })).headers.location).toBe('/console/sign-in')
      expect(((await t.store.db.query('SELECT count(*)::int AS n FROM console_sessions')).rows[0] as { n: number }).n).toBe(before.n - 1)
      expect((await b.send('GET', '/console/assets')).headers.location).toBe('/console/sign-in')
    })

    it('ends a session idle longer than KBIS_CONSOLE_IDLE_MINUTES', async () => {
      const b = new Browser(t)
      await b.signIn('owner@acme.test')
      expect((await b.send('GET', '/console/assets')).statusCode).toBe(200)
      const token = await b.csrf('/console/developer-settings')
      await t.store.db.query("UPDATE console_sessions SET last_seen_at = now() - interval '61 seconds'")
      // A form sent after the session ended goes to sign-in, whether it carries its token or not.
      const sent = await b.send('POST', '/console/developer-settings/keys', { name: 'late', permission_type: 'Viewer', role_keys: 'all' })
      expect([sent.statusCode, sent.headers.location]).toEqual([303, '/console/sign-in'])
      await b.signIn('owner@acme.test')
      await t.store.db.query("UPDATE console_sessions SET last_seen_at = now() - interval '61 seconds'")
      const withToken = await b.send('POST', '/console/developer-settings/keys', { _csrf: token, name: 'late', permission_type: 'Viewer', role_keys: 'all' })
      expect([withToken.statusCode, withToken.headers.location]).toEqual([303, '/console/sign-in'])
      const res = await b.send('GET', '/console/assets')
      expect(res.statusCode).toBe(303)
      expect(res.headers.location).toBe('/console/sign-in')
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.map((k: { name: string }) => k.name)).not.toContain('late')
    })

    it('ends the user\'s sessions when the password is set again, and a disabled user\'s for good (enabled again, the old cookie stays dead)', async () => {
      const sessions = async () => (await t.store.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM console_sessions s JOIN users u ON u.org_id = s.org_id AND u.id = s.user_id WHERE u.email = 'editor@acme.test'`)).rows[0]!.n
      const b = new Browser(t)
      await b.signIn('editor@acme.test')
      expect((await b.send('GET', '/console/assets')).statusCode).toBe(200)
      const before = await sessions()
      expect(before).toBeGreaterThanOrEqual(1)
      const set = await setPasswordFromCli(t.store.db, { org: 'acme', email: 'editor@acme.test', hash: await hashPassword(PASSWORD) })
      expect([set.sessions_ended, await sessions()]).toEqual([before, 0])
      expect((await b.send('GET', '/console/assets')).headers.location).toBe('/console/sign-in')

      await b.signIn('editor@acme.test')
      const kept = new Map(b.cookies)
      // kbis apply disables the user, then enables them again.
      await t.store.db.query("UPDATE users SET enabled = false WHERE email = 'editor@acme.test'")
      expect((await b.send('GET', '/console/assets')).headers.location).toBe('/console/sign-in')
      expect(await sessions()).toBe(0)
      await t.store.db.query("UPDATE users SET enabled = true WHERE email = 'editor@acme.test'")
      b.cookies = kept
      expect((await b.send('GET', '/console/assets')).headers.location).toBe('/console/sign-in')
      expect((await b.signIn('editor@acme.test')).headers.location).toBe('/console/assets')
    })

    it('leaves the session cookie alone when a request comes without it (a form posted from another site), and sends htmx to sign in', async () => {
      const b = new Browser(t)
      const token = await b.csrf()
      // The CSRF cookie is Lax, as the session's: a link followed from another site brings it.
      const csrfCookie = (await t.app.inject({ method: 'GET', url: '/console/sign-in' })).cookies as { name: string; sameSite?: string }[]
      expect(csrfCookie.filter((c) => c.name === 'kbis_console_csrf').map((c) => c.sameSite)).toEqual(['Lax'])
      await b.signIn('owner@acme.test')
      // What a browser sends for a form posted from another site: neither Lax cookie.
      const crossSite = await t.app.inject({ method: 'POST', url: '/console/sign-out', payload: `_csrf=${token}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
      expect([crossSite.statusCode, crossSite.headers.location, crossSite.headers['set-cookie']]).toEqual([303, '/console/sign-in', undefined])
      expect((await b.send('GET', '/console/assets')).statusCode).toBe(200)
      // A stale cookie is cleared; an htmx request is told where to go rather than given the sign-in page to swap in.
      const stale = new Browser(t)
      stale.cookies.set('kbis_console', b.cookies.get('kbis_console')!.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')))
      const htmx = await stale.send('GET', '/console/assets?name=x', undefined, { 'hx-request': 'true' })
      expect([htmx.statusCode, htmx.headers['hx-redirect'], htmx.headers.location, htmx.body]).toEqual([401, '/console/sign-in', undefined, ''])
      expect(stale.cookies.has('kbis_console')).toBe(false)
    })

    it('asks for the organization when the email and password match accounts in several', async () => {
      const { applySetup } = await import('../../src/setup/apply.js')
      await applySetup(t.store.db, {
        organization: { key: 'beta', name: 'Beta' },
        roles: [{ key: 'all', name: 'All', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'view' }] }],
        users: [{ email: 'owner@acme.test', name: 'Owner', permission_type: 'Viewer', role_keys: ['all'], sign_in_methods: ['password'] }],
      } as never)
      await givenPasswords(t, ['owner@acme.test'], 'beta')
      const b = new Browser(t, '10.0.0.9')
      const asked = await b.signIn('owner@acme.test')
      expect(asked.statusCode).toBe(200)
      expect(asked.body).toContain('<label for="organization">Organization</label>')
      expect(asked.body).toContain('<option value="acme">Acme (acme)</option><option value="beta">Beta (beta)</option>')
      const res = await b.send('POST', '/console/sign-in', { _csrf: await b.csrf(), email: 'owner@acme.test', password: PASSWORD, organization: 'beta' })
      expect(res.statusCode).toBe(303)
      expect((await b.send('GET', '/console/assets')).body).toContain('owner@acme.test (Viewer)')
      // Failures of this email count in both organizations; a sign-in clears both counts, so one
      // typo right after it does not lock the email again.
      const other = new Browser(t, '10.0.0.10')
      for (let i = 0; i < 3; i++) expect((await other.signIn('owner@acme.test', `wrong ${i}`)).statusCode).toBe(401)
      const counts = async () => (await t.store.db.query<{ failures: number }>(
        "SELECT failures FROM console_sign_in_failures WHERE subject = 'email:owner@acme.test' ORDER BY org_id")).rows.map((r) => r.failures)
      expect(await counts()).toEqual([3, 3])
      expect((await other.send('POST', '/console/sign-in', { _csrf: await other.csrf(), email: 'owner@acme.test', password: PASSWORD, organization: 'acme' })).statusCode).toBe(303)
      expect(await counts()).toEqual([])
      await t.store.db.query('DELETE FROM console_sign_in_failures')
    })

    it('signs in the user with exactly the email typed when two users of one organization differ only by case', async () => {
      const { applySetup } = await import('../../src/setup/apply.js')
      await applySetup(t.store.db, {
        organization: { key: 'gamma', name: 'Gamma' },
        roles: [{ key: 'all', name: 'All', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'view' }] }],
        users: ['Case@gamma.test', 'case@gamma.test'].map((email) => ({ email, name: email, permission_type: 'Viewer', role_keys: ['all'], sign_in_methods: ['password'] })),
      } as never)
      await givenPasswords(t, ['Case@gamma.test', 'case@gamma.test'], 'gamma')
      for (const email of ['case@gamma.test', 'Case@gamma.test']) {
        const b = new Browser(t, '10.0.0.11')
        const res = await b.signIn(email)
        expect(res.statusCode, email).toBe(303)
        expect((await b.send('GET', '/console/assets')).body).toContain(`${email} (Viewer)`)
      }
      // Neither written so: which one is meant cannot be told.
      const b = new Browser(t, '10.0.0.11')
      expect((await b.signIn('CASE@gamma.test')).statusCode).toBe(401)
    })

    it('keeps a new key\'s secret for Developer settings when another page (another tab, an htmx search) loads first', async () => {
      const b = new Browser(t, '10.0.0.12')
      expect((await b.signIn('editor@acme.test')).statusCode).toBe(303)
      const created = await b.send('POST', '/console/developer-settings/keys', {
        _csrf: await b.csrf('/console/developer-settings'), name: 'two tabs', description: '', permission_type: 'Viewer', role_keys: 'it_editor',
      })
      expect(created.statusCode).toBe(303)
      // Waiting, it is sealed with the session's token, which the row does not hold (CONTRACT §9).
      const rows = await t.store.db.query<{ flash: string }>(`SELECT flash::text AS flash FROM console_sessions WHERE flash IS NOT NULL`)
      expect(rows.rows.length).toBeGreaterThan(0)
      for (const row of rows.rows) expect(row.flash).not.toMatch(/kbis_[A-Za-z0-9]/)
      const search = await b.send('GET', '/console/assets?name=x', undefined, { 'hx-request': 'true' })
      const other = await b.send('GET', '/console/archived')
      for (const page of [search, other]) expect(page.body).not.toMatch(/kbis_[A-Za-z0-9]/)
      const settings = await b.send('GET', '/console/developer-settings')
      const secret = /id="new-secret" type="text" readonly value="(kbis_[^"]+)"/.exec(settings.body)?.[1]
      expect(secret).toMatch(/^kbis_/)
      // The message went to the first page that showed one: the secret says whose it is.
      expect(settings.body).toContain('<label for="new-secret">Secret</label>\n    <p class="hint" id="new-secret-of">Of the API key two tabs</p>')
      expect((await t.request('GET', '/api/v1/metamodel/asset-types', { key: secret! })).status).toBe(200)
      // Shown once.
      expect((await b.send('GET', '/console/developer-settings')).body).not.toContain(secret!)
    })

    it('shows every secret made before Developer settings loaded: two keys from two tabs, then a refused form, lose none', async () => {
      const b = new Browser(t, '10.0.0.12')
      expect((await b.signIn('editor@acme.test')).statusCode).toBe(303)
      const csrf = await b.csrf('/console/developer-settings')
      for (const name of ['tab one', 'tab two']) {
        const created = await b.send('POST', '/console/developer-settings/keys', { _csrf: csrf, name, description: '', permission_type: 'Viewer', role_keys: 'it_editor' })
        expect(created.statusCode, name).toBe(303)
      }
      // A third tab's form is refused (no role): its message replaces the others', not their secrets.
      const refused = await b.send('POST', '/console/developer-settings/keys', { _csrf: csrf, name: 'tab three', description: '', permission_type: 'Viewer' })
      expect(refused.statusCode).toBe(303)
      // A page that shows messages takes the message and leaves the secrets waiting.
      const other = (await b.send('GET', '/console/archived')).body
      expect(other).toMatch(/<p class="error" role="alert">[^<]+<\/p>/)
      expect(other).not.toMatch(/kbis_[A-Za-z0-9]/)
      const settings = (await b.send('GET', '/console/developer-settings')).body
      expect(settings).not.toMatch(/<p class="error" role="alert">/)
      const shown = [...settings.matchAll(/<label for="(new-secret(?:-\d)?)">Secret<\/label>\s*<p class="hint" id="\1-of">Of the API key ([^<]+)<\/p>\s*<div class="row">\s*<input id="\1" type="text" readonly value="(kbis_[^"]+)" class="mono" aria-describedby="\1-of secret-hint">/g)]
        .map((m) => ({ id: m[1], of: m[2], secret: m[3]! }))
      expect(shown.map(({ id, of }) => ({ id, of }))).toEqual([{ id: 'new-secret', of: 'tab one' }, { id: 'new-secret-2', of: 'tab two' }])
      const keys = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data as { name: string; secret_prefix: string }[]
      for (const { of, secret } of shown) {
        expect(keys.find((k) => secret.startsWith(k.secret_prefix))?.name, of).toBe(of)
        expect((await t.request('GET', '/api/v1/metamodel/asset-types', { key: secret })).status, of).toBe(200)
      }
      // Shown once.
      const again = (await b.send('GET', '/console/developer-settings')).body
      for (const { secret } of shown) expect(again).not.toContain(secret)
    })

    it('answers forged key actions the page does not offer with the 403 page (a Viewer creating or changing a key, an Editor transferring its own), and the 404 page for a key the user may not see (an Editor transferring another user\'s)', async () => {
      await givenPasswords(t, ['viewer@acme.test'])
      const viewer = new Browser(t, '10.0.0.13')
      expect((await viewer.signIn('viewer@acme.test')).statusCode).toBe(303)
      const own = (await t.request('GET', '/api/v1/api-keys')).body.data[0].id as string
      const editor = new Browser(t, '10.0.0.13')
      expect((await editor.signIn('editor@acme.test')).statusCode).toBe(303)
      const editorKey = (await editor.send('POST', '/console/developer-settings/keys', {
        _csrf: await editor.csrf('/console/developer-settings'), name: 'editor own', description: '', permission_type: 'Viewer', role_keys: 'it_editor',
      }))
      expect(editorKey.statusCode).toBe(303)
      const keysBefore = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data as { id: string; name: string; owner_user_id: string }[]
      const editorOwn = keysBefore.find((k) => k.name === 'editor own')!.id
      for (const [b, url, form, status] of [
        [viewer, '/console/developer-settings/keys', { name: 'v', description: '', permission_type: 'Viewer', role_keys: 'all' }, 403],
        [viewer, `/console/developer-settings/keys/${own}`, { name: 'renamed', description: '', permission_type: 'Viewer', role_keys: 'all' }, 403],
        [editor, `/console/developer-settings/keys/${editorOwn}/transfer`, { owner_user_id: own, role_keys: 'it_editor' }, 403],
        // Another user's key, or none at all: not found, as the API answers (CONTRACT §1: never reveal existence).
        [editor, `/console/developer-settings/keys/${own}/transfer`, { owner_user_id: own, role_keys: 'it_editor' }, 404],
        [editor, '/console/developer-settings/keys/01a22995-0000-7000-8000-000000000000/transfer', { owner_user_id: own, role_keys: 'it_editor' }, 404],
      ] as const) {
        const res = await b.send('POST', url, { _csrf: await b.csrf('/console/developer-settings'), ...form })
        expect(res.statusCode, url).toBe(status)
        expect(res.body, url).toContain(status === 403 ? '<h1>Not allowed</h1>' : '<h1>Not found</h1>')
      }
      const owners = (keys: { id: string; name: string; owner_user_id: string }[]) => keys.map(({ id, name, owner_user_id }) => ({ id, name, owner_user_id }))
      expect(owners((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data)).toEqual(owners(keysBefore))
    })

    it('answers a URL with a NUL or an escape that is not UTF-8 with a 400 page, not a 500', async () => {
      for (const url of ['/console/sign-in?x=%00', '/console/archived?name=%00', '/console/sign-in?x=%ff', '/console/assets/%00', '/console/archived/%ff/delete', '/console/assets/%e2%82']) {
        const res = await t.app.inject({ method: 'GET', url })
        expect(res.statusCode, url).toBe(400)
        expect(res.headers['content-type'], url).toBe('text/html; charset=utf-8')
        expect(res.body, url).toContain('<h1>Error</h1>')
        // Refused before any page ran, the error page still has the console's browser hardening.
        expect(res.headers['content-security-policy'], url).toContain("frame-ancestors 'none'")
        expect(res.headers['x-frame-options'], url).toBe('DENY')
      }
    })

    it('answers a path segment longer than any id with the console\'s 404 page, as any unknown console path', async () => {
      const res = await t.app.inject({ method: 'GET', url: `/console/archived/${'x'.repeat(9000)}/delete` })
      expect([res.statusCode, res.headers['content-type'], res.headers['x-frame-options']]).toEqual([404, 'text/html; charset=utf-8', 'DENY'])
      expect(res.body).toContain('<h1>Not found</h1>')
      expect(res.body).toContain('There is no such page.')
    })

    it('redirects to sign-in without a session, and keeps /api/v1 free of console routes', async () => {
      expect((await new Browser(t).send('GET', '/console/archived')).headers.location).toBe('/console/sign-in?next=%2Fconsole%2Farchived')
      expect((await t.request('POST', '/api/v1/assets/x/restore')).status).toBe(404)
    })

    it('leads back, once signed in, to the page asked for, or the page a form or an htmx request came from; never off the console', async () => {
      const b = new Browser(t)
      const asked = await b.send('GET', '/console/archived?type=server&name=web')
      expect([asked.statusCode, asked.headers.location]).toEqual([303, '/console/sign-in?next=%2Fconsole%2Farchived%3Ftype%3Dserver%26name%3Dweb'])
      const form = await b.send('GET', asked.headers.location as string)
      expect(form.body).toContain('<input type="hidden" name="next" value="/console/archived?type=server&amp;name=web">')
      const token = /name="_csrf" value="([^"]+)"/.exec(form.body)![1]!
      // A wrong password keeps where to go (the owner's email is in two organizations by now).
      const failed = await b.send('POST', '/console/sign-in', { _csrf: token, email: 'owner@acme.test', password: 'wrong password!', organization: 'acme', next: '/console/archived?type=server&name=web' })
      expect([failed.statusCode, failed.body.includes('name="next" value="/console/archived?type=server&amp;name=web"')]).toEqual([401, true])
      const signedIn = await b.send('POST', '/console/sign-in', { _csrf: token, email: 'owner@acme.test', password: PASSWORD, organization: 'acme', next: '/console/archived?type=server&name=web' })
      expect([signedIn.statusCode, signedIn.headers.location]).toEqual([303, '/console/archived?type=server&name=web'])
      expect((await b.send('GET', signedIn.headers.location as string)).body).toContain('<h1>Archived assets</h1>')
      // Another site, the API, a scheme-relative address: the assets.
      for (const next of ['https://evil.example/', '//evil.example/console/assets', '/api/v1/api-keys', '/console/sign-out']) {
        const other = new Browser(t)
        const res = await other.send('POST', '/console/sign-in', { _csrf: await other.csrf(), email: 'owner@acme.test', password: PASSWORD, organization: 'acme', next })
        expect(res.headers.location, next).toBe('/console/assets')
      }
      expect((await new Browser(t).send('GET', '/console/sign-in?next=https%3A%2F%2Fevil.example%2F')).body).not.toContain('name="next"')
      // A form sent after the session ended: back to the page it came from (its Referer).
      const ended = new Browser(t)
      const late = await ended.send('POST', '/console/developer-settings/keys', { name: 'late' }, { referer: 'http://localhost/console/developer-settings?new=key' })
      expect(late.headers.location).toBe('/console/sign-in?next=%2Fconsole%2Fdeveloper-settings%3Fnew%3Dkey')
      // htmx: the page it updates (HX-Current-URL).
      const htmx = await ended.send('GET', '/console/assets?name=x', undefined, { 'hx-request': 'true', 'hx-current-url': 'http://localhost/console/assets?name=web&type=server' })
      expect([htmx.statusCode, htmx.headers['hx-redirect']]).toEqual([401, '/console/sign-in?next=%2Fconsole%2Fassets%3Fname%3Dweb%26type%3Dserver'])
    })
  })
}
