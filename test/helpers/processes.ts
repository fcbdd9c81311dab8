import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface ServerProcess {
  address: string
  child: ChildProcess
  stop(): Promise<void>
}

/** Starts test/helpers/server-entry.ts in its own Node process and waits until it listens. */
export async function startServerProcess(env: Record<string, string | undefined>): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/server-entry.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk) => { stderr += String(chunk) })
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server process did not start in 60 s: ${stderr}`)), 60_000)
    child.once('exit', (code) => reject(new Error(`server process exited with ${code}: ${stderr}`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const { address } = JSON.parse(line) as { address: string }
        clearTimeout(timer)
        resolve(address)
      } catch {
        // not the readiness line
      }
    })
  })
  return {
    address,
    child,
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    }),
  }
}
