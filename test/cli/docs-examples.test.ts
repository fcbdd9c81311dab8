import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadSetupFile } from '../../src/setup/load.js'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { runKbis } from '../helpers/cli-server.js'

/**
 * The examples of the docs that the README's quick start leads to, run as written against the
 * organization of examples/acme.yaml with the quick start's key (Editor, owner@acme.test, role
 * `all`): what the docs show is what they answer.
 */

/** The fenced blocks of `section` (from its heading to the next) in a doc, with their language. */
function blocks(doc: string, section: string): { lang: string; text: string }[] {
  const text = readFileSync(path.resolve('docs', doc), 'utf8')
  const start = text.indexOf(`\n## ${section}\n`)
  expect(start, `${doc}: ## ${section}`).toBeGreaterThan(0)
  const end = text.indexOf('\n## ', start + 1)
  const body = text.slice(start, end < 0 ? undefined : end)
  return [...body.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }))
}

const kbis = (args: string[], env: Record<string, string>, cwd: string) => runKbis(args, { env, cwd })

for (const store of STORES) {
  describe(`${store}: the docs' examples on examples/acme.yaml`, () => {
    let t: TestApp
    let env: Record<string, string>
    let dir: string
    beforeAll(async () => {
      t = await createTestApp(store, await loadSetupFile(path.resolve('examples/acme.yaml')))
      const key = await t.givenKey({ type: 'Editor', roles: ['all'] })
      env = { KBIS_URL: await t.app.listen({ host: '127.0.0.1', port: 0 }), KBIS_API_KEY: key }
      dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-docs-'))
      // The quick start's own asset, created as the README does: the docs' examples come after it.
      const created = /-d '(\{"asset_type_key"[^']+)'/.exec(readFileSync(path.resolve('README.md'), 'utf8'))![1]!
      expect((await t.request('POST', '/api/v1/assets', { key, body: JSON.parse(created) })).status).toBe(201)
    })
    afterAll(async () => {
      rmSync(dir, { recursive: true, force: true })
      await t.close()
    })

    it('sync.md "Importing a CSV": the file imports, each command prints what the doc shows, a bad row is refused as shown', async () => {
      const [csv, commands, output, refused] = blocks('sync.md', 'Importing a CSV')
      expect([csv!.lang, commands!.lang, output!.lang, refused!.lang]).toEqual(['csv', 'sh', '', 'csv'])
      const runs = [...commands!.text.matchAll(/^npx kbis (.+?)\s+#/gm)].map((m) => m[1]!.split(' '))
      expect(runs).toHaveLength(3)
      const badRow = /A row `([^`]+)` added to the file/.exec(readFileSync(path.resolve('docs/sync.md'), 'utf8'))![1]!
      // The bad row first, while nothing is written: the dry run refuses it.
      writeFileSync(path.join(dir, 'servers.csv'), `${csv!.text}${badRow}\n`)
      const bad = await kbis(runs[0]!, env, dir)
      expect(bad.code).toBe(1)
      expect(readFileSync(path.join(dir, 'refused.csv'), 'utf8')).toBe(refused!.text)
      writeFileSync(path.join(dir, 'servers.csv'), csv!.text)
      let printed = ''
      for (const args of runs) {
        const run = await kbis(args, env, dir)
        expect(run.code, args.join(' ')).toBe(0)
        printed += run.stderr + run.stdout
      }
      expect(printed).toBe(output!.text)
    })

    it('search.md and analytics.md: every request body of "The body" and "Examples" is answered 200 on this organization', async () => {
      const bodies = (doc: string) => ['The body', 'Examples'].flatMap((section) => blocks(doc, section))
        .filter((b) => b.lang === 'json' && !b.text.trimStart().startsWith('{"data"')).map((b) => b.text)
      const searches = bodies('search.md')
      const analytics = bodies('analytics.md')
      expect([searches.length, analytics.length]).toEqual([5, 5])
      for (const text of searches) {
        const path = /"(source|target)_asset\.|"relationship_type_key", "operator"/.test(text) ? '/api/v1/search/relationships' : '/api/v1/search/assets'
        const res = await t.request('POST', path, { key: env.KBIS_API_KEY!, body: JSON.parse(text) })
        expect(res.status, `${path} ${text}\n${JSON.stringify(res.body)}`).toBe(200)
      }
      for (const text of analytics) {
        const res = await t.request('POST', '/api/v1/analytics/assets', { key: env.KBIS_API_KEY!, body: JSON.parse(text) })
        expect(res.status, `${text}\n${JSON.stringify(res.body)}`).toBe(200)
      }
    })

    it('api-keys.md "Create a key with the API": the request answers as shown', async () => {
      const [request, answer] = blocks('api-keys.md', 'Create a key with the API')
      const [line, body] = request!.text.trim().split('\n')
      expect(line).toBe('POST /api/v1/api-keys')
      const res = await t.request('POST', '/api/v1/api-keys', { key: env.KBIS_API_KEY!, body: JSON.parse(body!) })
      expect(String(res.status)).toBe(answer!.text.split(' ')[0])
      const shown = answer!.text.split('\n').slice(2).join('\n')
      for (const member of ['name', 'description', 'permission_type', 'role_keys', 'last_used_at'] as const) {
        expect(shown, member).toContain(`"${member}": ${JSON.stringify(res.body.data[member]).replace(/","/g, '", "')}`)
      }
    })
  })
}
