import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import type { Config } from './core/config.js'
import { openDb, type Db } from './store/db.js'
import { migrate } from './store/migrate.js'
import { ensureDefaultOrganization } from './setup/bootstrap.js'
import { storeNewKey } from './keys/create.js'
import { startControlSocket, type ControlSocket } from './cli/control.js'

export interface RunningServer {
  app: FastifyInstance
  db: Db
  url: string
  close(): Promise<void>
}

export async function openStore(config: Config): Promise<Db> {
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: config.poolSize })
  await migrate(db)
  return db
}

/**
 * On an empty store: organization `default`, its Owner, role `all`, and one Admin key whose
 * secret is returned here and printed once by `kbis serve`.
 */
export async function bootstrap(db: Db): Promise<string | null> {
  const created = await ensureDefaultOrganization(db)
  if (!created.created) return null
  const key = await storeNewKey(db, created.orgId, {
    name: 'Initial admin key',
    description: 'Created by the first `kbis serve` on an empty store',
    permission_type: 'Admin',
    role_keys: ['all'],
    owner_user_id: created.ownerUserId,
  })
  return key.secret
}

/** config → store → app → listen (and, on PGlite, the control socket the CLI talks to). */
export async function startServer(config: Config, print: (line: string) => void): Promise<RunningServer> {
  const db = await openStore(config)
  const secret = await bootstrap(db)
  const app = await buildApp({ db, config, logger: { level: config.logLevel } })
  let control: ControlSocket | null = null
  if (db.kind === 'pglite') control = await startControlSocket(config.dataDir, db)
  await app.listen({ port: config.port, host: config.host })
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`
  print(`kbis listening on ${url} (store: ${db.kind === 'pglite' ? `PGlite in ${config.dataDir}` : 'PostgreSQL'})`)
  if (secret) {
    print('Created organization "default" with an Owner user and the role "all".')
    print(`Admin API key (shown only this once): ${secret}`)
  }
  return {
    app,
    db,
    url,
    async close() {
      await control?.close()
      await app.close()
      await db.close()
    },
  }
}
