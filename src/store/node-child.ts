import { execFile, type ExecFileException } from 'node:child_process'

/**
 * Why a short-lived child of the store (initdb, unpacking) failed: what it wrote on stderr, else
 * how it ended — never the command line, which execFile's own message repeats whole.
 */
export function childFailure(err: ExecFileException, stderr: string, timeoutMs: number): string {
  if (stderr.trim() !== '') return stderr.trim()
  if (err.killed) return `it did not finish within ${Math.round(timeoutMs / 1000)} s`
  if (typeof err.code === 'number') return `it exited with code ${err.code}`
  if (typeof err.code === 'string') return `it could not start (${err.code})`
  return `it ended by ${err.signal ?? 'an unknown cause'}`
}

/**
 * Runs `node -e script …args` in a short-lived child process (work whose memory the server's
 * process would keep: initdb, unpacking the template) and resolves once it exits with 0; else
 * rejects with `failed` and the reason (childFailure).
 */
export function runNodeScript(script: string, args: readonly string[], timeoutMs: number, failed: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script, ...args], { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, _stdout, stderr) => {
      if (!err) return resolve()
      reject(new Error(`${failed}: ${childFailure(err, stderr, timeoutMs)}`))
    })
  })
}
