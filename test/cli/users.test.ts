import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ACME_YAML, KBIS_BIN, runCli, TEST_KBIS_SETTINGS } from '../helpers/cli-server.js'
import { templateDataDir } from '../helpers/pglite-template.js'
import { openDb } from '../../src/store/db.js'


/** Runs the CLI with `input` on its standard input. */
function kbis(args: string[], input: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(KBIS_BIN, args, { env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'warn', ...TEST_KBIS_SETTINGS } })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr.on('data', (d: Buffer) => (out += d.toString()))
    child.on('close', (code) => resolve({ code, out }))
    child.stdin.end(input)
  })
}

/** Signs in to the console of a running server: the CSRF cookie and token first, then the form. */
async function signIn(url: string, email: string, password: string): Promise<number> {
  const page = await fetch(`${url}/console/sign-in`)
  const cookie = page.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ')
  const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!
  const res = await fetch(`${url}/console/sign-in`, {
    method: 'POST', redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: token, email, password }).toString(),
  })
  return res.status
}

describe('kbis users set-password on PGlite', { timeout: 600_000 }, () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-users-'))
    writeFileSync(path.join(dir, 'acme.yaml'), ACME_YAML.replace('RATE', '6000'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('reads the password from standard input, with the store closed and through a running server', async () => {
    const data = await templateDataDir(path.join(dir, 'data'))
    expect((await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data], '')).code).toBe(0)
    const closed = await kbis(['users', 'set-password', '--org', 'acme', '--email', 'owner@acme.test', '--data-dir', data], 'first password 1\n')
    expect(closed).toEqual({ code: 0, out: 'password set for owner@acme.test in organization acme\n' })
    const short = await kbis(['users', 'set-password', '--org', 'acme', '--email', 'owner@acme.test', '--data-dir', data], 'short\n')
    expect(short).toEqual({ code: 1, out: 'kbis: the password must have at least 12 characters\n' })

    const server = runCli(['serve', '--port', '0', '--data-dir', data])
    try {
      const url = (await server.waitFor(/kbis listening on (\S+)/, 400_000))[1]!
      expect(await signIn(url, 'owner@acme.test', 'first password 1')).toBe(303)
      const running = await kbis(['users', 'set-password', '--org', 'acme', '--email', 'owner@acme.test', '--data-dir', data], 'second password 2')
      // The session signed in with the first password ends with it.
      expect(running).toEqual({ code: 0, out: 'password set for owner@acme.test in organization acme; 1 console session of the user signed out\n' })
      expect(await signIn(url, 'owner@acme.test', 'first password 1')).toBe(401)
      expect(await signIn(url, 'owner@acme.test', 'second password 2')).toBe(303)
      const nobody = await kbis(['users', 'set-password', '--org', 'acme', '--email', 'nobody@acme.test', '--data-dir', data], 'long enough password\n')
      expect(nobody).toEqual({ code: 1, out: 'kbis: --email: no user nobody@acme.test in organization acme\n' })
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
  })

  it('asks for the password on a terminal, twice, without showing what is typed', async () => {
    const data = await templateDataDir(path.join(dir, 'data-tty'))
    expect((await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data], '')).code).toBe(0)
    // `script` gives the command a terminal; each answer is typed once its question shows (typed
    // before, the terminal would echo it itself).
    const typed = (first: string, second: string) => new Promise<{ code: number | null; out: string }>((resolve) => {
      const command = `${KBIS_BIN} users set-password --org acme --email owner@acme.test --data-dir ${data}`
      const child = spawn('script', ['-qec', command, '/dev/null'], { env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'warn', ...TEST_KBIS_SETTINGS } })
      let out = ''
      const answered = new Set<string>()
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString()
        for (const [question, answer] of [['owner@acme.test: ', first], ['Repeat it: ', second]] as const) {
          if (out.includes(question) && !answered.has(question)) {
            answered.add(question)
            child.stdin.write(`${answer}\r`)
          }
        }
      })
      // Without its questions (a command that waits for the end of its input) it would never end.
      const stop = setTimeout(() => child.kill(), 60_000)
      child.on('close', (code) => {
        clearTimeout(stop)
        resolve({ code, out: out.replace(/\r/g, '') })
      })
    })
    expect(await typed('typed password 1', 'typed password 2')).toEqual({
      code: 1, out: 'New console password for owner@acme.test: \nRepeat it: \nkbis: the two passwords differ; nothing was changed\n',
    })
    expect(await typed('typed password 1', 'typed password 1')).toEqual({
      code: 0, out: 'New console password for owner@acme.test: \nRepeat it: \npassword set for owner@acme.test in organization acme\n',
    })
    const server = runCli(['serve', '--port', '0', '--data-dir', data])
    try {
      const url = (await server.waitFor(/kbis listening on (\S+)/, 400_000))[1]!
      expect(await signIn(url, 'owner@acme.test', 'typed password 1')).toBe(303)
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
  })

  it('sets the password of the one user whose email is exactly --email, case included', async () => {
    const data = await templateDataDir(path.join(dir, 'data-case'))
    const yaml = path.join(dir, 'case.yaml')
    writeFileSync(yaml, ACME_YAML.replace('RATE', '6000').replace(/^users: .*$/m,
      'users: [{email: a@x.test, name: Lower, permission_type: Owner, role_keys: [all]}, {email: A@x.test, name: Upper, permission_type: Viewer, enabled: false, sign_in_methods: [password]}]'))
    expect((await kbis(['apply', yaml, '--data-dir', data], '')).code).toBe(0)
    const set = (email: string) => kbis(['users', 'set-password', '--org', 'acme', '--email', email, '--data-dir', data], 'a long password 1')
    // Set, with a word on why it does not let the user in yet (no sign-in method named in the file).
    expect(await set('a@x.test')).toEqual({ code: 0, out: "password set for a@x.test in organization acme\nkbis: warning: a@x.test cannot sign in with it until kbis apply changes that: password is not among the user's sign_in_methods\n" })
    expect(await set('A@X.TEST')).toEqual({ code: 1, out: 'kbis: --email: no user A@X.TEST in organization acme\n' })
    const db = await openDb({ dataDir: data })
    try {
      const rows = (await db.query<{ email: string; set: boolean }>(`SELECT u.email, u.password_hash IS NOT NULL AS set FROM users u JOIN organizations o ON o.id = u.org_id WHERE o.key = 'acme' ORDER BY u.email COLLATE "C"`)).rows
      expect(rows).toEqual([{ email: 'A@x.test', set: false }, { email: 'a@x.test', set: true }])
    } finally {
      await db.close()
    }
    // A disabled user's password is set, with a word on why it does not let the user in yet.
    const disabled = await kbis(['users', 'set-password', '--org', 'acme', '--email', 'A@x.test', '--data-dir', data], 'another long password')
    expect(disabled).toEqual({ code: 0, out: 'password set for A@x.test in organization acme\nkbis: warning: A@x.test cannot sign in with it until kbis apply changes that: the user is disabled\n' })
  })
})
