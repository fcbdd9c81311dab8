import { createRequire } from 'node:module'
import { mkdirSync, readFileSync } from 'node:fs'
import http from 'node:http'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { STORES } from '../helpers/stores.js'
import { PASSWORD, givenPasswords } from '../helpers/console.js'
import { eventually } from '../helpers/webhook-receiver.js'

/*
 * The console in a real browser (CONTRACT §15): Debian's Chromium driven by playwright-core, only
 * through roles and accessible names, every effect checked through the API. KBIS_SCREENSHOTS=1
 * saves one screenshot per page to docs/screenshots/ (on the first store).
 */

const require = createRequire(import.meta.url)
// Evaluated through the DevTools protocol, which the console's Content-Security-Policy does not
// govern (a script tag would be refused: scripts come from the console only).
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')
const SHOTS = process.env.KBIS_SCREENSHOTS === '1'

const LAUNCH = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
}

/** axe-core on the page as it is: no serious or critical violation. */
async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE)
  const violations = await page.evaluate(async () => {
    const result = await (window as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe.run()
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) }))
  })
  expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([])
}

for (const [index, kind] of STORES.entries()) {
  describe(`${kind}: the console in Chromium`, { timeout: 180_000 }, () => {
    let t: TestApp
    let browser: Browser
    let base: string
    const shot = async (page: Page, name: string) => {
      if (!SHOTS || index !== 0) return
      mkdirSync('docs/screenshots', { recursive: true })
      await page.screenshot({ path: `docs/screenshots/${name}.png`, fullPage: true })
    }
    // Every page of every test is watched: a script error, or anything the console's
    // Content-Security-Policy refuses (a style, a script, a form target), fails the test.
    const refused: string[] = []
    const newPage = async (): Promise<Page> => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
      const page = await context.newPage()
      page.on('console', (message) => {
        if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) refused.push(message.text())
      })
      page.on('pageerror', (err) => refused.push(`script error: ${err.message}`))
      // Nothing a page loads by itself (styles, scripts, the browser's request for its icon) is
      // missing: Chromium reports such a load as a console error (the icon's to no other event).
      page.on('console', (message) => {
        if (message.type() === 'error' && /Failed to load resource/.test(message.text())) failedLoads.push(message.location().url)
      })
      return page
    }
    const failedLoads: string[] = []
    afterEach(() => {
      expect(refused.splice(0)).toEqual([])
      // Answers with an error status on purpose (a failed sign-in, forged requests) are not loads of this kind.
      expect(failedLoads.splice(0).filter((url) => /\/favicon\.ico$|\/console\/static\//.test(url))).toEqual([])
    })
    const signIn = async (email: string): Promise<Page> => {
      const page = await newPage()
      await page.goto(`${base}/console`)
      await page.getByLabel('Email').fill(email)
      await page.getByLabel('Password').fill(PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.getByRole('heading', { name: 'Assets', exact: true }).waitFor()
      return page
    }
    const archive = async (id: string) => expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
    const create = async (body: unknown) => {
      const res = await t.request('POST', '/api/v1/assets', { body })
      expect(res.status).toBe(201)
      return res.body.data.id as string
    }
    const archivedRow = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) })

    beforeAll(async () => {
      t = await createTestApp(kind, undefined, { webhookAllowPrivate: true, webhookPollMs: 100 })
      await givenPasswords(t, ['owner@acme.test', 'editor@acme.test', 'viewer@acme.test'])
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`
      browser = await chromium.launch(LAUNCH)
    }, 180_000)
    afterAll(async () => {
      await browser?.close()
      await t?.close()
    })

    it('signs in; a wrong password gets the one failure message; every page passes axe-core', async () => {
      const page = await newPage()
      const response = await page.goto(`${base}/console`)
      // The pages may not be framed, and load only what the console serves (docs/console.md).
      const headers = response!.headers()
      expect(headers['x-frame-options']).toBe('DENY')
      expect(headers['content-security-policy']).toContain("frame-ancestors 'none'")
      expect(headers['content-security-policy']).toContain("script-src 'self'")
      await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true)
      await expectAccessible(page)
      await shot(page, 'sign-in')
      await page.getByLabel('Email').fill('owner@acme.test')
      await page.getByLabel('Password').fill('not the password')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await expect(page.getByRole('alert').textContent()).resolves.toBe('Invalid email or password')
      await page.getByLabel('Password').fill(PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.getByRole('heading', { name: 'Assets', exact: true }).waitFor()
      for (const name of ['Assets', 'Archived assets', 'Developer settings']) {
        await expect(page.getByRole('link', { name, exact: true }).isVisible()).resolves.toBe(true)
      }
      await expect(page.getByRole('button', { name: 'Sign out' }).isVisible()).resolves.toBe(true)
      await page.context().close()
    })

    it('sends a search typed after the session ended to the sign-in page, rather than putting that page into the results, and signing in leads back to a page asked for', async () => {
      const page = await signIn('viewer@acme.test')
      await t.store.db.query(`DELETE FROM console_sessions WHERE user_id = (SELECT id FROM users WHERE email = 'viewer@acme.test')`)
      await page.getByLabel('Name').fill('web')
      await page.waitForURL(`${base}/console/sign-in`)
      await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true)
      await expect(page.locator('main').count()).resolves.toBe(1)
      // A page asked for after the session ended: signing in leads back to it, its filters kept.
      await t.store.db.query(`DELETE FROM console_sessions WHERE user_id = (SELECT id FROM users WHERE email = 'viewer@acme.test')`)
      await page.goto(`${base}/console/archived?name=web`)
      await page.getByLabel('Email').fill('viewer@acme.test')
      await page.getByLabel('Password').fill(PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(`${base}/console/archived?name=web`)
      await expect(page.getByRole('heading', { name: 'Archived assets' }).isVisible()).resolves.toBe(true)
      await expect(page.getByLabel('Name').inputValue()).resolves.toBe('web')
      await page.context().close()
    })

    it('searches assets by name and type and shows an asset with properties, relationships and history', async () => {
      const server = await create({ asset_type_key: 'server', name: 'web-01', access_domain_key: 'it', properties: { hostname: 'web-01', environment: 'prod', cpu_count: 8, tags: ['pci'] } })
      await create({ asset_type_key: 'server', name: 'db-01', properties: { hostname: 'db-01' } })
      await create({ asset_type_key: 'application', name: 'Shop', properties: { code: 'shop' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: server }] } } } })
      const page = await signIn('owner@acme.test')
      // The live region is the page's own: a search replaces what is inside it (read out), not the region.
      await page.evaluate(() => { document.querySelector<HTMLElement>('#results')!.dataset.kept = 'yes' })
      await page.getByLabel('Name').fill('web')
      await page.getByLabel('Type').selectOption('server')
      // htmx replaces the results as one types, without leaving the page.
      await page.waitForFunction(() => [...document.querySelectorAll('#results tbody a')].map((a) => a.textContent).join() === 'web-01')
      await expect(page.evaluate(() => [...document.querySelectorAll('[aria-live]#results')].map((e) => (e as HTMLElement).dataset.kept))).resolves.toEqual(['yes'])
      expect(page.url()).toBe(`${base}/console/assets`)
      await page.getByRole('button', { name: 'Search' }).click()
      await page.waitForURL(/name=web/)
      await expect(page.getByRole('table').getByRole('link').allTextContents()).resolves.toEqual(['web-01'])
      await expectAccessible(page)
      await shot(page, 'assets')
      await page.getByRole('link', { name: 'web-01' }).click()
      await page.getByRole('heading', { name: 'web-01' }).waitFor()
      await expect(page.getByRole('row', { name: /environment/i }).textContent()).resolves.toContain('prod')
      await expect(page.getByRole('region', { name: 'Relationships' }).getByRole('link', { name: 'Shop' }).isVisible()).resolves.toBe(true)
      await expect(page.getByRole('heading', { name: 'History' }).isVisible()).resolves.toBe(true)
      // The history names the other end of a relationship event and links to it.
      const linked = page.getByRole('region', { name: 'History' }).getByRole('row', { name: /relationship\.created/ })
      await expect(linked.textContent()).resolves.toContain('runs_on ←')
      await expect(linked.getByRole('link', { name: 'Shop' }).getAttribute('href')).resolves.toMatch(/^\/console\/assets\/[0-9a-f-]{36}$/)
      await expectAccessible(page)
      await shot(page, 'asset')
      await page.context().close()
    })

    it('wraps a long name without a break point instead of widening the pages (lists, the asset, archived)', async () => {
      const name = 'Z'.repeat(400)
      const id = await create({ asset_type_key: 'note', name, properties: { body: 'long' } })
      const archived = await create({ asset_type_key: 'note', name: `${name}-archived`, properties: { body: 'long' } })
      expect((await t.request('DELETE', `/api/v1/assets/${archived}`)).status).toBe(204)
      const page = await signIn('owner@acme.test')
      await page.setViewportSize({ width: 1280, height: 900 })
      for (const path of ['/console/assets?type=note', `/console/assets/${id}`, '/console/archived?type=note']) {
        await page.goto(`${base}${path}`)
        const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth])
        expect(widths[0], path).toBeLessThanOrEqual(widths[1]!)
      }
      await page.context().close()
    })

    it('restores an archived asset with its relationships (the API answers 200), and refuses a restore whose unique value is taken, naming it', async () => {
      const server = await create({ asset_type_key: 'server', name: 'app-01', properties: { hostname: 'app-01' } })
      const app = await create({ asset_type_key: 'application', name: 'Billing', properties: { code: 'billing' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: server }] } } } })
      const rel = (await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${app}`)).body.data[0].id as string
      await archive(server)
      expect((await t.request('GET', `/api/v1/relationships/${rel}`)).status).toBe(404)
      const taken = await create({ asset_type_key: 'server', name: 'old-mail', properties: { hostname: 'mail-01' } })
      await archive(taken)
      await create({ asset_type_key: 'server', name: 'new-mail', properties: { hostname: 'mail-01' } })

      const page = await signIn('owner@acme.test')
      await page.getByRole('link', { name: 'Archived assets', exact: true }).click()
      await page.getByRole('heading', { name: 'Archived assets' }).waitFor()
      await expect(archivedRow(page, 'app-01').isVisible()).resolves.toBe(true)
      await expectAccessible(page)
      await shot(page, 'archived-assets')
      await archivedRow(page, 'app-01').getByRole('button', { name: 'Restore' }).click()
      await expect(page.getByRole('status').textContent()).resolves.toBe('Restored app-01 with 1 relationship.')
      expect((await t.request('GET', `/api/v1/assets/${server}`)).status).toBe(200)
      expect((await t.request('GET', `/api/v1/relationships/${rel}`)).status).toBe(200)
      expect((await t.request('GET', '/api/v1/assets?filter[asset_type_key]=server&filter[name]=app-01')).body.meta.page.total_items).toBe(1)

      // Filters, then the conflict.
      await page.getByLabel('Type').selectOption('server')
      await page.getByLabel('Name').fill('mail')
      await page.getByRole('button', { name: 'Filter' }).click()
      await page.waitForURL(/name=mail/)
      await archivedRow(page, 'old-mail').getByRole('button', { name: 'Restore' }).click()
      const alert = await page.getByRole('alert').textContent()
      expect(alert).toBe('old-mail cannot be restored: a live server asset now holds the hostname value "mail-01"')
      await expectAccessible(page)
      await shot(page, 'restore-conflict')
      expect((await t.request('GET', `/api/v1/assets/${taken}`)).status).toBe(404)
      await page.context().close()
    })

    it('deletes permanently after the name is typed: a wrong name is refused; the asset and its relationships are gone for good', async () => {
      const server = await create({ asset_type_key: 'server', name: 'tmp-01', properties: { hostname: 'tmp-01' } })
      const app = await create({ asset_type_key: 'application', name: 'Temp app', properties: { code: 'temp' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: server }] } } } })
      const rel = (await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${app}`)).body.data[0].id as string
      await archive(server)
      const page = await signIn('owner@acme.test')
      await page.goto(`${base}/console/archived`)
      await archivedRow(page, 'tmp-01').getByRole('button', { name: 'Delete permanently' }).click()
      await page.getByLabel('Confirm name').fill('tmp-02')
      await expectAccessible(page)
      await page.getByRole('button', { name: 'Delete permanently' }).click()
      await expect(page.getByRole('alert').textContent()).resolves.toBe("The name you typed does not match. Type the asset's name exactly to delete it.")
      expect((await t.store.db.query('SELECT 1 FROM assets WHERE id = $1', [server])).rows).toHaveLength(1)
      await page.getByLabel('Confirm name').fill('tmp-01')
      await page.getByRole('button', { name: 'Delete permanently' }).click()
      await expect(page.getByRole('status').textContent()).resolves.toBe('Deleted tmp-01 permanently, with 1 relationship.')
      await expect(archivedRow(page, 'tmp-01').count()).resolves.toBe(0)
      expect((await t.request('GET', `/api/v1/relationships/${rel}`)).status).toBe(404)
      expect((await t.request('GET', `/api/v1/assets/${app}?include=relationships`)).body.data.relationships).toEqual([])
      // The same hostname can now be created and the old relationship does not come back with it.
      const again = await create({ asset_type_key: 'server', name: 'tmp-01', properties: { hostname: 'tmp-01' } })
      expect((await t.request('GET', `/api/v1/relationships?filter[target_asset_id]=${again}`)).body.data).toEqual([])
      expect((await t.store.db.query('SELECT 1 FROM assets WHERE id = $1 UNION ALL SELECT 1 FROM relationships WHERE id = $2', [server, rel])).rows).toEqual([])
      await page.context().close()
    })

    it('creates an API key that works against the API; its secret is gone after a reload', async () => {
      const page = await signIn('owner@acme.test')
      await page.getByRole('link', { name: 'Developer settings' }).click()
      await page.getByRole('heading', { name: 'Developer settings' }).waitFor()
      await expectAccessible(page)
      await page.getByRole('button', { name: 'Create API key' }).click()
      await page.getByLabel('Name').fill('nightly sync')
      await page.getByLabel('Description').fill('CMDB import')
      await page.getByLabel('Permission type').selectOption('Editor')
      await page.getByLabel('Roles').selectOption(['all'])
      await expectAccessible(page)
      await page.getByRole('button', { name: 'Create', exact: true }).click()
      const secret = await page.getByLabel('Secret', { exact: true }).inputValue()
      expect(secret).toMatch(/^kbis_/)
      await expect(page.getByRole('button', { name: 'Copy' }).isVisible()).resolves.toBe(true)
      await expectAccessible(page)
      await shot(page, 'developer-settings')
      // Copying says so beside the button, which keeps its name (CONTRACT §15: a "Copy" button).
      await page.getByRole('button', { name: 'Copy' }).click()
      await page.getByText('Copied', { exact: true }).waitFor()
      await expect(page.getByRole('button', { name: 'Copy', exact: true }).count()).resolves.toBe(1)
      await page.getByRole('button', { name: 'Copy', exact: true }).click()
      await expect(page.getByText('Copied', { exact: true }).count()).resolves.toBe(1)
      await expectAccessible(page)
      const res = await t.request('POST', '/api/v1/assets', { key: secret, body: { asset_type_key: 'note', name: 'made by the console key' } })
      expect(res.status).toBe(201)
      const listed = (await t.request('GET', '/api/v1/api-keys')).body.data.find((k: { name: string }) => k.name === 'nightly sync')
      expect(listed).toMatchObject({ description: 'CMDB import', permission_type: 'Editor', role_keys: ['all'] })
      await page.reload()
      await expect(page.getByLabel('Secret', { exact: true }).count()).resolves.toBe(0)
      expect(await page.content()).not.toContain(secret)

      // Edit, then delete: the key stops working.
      const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'nightly sync' }) })
      await row.getByRole('button', { name: 'Edit' }).click()
      await page.getByLabel('Name').fill('nightly sync v2')
      await page.getByLabel('Permission type').selectOption('Viewer')
      await page.getByRole('button', { name: 'Save' }).click()
      await expect(page.getByRole('status').textContent()).resolves.toBe('Saved the API key nightly sync v2.')
      expect((await t.request('GET', `/api/v1/api-keys/${listed.id}`)).body.data).toMatchObject({ name: 'nightly sync v2', permission_type: 'Viewer' })
      const row2 = page.getByRole('row').filter({ has: page.getByRole('cell', { name: /nightly sync v2/ }) })
      await row2.getByRole('button', { name: 'Delete' }).click()
      await expect(page.getByRole('status').textContent()).resolves.toBe('Deleted the API key.')
      expect((await t.request('GET', '/api/v1/assets', { key: secret })).status).toBe(401)
      await page.context().close()
    })

    it('transfers a key to another user (Admin); an editor sees only their own keys', async () => {
      const owner = await signIn('owner@acme.test')
      await owner.goto(`${base}/console/developer-settings?new=key`)
      await owner.getByLabel('Name').fill('handover')
      await owner.getByLabel('Roles').selectOption(['it_editor'])
      await owner.getByRole('button', { name: 'Create', exact: true }).click()
      // The answer (the secret, once) has arrived before the reload: no navigation is in flight.
      await owner.getByLabel('Secret', { exact: true }).waitFor()
      await owner.reload()
      const row = owner.getByRole('row').filter({ has: owner.getByRole('cell', { name: 'handover' }) })
      await row.getByRole('button', { name: 'Transfer' }).click()
      await owner.getByLabel('New owner').selectOption({ label: 'editor@acme.test (Editor)' })
      await owner.getByRole('button', { name: 'Transfer' }).click()
      await expect(owner.getByRole('status').textContent()).resolves.toBe('Transferred the API key handover.')
      const editorId = (await t.request('GET', '/api/v1/users')).body.data.find((u: { email: string }) => u.email === 'editor@acme.test').id
      const handed = (await t.request('GET', '/api/v1/api-keys')).body.data.find((k: { name: string }) => k.name === 'handover')
      expect(handed.owner_user_id).toBe(editorId)

      const editor = await signIn('editor@acme.test')
      await editor.goto(`${base}/console/developer-settings`)
      const names = await editor.getByRole('row').filter({ has: editor.getByRole('cell') }).evaluateAll((rows) => rows.map((r) => r.querySelector('td')!.childNodes[0]!.textContent))
      expect(names).toEqual(['handover'])
      await expect(editor.getByRole('button', { name: 'Transfer' }).count()).resolves.toBe(0)
      await owner.context().close()
      await editor.context().close()
    })

    it('adds a webhook (secret once), sends a test event, lists its delivery and retries it', async () => {
      const received: string[] = []
      const receiver = http.createServer((req, res) => {
        let body = ''
        req.on('data', (c: Buffer) => (body += c.toString()))
        req.on('end', () => { received.push(body); res.writeHead(204).end() })
      })
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
      const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`
      try {
        const page = await signIn('owner@acme.test')
        await page.goto(`${base}/console/developer-settings`)
        await page.getByRole('button', { name: 'Add webhook' }).click()
        // The form's first field has the focus (a URL with a fragment would keep autofocus from taking it).
        await page.waitForURL((u) => u.search.includes('new=webhook'))
        await expect(page.evaluate(() => document.activeElement?.id)).resolves.toBe('webhook-url')
        await page.getByLabel('URL').fill(url)
        await page.getByLabel('Events').fill('asset.*')
        await page.getByLabel('Description').fill('CMDB mirror')
        await page.getByRole('button', { name: 'Add webhook' }).click()
        const secret = await page.getByLabel('Secret', { exact: true }).inputValue()
        expect(secret).toMatch(/^whsec_/)
        const hooks = (await t.request('GET', '/api/v1/webhooks')).body.data
        expect(hooks).toMatchObject([{ url, description: 'CMDB mirror', event_types: ['asset.*'] }])
        await page.getByRole('button', { name: 'Send test event' }).click()
        await expect(page.getByRole('status').textContent()).resolves.toBe('Sent a test event: its delivery is listed below.')
        for (let i = 0; i < 50 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 200))
        expect(JSON.parse(received[0]!)).toMatchObject({ type: 'webhook.test', data: { actor: { api_key_id: null, user_id: expect.stringMatching(/^[0-9a-f-]{36}$/) } } })
        // The receiver has the body before the worker has written the delivery's outcome.
        await eventually(async () => (await t.request('GET', `/api/v1/webhooks/${hooks[0].id}/deliveries`)).body.data[0]?.status === 'succeeded', 10_000)
        await page.reload()
        await expect(page.getByLabel('Secret', { exact: true }).count()).resolves.toBe(0)
        const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'webhook.test' }) })
        await expect(row.getByRole('cell', { name: 'succeeded' }).isVisible()).resolves.toBe(true)
        await expectAccessible(page)
        await shot(page, 'webhooks')
        await row.getByRole('button', { name: 'Retry' }).click()
        await expect(page.getByRole('status').textContent()).resolves.toBe('Queued the delivery again.')
        for (let i = 0; i < 50 && received.length < 2; i++) await new Promise((r) => setTimeout(r, 200))
        expect(received).toHaveLength(2)
        // Delete asks first, saying what goes with it; Cancel keeps it.
        await page.getByRole('button', { name: 'Delete webhook' }).click()
        const confirm = page.getByRole('form', { name: `Delete webhook ${url}` })
        await expect(confirm.textContent()).resolves.toContain(`Delete this webhook? No event is sent to ${url} from then on`)
        await expect(page.evaluate(() => document.activeElement?.textContent)).resolves.toBe('Delete the webhook')
        await expectAccessible(page)
        await shot(page, 'delete-webhook')
        await confirm.getByRole('link', { name: 'Cancel' }).click()
        await page.waitForURL((u) => !u.search.includes('delete_webhook'))
        await expect(page.getByRole('form', { name: `Delete webhook ${url}` }).count()).resolves.toBe(0)
        expect((await t.request('GET', '/api/v1/webhooks')).body.data).toHaveLength(1)
        await page.getByRole('button', { name: 'Delete webhook' }).click()
        await confirm.getByRole('button', { name: 'Delete the webhook' }).click()
        await expect(page.getByRole('status').textContent()).resolves.toBe('Deleted the webhook.')
        expect((await t.request('GET', '/api/v1/webhooks')).body.data).toEqual([])
        await page.context().close()
      } finally {
        receiver.close()
      }
    })

    it('a viewer cannot restore: no button, and a forged request (even with a valid CSRF token) is refused', async () => {
      const id = await create({ asset_type_key: 'note', name: 'viewer-note' })
      await archive(id)
      const page = await signIn('viewer@acme.test')
      await page.goto(`${base}/console/archived`)
      const row = archivedRow(page, 'viewer-note')
      await expect(row.isVisible()).resolves.toBe(true)
      await expect(row.getByRole('button').count()).resolves.toBe(0)
      const token = await page.evaluate(() => (document.querySelector('input[name="_csrf"]') as HTMLInputElement).value)
      const status = await page.evaluate(async ([assetId, csrf]) => (await fetch(`/console/archived/${assetId}/restore`, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: csrf! }).toString(),
      })).status, [id, token])
      expect(status).toBe(403)
      expect((await t.request('GET', `/api/v1/assets/${id}`)).status).toBe(404)
      await page.context().close()
    })

    it('answers a body no page sends (not a form) with a page of its own words, not the framework\'s', async () => {
      const page = await signIn('owner@acme.test')
      const token = await page.evaluate(() => (document.querySelector('input[name="_csrf"]') as HTMLInputElement).value)
      const answer = await page.evaluate(async (csrf) => {
        const res = await fetch('/console/sign-out', { method: 'POST', headers: { 'content-type': 'text/plain', 'x-csrf-token': csrf }, body: 'hello' })
        return { status: res.status, text: await res.text() }
      }, token)
      expect(answer.status).toBe(400)
      expect(answer.text).toContain('This request could not be read. Go back, reload the page and try again.')
      expect(answer.text).not.toContain('content-type')
      await page.context().close()
    })

    it('refuses a state-changing request without the CSRF token (403)', async () => {
      const id = await create({ asset_type_key: 'note', name: 'csrf-note' })
      await archive(id)
      const page = await signIn('owner@acme.test')
      const status = await page.evaluate(async (assetId) => (await fetch(`/console/archived/${assetId}/restore`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' })).status, id)
      expect(status).toBe(403)
      expect((await t.request('GET', `/api/v1/assets/${id}`)).status).toBe(404)
      await page.context().close()
    })
  })
}
