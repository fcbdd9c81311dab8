import http from 'node:http'
import { existsSync, rmSync } from 'node:fs'
import type { Db } from '../store/db.js'
import { applySetup } from '../setup/apply.js'
import { CommandError, createKeyFromCli, listKeysFromCli, revokeKeyFromCli, type CliKeyRequest } from '../keys/cli.js'
import type { SetupFile } from '../setup/schema.js'
import { setPasswordFromCli, type CliPasswordRequest } from '../console/cli.js'
import { backupStore } from '../store/backup.js'
import { controlSocketPath } from './control-client.js'

export interface ControlSocket {
  close(): Promise<void>
}

async function readJson(request: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

export async function startControlSocket(dataDir: string, db: Db): Promise<ControlSocket> {
  const socketPath = controlSocketPath(dataDir)
  if (existsSync(socketPath)) rmSync(socketPath)
  const server = http.createServer((request, response) => {
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    }
    readJson(request)
      .then(async (body) => {
        if (request.url === '/apply') return reply(200, await applySetup(db, body as SetupFile))
        if (request.url === '/keys') return reply(200, await createKeyFromCli(db, body as CliKeyRequest))
        if (request.url === '/keys/list') return reply(200, await listKeysFromCli(db, body as { org: string }))
        if (request.url === '/keys/revoke') return reply(200, await revokeKeyFromCli(db, body as { org: string; key: string }))
        if (request.url === '/users/set-password') return reply(200, await setPasswordFromCli(db, body as CliPasswordRequest))
        if (request.url === '/backup') return reply(200, await backupStore(db, body as { file: string }))
        return reply(404, { error: `unknown command ${request.url}` })
      })
      .catch((err: unknown) => reply(err instanceof CommandError || ['SetupError', 'BackupError'].includes((err as Error).name) ? 400 : 500, { error: (err as Error).message }))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => resolve())
  })
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        rmSync(socketPath, { force: true })
      }),
  }
}

