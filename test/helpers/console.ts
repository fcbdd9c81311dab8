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
