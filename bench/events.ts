/**
 * Events (CONTRACT §13, issue 11): a bulk create of 10,000 servers through the API, which now
 * writes 10,000 `asset.created` events in the same transaction, beside the raw multi-row INSERT
 * of the assets alone (target ≤ 1.5×: events must be nearly free); and the feed's read throughput
 * through GET /events?page[size]=1000 beside the same keyset pages read by raw SQL.
 * BENCH_EVENTS_ITEMS sets a smaller size for a quick try.
 */
import type pg from 'pg'
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { expectStatus, type Api } from './lib/http.js'
import { serverBatch } from './lib/data.js'
import { insertAssetsSql } from './lib/raw.js'
import { alternate, median, timed } from './lib/stats.js'
import { runs } from './lib/config.js'

const RUNS = runs(5)
const ITEMS = Number(process.env.BENCH_EVENTS_ITEMS || 10_000)

async function oursCreate(client: Api, batch: string): Promise<{ ms: number; ids: string[] }> {
  const body = JSON.stringify(serverBatch(batch, ITEMS))
  const { ms, result } = await timed(() => client.send('POST', '/api/v1/bulk/assets', body))
  expectStatus(result, 201, 'POST /api/v1/bulk/assets')
  return { ms, ids: (JSON.parse(result.text) as { data: { id: string }[] }).data.map((d) => d.id) }
}

async function rawCreate(sql: pg.PoolClient, orgId: string, batch: string): Promise<number> {
  const { sql: text } = insertAssetsSql(orgId, serverBatch(batch, ITEMS))
  return (await timed(() => sql.query(text))).ms
}

/** Reads the whole feed of the organization, page by page; returns events read and ms. */
async function readFeed(client: Api): Promise<{ events: number; ms: number }> {
  let cursor = ''
  let events = 0
  const { ms } = await timed(async () => {
    for (;;) {
      const res = await client.send('GET', `/api/v1/events?page[size]=1000${cursor ? `&after=${cursor}` : ''}`)
      expectStatus(res, 200, 'GET /api/v1/events')
      const page = JSON.parse(res.text) as { data: unknown[]; meta: { next_cursor: string; has_more: boolean } }
      events += page.data.length
      cursor = page.meta.next_cursor
      if (!page.meta.has_more) return
    }
  })
  return { events, ms }
}

/** The same pages by raw SQL: keyset on the feed index, the stored columns as they are. */
async function readRaw(sql: pg.PoolClient, orgId: string): Promise<{ events: number; ms: number }> {
  let after = 0
  let events = 0
  const { ms } = await timed(async () => {
    for (;;) {
      const page = await sql.query<{ sequence: string }>(
        `SELECT id, sequence, type, subject, time, request_id, idempotency_key, data FROM events
         WHERE org_id = $1 AND sequence IS NOT NULL AND sequence > $2 ORDER BY sequence LIMIT 1000`, [orgId, after])
      events += page.rows.length
      if (page.rows.length < 1000) return
      after = Number(page.rows.at(-1)!.sequence)
    }
  })
  return { events, ms }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  const client = apiFor(ctx, 'bench')
  const orgId = ctx.orgs.bench!.id
  const sql = await ctx.sql.connect()
  try {
    await oursCreate(client, 'ev-warm-o')
    await rawCreate(sql, orgId, 'ev-warm-r')
    let lastIds: string[] = []
    // Taking turns which goes first (as the bulk module does), so neither always meets the other's after-work.
    const create = await alternate(RUNS, async (r) => {
      const ours = await oursCreate(client, `ev-o${r}`)
      lastIds = ours.ids
      return ours.ms
    }, (r) => rawCreate(sql, orgId, `ev-r${r}`))
    const written = await sql.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE org_id = $1 AND type = 'asset.created' AND asset_id = ANY($2::uuid[])`, [orgId, lastIds])
    if (Number(written.rows[0]!.n) !== ITEMS) throw new Error(`bench events: expected ${ITEMS} asset.created events, found ${written.rows[0]!.n}`)
    ctx.log(`  bulk create with events runs (ms) ours ${create.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${create.raw.map((m) => m.toFixed(0)).join(', ')}`)

    await readFeed(client) // warm: also lets the relay stamp everything first
    const feed = await readFeed(client)
    const raw = await readRaw(sql, orgId)
    ctx.log(`  feed: ${feed.events} events in ${feed.ms.toFixed(0)} ms (raw SQL ${raw.events} in ${raw.ms.toFixed(0)} ms)`)
    return [
      {
        metric: `bulk create ${ITEMS.toLocaleString('en')} servers with their events`, ours: median(create.ours), raw: median(create.raw), unit: 'ms',
        target: { on: 'ratio', op: '<=', value: 1.5 },
        note: 'POST /bulk/assets writes the assets and one asset.created event per item in one transaction; raw = the multi-row INSERT of the assets alone (no events).',
      },
      {
        metric: 'feed read throughput (GET /events, page[size]=1000)', ours: feed.events / (feed.ms / 1000), raw: raw.events / (raw.ms / 1000), unit: 'events/s',
        note: `${feed.events.toLocaleString('en')} events read page by page through the API (JSON CloudEvents) beside the same keyset pages by raw SQL.`,
      },
    ]
  } finally {
    sql.release()
  }
}
