/**
 * Synchronisation tools (CONTRACT §16) beside raw PostgreSQL in the same run:
 * - GET /export/assets?format=ndjson of every server of the `pages` organization (200,000 by
 *   default) against `COPY (SELECT … ORDER BY id) TO STDOUT` of the same rows through psql; the
 *   service's peak RSS while it streams; the same export gzip-compressed (no target);
 * - `kbis import` of a 100,000-row CSV end to end (a separate process talking HTTP to the
 *   service) against `COPY assets FROM STDIN` of the same rows through psql.
 * Sizes: BENCH_SYNC_EXPORT_ROWS, BENCH_SYNC_IMPORT_ROWS (try small ones first).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { v7 } from 'uuid'
import type { BenchContext, Row } from './lib/context.js'
import { seedServers } from './lib/seed.js'
import { timed } from './lib/stats.js'
import { exportLines } from './lib/http.js'
import { QUICK, SIZE } from './lib/config.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const EXPORT_ROWS = Number(process.env.BENCH_SYNC_EXPORT_ROWS || SIZE)
const IMPORT_ROWS = Number(process.env.BENCH_SYNC_IMPORT_ROWS || (QUICK ? 5_000 : 100_000))

/** Runs a command, counting its stdout bytes (what it writes is read, as a client would). */
function exec(command: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; bytes: number; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } })
    let bytes = 0
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => { bytes += d.length })
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
    child.on('close', (code) => resolve({ code, bytes, stderr }))
  })
}

function psql(ctx: BenchContext, sql: string, stdinFile?: string): Promise<{ code: number | null; bytes: number; stderr: string }> {
  const args = ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', ctx.databaseUrl, '-c', `SET search_path TO ${ctx.schema}`, '-c', sql]
  return stdinFile ? exec('sh', ['-c', `psql "$@" < "${stdinFile}"`, 'psql', ...args]) : exec('psql', args)
}

async function exportRows(ctx: BenchContext): Promise<Row[]> {
  await seedServers(ctx, 'pages', EXPORT_ROWS)
  const org = ctx.orgs.pages!
  const count = (await ctx.sql.query<{ n: string }>(`SELECT count(*) AS n FROM assets WHERE org_id = $1 AND archived_at IS NULL AND asset_type_key = 'server'`, [org.id])).rows[0]!.n
  const rows = Number(count)
  ctx.service.resetPeakRss()
  const ours = await timed(() => exportLines(ctx.service.url, org.secret, 'identity', rows))
  const rss = ctx.service.peakRssMb()
  const gzip = await timed(() => exportLines(ctx.service.url, org.secret, 'gzip', rows))
  const raw = await timed(async () => {
    const res = await psql(ctx, `COPY (SELECT id, asset_type_key, name, access_domain_key, properties, created_at, updated_at FROM assets
      WHERE org_id = '${org.id}' AND archived_at IS NULL AND asset_type_key = 'server' ORDER BY id) TO STDOUT`)
    if (res.code !== 0) throw new Error(`bench: psql COPY failed: ${res.stderr}`)
  })
  const perSecond = (ms: number) => Math.round(rows / (ms / 1000))
  ctx.log(`  export: ${perSecond(ours.ms)} rows/s (raw COPY ${perSecond(raw.ms)} rows/s; gzip-compressed ${perSecond(gzip.ms)} rows/s), service peak RSS ${rss.toFixed(0)} MiB`)
  return [
    { metric: `GET /export/assets NDJSON, ${rows} servers`, ours: ours.ms / 1000, raw: raw.ms / 1000, unit: 's', target: { on: 'ratio', op: '<=', value: 2 },
      note: `${perSecond(ours.ms)} rows/s against ${perSecond(raw.ms)} rows/s for psql COPY … TO STDOUT of the same rows in id order (goal ≥ 0.5×, i.e. time ≤ 2×). Read uncompressed (Accept-Encoding: identity, as psql's COPY is) by node:http, counting lines.` },
    { metric: `GET /export/assets NDJSON gzip-compressed, ${rows} servers`, ours: gzip.ms / 1000, raw: raw.ms / 1000, unit: 's',
      note: `the same export with Accept-Encoding: gzip (what fetch and browsers ask for): ${perSecond(gzip.ms)} rows/s, the service compressing as it streams and the client inflating. No target: the raw side compresses nothing.` },
    { metric: `peak RSS of the service during the export of ${rows} servers`, ours: rss, raw: null, unit: 'MiB', target: { on: 'ours', op: '<', value: 300 } },
  ]
}

