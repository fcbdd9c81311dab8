import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { openDb } from '../../src/store/db.js'
import { migrate, pendingMigrations } from '../../src/store/migrate.js'
import { createTestStore, STORES } from '../helpers/stores.js'

/**
 * Processes starting at once on one PostgreSQL (a deploy, hosts of `--workers`) each run
 * migrate(): every migration must be applied once, and no process may fail on the others' work
 * (an outside audit saw one of two `kbis serve` exit 1 on 'duplicate key … pg_type_typname_nsp_index'
 * and on a column that already exists).
 */
describe.runIf(STORES.includes('postgres'))('postgres: migrations run by processes starting at once', () => {
  it('applies each migration once, whichever process gets to it, and every process starts', { timeout: 120_000 }, async () => {
    const url = process.env.TEST_DATABASE_URL!
    const schema = `t_mig_${randomBytes(5).toString('hex')}`
    const admin = await openDb({ databaseUrl: url, poolSize: 1 })
    await admin.query(`CREATE SCHEMA ${schema}`)
    const processes = await Promise.all(Array.from({ length: 3 }, () => openDb({ databaseUrl: url, schema, poolSize: 2 })))
    try {
      const applied = await Promise.all(processes.map((db) => migrate(db)))
      const all = applied.flat()
      expect(all.length).toBeGreaterThan(15)
      expect(new Set(all).size).toBe(all.length)
      expect(await pendingMigrations(processes[0]!)).toEqual([])
      const versions = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.schema_migrations`)
      expect(versions.rows[0]!.n).toBe(all.length)
    } finally {
      for (const db of processes) await db.close()
      await admin.query(`DROP SCHEMA ${schema} CASCADE`)
      await admin.close()
    }
  })
})

for (const store of STORES) {
  describe(`${store}: a store migrated by a newer version`, () => {
    it('is refused before anything runs, naming the migrations this version does not know', { timeout: 120_000 }, async () => {
      const { db, drop } = await createTestStore(store)
      try {
        await db.query("INSERT INTO schema_migrations (version) VALUES ('9998_future_change.sql'), ('9999_later_change.sql')")
        await expect(migrate(db)).rejects.toThrow(
          'the store was migrated by a newer version of kbis (9998_future_change.sql, 9999_later_change.sql are unknown to this one): run that version or a later one (an older one could damage its data), or restore a backup taken before the upgrade',
        )
        await db.query("DELETE FROM schema_migrations WHERE version LIKE '999%'")
        expect(await migrate(db)).toEqual([])
      } finally {
        await drop()
      }
    })
  })
}
