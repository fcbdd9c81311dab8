import { randomBytes } from 'node:crypto'
import { openDb, type Db, type StoreKind } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { loadTemplate } from './pglite-template.js'

/**
 * The stores every suite runs against: PGlite always, PostgreSQL when TEST_DATABASE_URL is set.
 * TEST_STORES=pglite (or postgres) narrows the list.
 */
export const STORES: StoreKind[] = (() => {
  const all: StoreKind[] = process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite']
  const only = process.env.TEST_STORES?.split(',').map((s) => s.trim())
  return only ? all.filter((s) => only.includes(s)) : all
})()

export interface TestStore {
  db: Db
  /** The PostgreSQL schema of this store (null on PGlite). */
  schema: string | null
  drop(): Promise<void>
}

/**
 * A fresh, migrated store: an in-memory PGlite loaded from the migrated template
 * (pglite-template.ts), or a new schema on the test PostgreSQL.
 */
export async function createTestStore(kind: StoreKind): Promise<TestStore> {
  if (kind === 'pglite') {
    const db = await openDb({ dataDir: 'memory://', loadDataDir: await loadTemplate() })
    // Nothing to apply on the template; kept so a store is migrated whatever it was loaded from.
    await migrate(db)
    return { db, schema: null, drop: () => db.close() }
  }
  const url = process.env.TEST_DATABASE_URL!
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = await openDb({ databaseUrl: url, poolSize: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  await admin.close()
  const db = await openDb({ databaseUrl: url, schema, poolSize: 5 })
  await migrate(db)
  return {
    db,
    schema,
    async drop() {
      await db.close()
      const cleanup = await openDb({ databaseUrl: url, poolSize: 1 })
      await cleanup.query(`DROP SCHEMA ${schema} CASCADE`)
      await cleanup.close()
    },
  }
}