async function importRows(ctx: BenchContext): Promise<Row[]> {
  const org = ctx.orgs.bench!
  const dir = mkdtempSync(path.join(tmpdir(), 'kbis-bench-sync-'))
  try {
    const csv = path.join(dir, 'servers.csv')
    const lines = ['name,hostname,environment,cpu_count,memory_gb,purchased_on,tags,owner,cost,access_domain_key']
    const copy: string[] = []
    const now = new Date().toISOString()
    for (let i = 0; i < IMPORT_ROWS; i++) {
      const env = ['dev', 'staging', 'prod'][i % 3]!
      const day = String(1 + (i % 28)).padStart(2, '0')
      lines.push(`imp-${i},imp-${i},${env},${2 ** (1 + (i % 5))},${4 * (1 + (i % 8))},2023-03-${day},${i % 2 ? 'pci|gdpr' : ''},team-${i % 7},${800 + (i % 9000)},${i % 5 ? 'it' : 'finance'}`)
      const props = { hostname: `raw-${i}`, environment: env, cpu_count: 2 ** (1 + (i % 5)), memory_gb: 4 * (1 + (i % 8)), purchased_on: `2023-03-${day}`, ...(i % 2 ? { tags: ['pci', 'gdpr'] } : {}), owner: `team-${i % 7}`, cost: 800 + (i % 9000) }
      copy.push([org.id, v7(), 'server', `raw-${i}`, i % 5 ? 'it' : 'finance', JSON.stringify(props).replaceAll('\\', '\\\\'), `raw-${i}`, now, now].join('\t'))
    }
    writeFileSync(csv, `${lines.join('\n')}\n`)
    const copyFile = path.join(dir, 'servers.tsv')
    writeFileSync(copyFile, `${copy.join('\n')}\n`)
    const ours = await timed(async () => {
      // The CLI as users run it (bin/kbis over dist/), a separate process talking HTTP to the service.
      const res = await exec('bin/kbis', ['import', csv, '--type', 'server'], { KBIS_URL: ctx.service.url, KBIS_API_KEY: org.secret })
      if (res.code !== 0) throw new Error(`bench: kbis import failed: ${res.stderr.slice(0, 500)}`)
    })
    const raw = await timed(async () => {
      const res = await psql(ctx, 'COPY assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at) FROM STDIN', copyFile)
      if (res.code !== 0) throw new Error(`bench: psql COPY FROM failed: ${res.stderr}`)
    })
    const perSecond = (ms: number) => Math.round(IMPORT_ROWS / (ms / 1000))
    ctx.log(`  import: ${perSecond(ours.ms)} rows/s (raw COPY ${perSecond(raw.ms)} rows/s)`)
    return [{
      metric: `kbis import of a ${IMPORT_ROWS}-row CSV, end to end`, ours: ours.ms / 1000, raw: raw.ms / 1000, unit: 's',
      note: `${perSecond(ours.ms)} rows/s (file read, conversion, chunks of 10,000 over HTTP, validation, one transaction a chunk) against ${perSecond(raw.ms)} rows/s for psql COPY FROM STDIN of the same rows, which checks nothing. Includes the CLI's start (bin/kbis).`,
    }]
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  return [...(await exportRows(ctx)), ...(await importRows(ctx))]
}
