import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, openSync } from 'node:fs'
import { KBIS_BIN, cli, cliRun, cliStore, runCli } from '../helpers/cli-server.js'

const createKey = async (name: string, env: Record<string, string>): Promise<{ id: string; secret: string }> =>
  JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', name, '--type', 'Editor', '--roles', 'all', '--json'], env)).at(-1)!) as { id: string; secret: string }

const status = async (url: string, secret: string): Promise<number> =>
  (await fetch(`${url}/api/v1/assets`, { headers: { authorization: `Bearer ${secret}` } })).status

for (const kind of STORES) {
  describe(`${kind}: kbis keys list / kbis keys revoke`, { timeout: 300_000 }, () => {
    let env: Record<string, string>
    let drop = async () => undefined as void

    beforeAll(async () => {
      const store = await cliStore(kind)
      ;({ env, drop } = store)
      await cli(['apply', store.yaml], env)
    })
    afterAll(async () => drop())

    it('lists the keys without their secrets and revokes one by id with the store closed', async () => {
      const first = await createKey('nightly sync', env)
      const second = await createKey('console export', env)
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as Record<string, unknown>[]
      expect(listed.map((k) => [k.id, k.name, k.permission_type, k.role_keys, k.owner_email, k.secret_prefix, k.last_used_at])).toEqual([
        [first.id, 'nightly sync', 'Editor', ['all'], 'owner@acme.test', first.secret.slice(0, 17), null],
        [second.id, 'console export', 'Editor', ['all'], 'owner@acme.test', second.secret.slice(0, 17), null],
      ])
      expect(JSON.stringify(listed)).not.toContain(first.secret.slice(18))
      const table = await cli(['keys', 'list', '--org', 'acme'], env)
      expect(table[0]).toMatch(/^ID +PREFIX +TYPE +OWNER +ROLES +LAST USED +NAME$/)
      expect(table.slice(1)).toEqual([
        `${first.id}  ${first.secret.slice(0, 17)}  Editor  owner@acme.test  all    never      nightly sync`,
        `${second.id}  ${second.secret.slice(0, 17)}  Editor  owner@acme.test  all    never      console export`,
      ])

      expect(await cliRun(['keys', 'revoke', first.id, '--org', 'acme'], env)).toEqual({ code: 0, lines: [`API key ${first.id} (${first.secret.slice(0, 17)}, "nightly sync") revoked`] })
      const left = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { id: string }[]
      expect(left.map((k) => k.id)).toEqual([second.id])
      expect(await cliRun(['keys', 'revoke', first.id, '--org', 'acme'], env)).toEqual({ code: 1, lines: [`kbis: <key>: no API key ${first.id} in organization acme`] })
      expect(await cliRun(['keys', 'revoke', 'web-01', '--org', 'acme'], env)).toEqual({
        code: 1, lines: ['kbis: <key>: give the key\'s id or the start of its token (kbis_ and 12 hex digits), not "web-01"'],
      })
      // A token mistyped: its secret part is not repeated.
      const mistyped = `${second.secret.slice(0, 16)}_${second.secret.slice(17)}`
      expect(await cliRun(['keys', 'revoke', mistyped, '--org', 'acme'], env)).toEqual({
        code: 1, lines: [`kbis: <key>: give the key's id or the start of its token (kbis_ and 12 hex digits), not "${mistyped.slice(0, 17)}…"`],
      })
      expect(await cliRun(['keys', 'list', '--org', 'nope'], env)).toEqual({ code: 1, lines: ['kbis: --org: no organization nope'] })
    })

    it('writes the control characters of a key\'s name as escapes in the table (a name is anyone\'s text; an ESC would drive the terminal)', async () => {
      const name = 'evil\u001b[2J\u001b]0;pwned\u0007x'
      const key = await createKey(name, env)
      onTestFinished(async () => void (await cli(['keys', 'revoke', key.id, '--org', 'acme'], env)))
      const table = await cli(['keys', 'list', '--org', 'acme'], env)
      const row = table.find((line) => line.startsWith(key.id))!
      expect(row.endsWith('  evil\\u001b[2J\\u001b]0;pwned\\u0007x')).toBe(true)
      expect(table.join('\n')).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
      // --json keeps the name as it is (JSON escapes it).
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { id: string; name: string }[]
      expect(listed.find((k) => k.id === key.id)!.name).toBe(name)
    })

    it('says so when standard output cannot take the new key\'s secret (a full disk): the key exists, and how to revoke it', async () => {
      const out = openSync('/dev/full', 'w')
      const child = spawn(KBIS_BIN, ['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'lost secret', '--type', 'Viewer', '--roles', 'all'],
        { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, stdio: ['ignore', out, 'pipe'] })
      closeSync(out)
      let stderr = ''
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      const [code] = await once(child, 'close') as [number]
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { id: string; name: string }[]
      const key = listed.find((k) => k.name === 'lost secret')!
      expect({ code, stderr }).toEqual({ code: 1, stderr: `kbis: API key ${key.id} was created, but standard output could not take its secret (ENOSPC): revoke it (kbis keys revoke ${key.id} --org acme) and create another\n` })
      await cli(['keys', 'revoke', key.id, '--org', 'acme'], env)
    })

    it('refuses to create a key with standard output closed (>&-), where its secret would be lost without a word, and creates nothing', async () => {
      // The shell closes descriptor 1 for the command, as `kbis keys create … >&-` does.
      const command = `exec "$0" keys create --org acme --user owner@acme.test --name 'closed output' --type Viewer --roles all >&-`
      const child = spawn('sh', ['-c', command, KBIS_BIN], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
      let stderr = ''
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      const [code] = await once(child, 'close') as [number]
      expect({ code, stderr }).toEqual({ code: 1, stderr: "kbis: standard output is closed: the new key's secret, shown only this once, would be lost; nothing was created\n" })
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { name: string }[]
      expect(listed.filter((k) => k.name === 'closed output')).toEqual([])
    })

    it('refuses a name or a description longer than POST /api-keys takes, and takes them at the limit', async () => {
      const create = (name: string, description: string) =>
        cliRun(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', name, '--description', description, '--type', 'Editor', '--roles', 'all', '--json'], env)
      expect(await create('n'.repeat(1000), 'd')).toEqual({ code: 1, lines: ['kbis: --name: at most 200 characters, got 1000'] })
      expect(await create('n', 'é'.repeat(2001))).toEqual({ code: 1, lines: ['kbis: --description: at most 2000 characters, got 2001'] })
      expect((await create('😀'.repeat(200), 'é'.repeat(2000))).code).toBe(0)
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { name: string; description: string }[]
      expect(listed.filter((k) => k.name.startsWith('😀')).map((k) => [[...k.name].length, [...k.description].length])).toEqual([[200, 2000]])
    })

    it('revokes a key by its token while a server runs: the server refuses it at once', async () => {
      const server = runCli(['serve', '--port', '0'], env)
      onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
      const url = (await server.waitFor(/kbis listening on (\S+)/, 200_000))[1]!
      const leaked = await createKey('leaked', env)
      const kept = await createKey('kept', env)
      // Both keys are in the server's cache now.
      expect([await status(url, leaked.secret), await status(url, kept.secret)]).toEqual([200, 200])
      const listed = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json'], env)).at(-1)!) as { id: string }[]
      expect(listed.map((k) => k.id).slice(-2)).toEqual([leaked.id, kept.id])

      // The whole leaked token names the key; the prefix alone would too.
      expect(await cliRun(['keys', 'revoke', leaked.secret, '--org', 'acme'], env)).toEqual({ code: 0, lines: [`API key ${leaked.id} (${leaked.secret.slice(0, 17)}, "leaked") revoked`] })
      expect([await status(url, leaked.secret), await status(url, kept.secret)]).toEqual([401, 200])
      expect(await cliRun(['keys', 'revoke', leaked.secret.slice(0, 17), '--org', 'acme'], env)).toEqual({ code: 1, lines: [`kbis: <key>: no API key ${leaked.secret.slice(0, 17)} in organization acme`] })

      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
    })
  })
}
