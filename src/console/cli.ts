import type { Db } from '../store/db.js'
import { CommandError } from '../keys/cli.js'
import { setPasswordHash } from './sql.js'

export interface CliPasswordRequest {
  org: string
  email: string
  /** The scrypt hash (passwords.ts): the password itself never leaves the CLI process. */
  hash: string
}

/**
 * `kbis users set-password`: sets the password and signs the user's console sessions out; says
 * how many it ended, and whether the user can sign in with it now (`enabled`, and `password`
 * among the user's sign-in methods), which `kbis apply` decides, not this command.
 */
export async function setPasswordFromCli(db: Db, req: CliPasswordRequest): Promise<{ user_id: string; enabled: boolean; by_password: boolean; sessions_ended: number }> {
  if (!/^scrypt\$/.test(req.hash)) throw new CommandError('not a password hash')
  const org = (await db.query<{ id: string }>('SELECT id FROM organizations WHERE key = $1', [req.org])).rows[0]
  if (!org) throw new CommandError(`--org: no organization ${req.org}`)
  const updated = await setPasswordHash(db, req.org, req.email, req.hash)
  if (!updated) throw new CommandError(`--email: no user ${req.email} in organization ${req.org}`)
  return { user_id: updated.user_id, enabled: updated.enabled, by_password: updated.by_password, sessions_ended: updated.sessions_ended }
}

/** The password from standard input: all of it, without one final line break. */
export async function readPasswordFromStdin(stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer))
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
}

/**
 * On a terminal, as passwd does: asks on stderr, reads one line with echo off (raw mode: nothing
 * typed is shown), then asks again to confirm. Backspace takes a character back; Ctrl-C ends the
 * command (exit 130) having changed nothing.
 */
export async function readPasswordFromTerminal(email: string, input: NodeJS.ReadStream = process.stdin, output: NodeJS.WritableStream = process.stderr): Promise<string> {
  const first = await readHidden(`New console password for ${email}: `, input, output)
  const again = await readHidden('Repeat it: ', input, output)
  if (first !== again) throw new CommandError('the two passwords differ; nothing was changed')
  return first
}

function readHidden(prompt: string, input: NodeJS.ReadStream, output: NodeJS.WritableStream): Promise<string> {
  // Echo off before the question shows: an answer typed as soon as it does is not echoed.
  input.setRawMode(true)
  input.resume()
  output.write(prompt)
  return new Promise((resolve) => {
    let text = ''
    const end = (): void => {
      input.off('data', onData)
      input.setRawMode(false)
      input.pause()
      output.write('\n')
    }
    const onData = (chunk: Buffer): void => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') {
          end()
          resolve(text)
          return
        }
        if (ch === '\u0003') {
          end()
          process.exit(130)
        }
        if (ch === '\u007f' || ch === '\b') text = Array.from(text).slice(0, -1).join('')
        else if (ch >= ' ') text += ch
      }
    }
    input.on('data', onData)
  })
}

