import { v7 } from 'uuid'
import type { BenchContext } from './context.js'
import { postgresStore, type RawStore } from './raw-store.js'

/**
 * Seeds `count` servers straight into the assets table of `store`, in chunks of one statement
 * each (ids are UUIDv7 from here; names are a permutation of the insertion order so that sorting
 * by name is real work), then VACUUM ANALYZE. Returns the ids in insertion order.
 */
export async function seedServersInto(store: RawStore, orgId: string, count: number): Promise<string[]> {
  const ids: string[] = []
  // PGlite runs in a WASM heap of its own: smaller statements keep its transition tables small.
  const chunk = store.kind === 'pglite' ? 20_000 : 50_000
  for (let start = 0; start < count; start += chunk) {
    const batch = Array.from({ length: Math.min(chunk, count - start) }, () => v7())
    await store.query(
      `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
       SELECT $1, u.id, 'server', 'srv-' || lpad(((n::bigint * 7919) % $3)::text, 7, '0'), CASE WHEN n % 5 = 0 THEN 'finance' ELSE 'it' END,
              jsonb_build_object('hostname', 'seed-' || n, 'environment', (ARRAY['dev','staging','prod'])[1 + n % 3],
                'cpu_count', (ARRAY[2,4,8,16,32,64])[1 + n % 6], 'memory_gb', (ARRAY[4,8,16,32,64])[1 + n % 5],
                'purchased_on', to_char(date '2018-01-01' + (n % 2500), 'YYYY-MM-DD'),
                'tags', CASE WHEN n % 2 = 0 THEN '["pci"]'::jsonb ELSE '[]'::jsonb END,
                'owner', 'team-' || (n % 7) || '@example.com', 'cost', 800 + n % 9000),
              'seed-' || n, date_trunc('second', now()), date_trunc('second', now())
       FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, i), LATERAL (SELECT ($4::int + u.i - 1)::int AS n) AS k`,
      [orgId, batch, count, start],
    )
    ids.push(...batch)
  }
  // As autovacuum would have soon after such a load on PostgreSQL, and the service's statistics
  // keeper after its own writes on PGlite (which has no autovacuum; these raw writes bypass the
  // keeper): VACUUM ANALYZE of `assets` and of the organization's projection table, which the
  // trigger filled in the same statements. The lean tables of the limit get the same.
  await store.query('VACUUM ANALYZE assets')
  const projection = await store.query<{ table_name: string }>('SELECT table_name FROM asset_projections WHERE org_id = $1', [orgId])
  for (const { table_name } of projection) await store.query(`VACUUM ANALYZE "${table_name.replaceAll('"', '""')}"`)
  return ids
}

/** The shared PostgreSQL read set: seeded once per run (ctx.once) whichever module asks first. */
export function seedServers(ctx: BenchContext, org: string, count: number): Promise<string[]> {
  return ctx.once(`servers:${org}:${count}`, async () => {
    const ids = await seedServersInto(postgresStore(ctx.sql), ctx.orgs[org]!.id, count)
    ctx.log(`  seeded ${count} servers in organization ${org}`)
    return ids
  })
}
