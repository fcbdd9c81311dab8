import type { TestApp } from './app.js'
import { hashPassword } from '../../src/console/passwords.js'
import { setPasswordFromCli } from '../../src/console/cli.js'

export const PASSWORD = 'correct horse battery'

/** Gives users console passwords (as `kbis users set-password` does) and the password method. */
export async function givenPasswords(t: TestApp, emails: readonly string[], org = 'acme'): Promise<void> {
  const hash = await hashPassword(PASSWORD)
  for (const email of emails) {
    await t.store.db.query(
      `UPDATE users SET sign_in_methods = array_append(sign_in_methods, 'password')
       WHERE email = $1 AND NOT ('password' = ANY(sign_in_methods))`, [email])
    await setPasswordFromCli(t.store.db, { org, email, hash })
  }
}

/** A tiny cookie jar over inject: the console is a browser's, cookies and forms. */
export class Browser {
  cookies = new Map<string, string>()
  constructor(private readonly t: TestApp, private readonly address = '127.0.0.1') {}

  private header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  }

  async send(method: 'GET' | 'POST', url: string, form?: Record<string, string | string[]>, headers: Record<string, string> = {}) {
    const body = form ? new URLSearchParams(Object.entries(form).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]]))).toString() : undefined
    const res = await this.t.app.inject({
      method, url, remoteAddress: this.address,
      headers: { cookie: this.header(), ...(body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}), ...headers },
      ...(body !== undefined ? { payload: body } : {}),
    })
    for (const c of res.cookies as { name: string; value: string; expires?: Date }[]) {
      if (c.value === '' || (c.expires && c.expires.getTime() < Date.now())) this.cookies.delete(c.name)
      else this.cookies.set(c.name, c.value)
    }
    return res
  }

  async csrf(url = '/console/sign-in'): Promise<string> {
    const res = await this.send('GET', url)
    const token = /name="_csrf" value="([^"]+)"/.exec(res.body)?.[1]
    if (!token) throw new Error(`no CSRF token on ${url}: ${res.statusCode} ${res.body.slice(0, 300)}`)
    return token
  }

  async signIn(email: string, password = PASSWORD) {
    return this.send('POST', '/console/sign-in', { _csrf: await this.csrf(), email, password })
  }
}

