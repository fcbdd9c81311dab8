import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Row } from '../../../bench/lib/context.js'
import { consoleTable, meets, parseBenchmarksMd, readPrevious, setPrevious, writeBenchmarksDoc, type Machine } from '../../../bench/lib/report.js'

const MACHINE: Machine = { cpus: 2, cpuModel: 'Test CPU', memoryGb: 8, node: 'v20', postgres: '15', date: '2026-11-23 10:00 UTC', loadBefore: [1, 1, 1], loadAfter: [1, 1, 1], size: 200_000, quick: false }

const OLD_PAGE = `# Benchmarks

Written by \`npm run bench\` (bench/run.ts) on 2026-11-21 21:29 UTC; re-run it to refresh this page.

| figure | ours | raw SQL / bare | ratio | target |  |
| --- | --- | --- | --- | --- | --- |
| POST /bulk/assets, 10,000 servers × 8 properties (median of 5) | 585 ms | 522 ms | 1.12× | ratio <= 1.5 | met |
| peak RSS of the service during the bulk runs | 205 MB | — | — | < 300 MB | met |
| GET /assets/{id}, throughput, 10 connections × 10 s | 6557 req/s | 5534 req/s | 1.18× | ratio >= 0.8 | met |
`

describe('bench report: the previous run', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
    setPrevious(null)
  })

  it('reads the figures of a benchmarks.md written before benchmarks.json existed', () => {
    expect(parseBenchmarksMd(OLD_PAGE)).toEqual({
      date: '2026-11-21 21:29 UTC',
      size: 200_000,
      quick: false,
      rows: [
        { metric: 'POST /bulk/assets, 10,000 servers × 8 properties (median of 5)', ours: 585, raw: 522, unit: 'ms' },
        { metric: 'peak RSS of the service during the bulk runs', ours: 205, raw: null, unit: 'MiB' },
        { metric: 'GET /assets/{id}, throughput, 10 connections × 10 s', ours: 6557, raw: 5534, unit: 'req/s' },
      ],
    })
  })

  it('prints the change against the previous figure in the direction that is better for the unit', () => {
    setPrevious(parseBenchmarksMd(OLD_PAGE))
    const table = consoleTable([
      { metric: 'POST /bulk/assets, 10,000 servers × 8 properties (median of 5)', ours: 468, raw: 500, unit: 'ms' },
      { metric: 'GET /assets/{id}, throughput, 10 connections × 10 s', ours: 5245.6, raw: 5000, unit: 'req/s' },
      { metric: 'a new figure', ours: 1, raw: null, unit: 'ms' },
    ])
    const lines = table.split('\n').map((l) => l.trimEnd())
    expect(lines[2]!.endsWith('585 ms (-20 %, better)')).toBe(true)
    expect(lines[3]!.endsWith('6557 req/s (-20 %, worse)')).toBe(true)
    expect(lines[4]!.endsWith('—')).toBe(true)
  })

  it('writes benchmarks.json with this run and keeps the figures a partial run did not measure', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kbis-report-'))
    dirs.push(dir)
    const rows: Row[] = [{ metric: 'PGlite · list page 1', ours: 120, raw: 200, unit: 'req/s', target: { on: 'ratio', op: '>=', value: 0.5 } }]
    writeBenchmarksDoc(dir, rows, MACHINE, [], [], '| write | costs |', parseBenchmarksMd(OLD_PAGE))
    const json = readPrevious(path.join(dir, 'benchmarks.json'))!
    expect(json.rows.map((r) => [r.metric, r.ours, r.date])).toEqual([
      ['PGlite · list page 1', 120, '2026-11-23 10:00 UTC'],
      ['POST /bulk/assets, 10,000 servers × 8 properties (median of 5)', 585, '2026-11-21 21:29 UTC'],
      ['peak RSS of the service during the bulk runs', 205, '2026-11-21 21:29 UTC'],
      ['GET /assets/{id}, throughput, 10 connections × 10 s', 6557, '2026-11-21 21:29 UTC'],
    ])
    const md = readFileSync(path.join(dir, 'benchmarks.md'), 'utf8')
    expect(md).toContain('| PGlite · list page 1 | 120 req/s | 200 req/s | 0.60× | ratio >= 0.5 | met | — |')
    expect(md).toContain('## Write cost breakdown')
    expect(md).toContain('Machine: 2 CPUs (`nproc`, Test CPU), 8.0 GB memory')
    expect(md).toContain('It ran on a machine whose CPU it did not record: compare the ratios, not the figures.')
    expect(json.cpuModel).toBe('Test CPU')
    expect(parseBenchmarksMd(md)!.rows).toEqual([{ metric: 'PGlite · list page 1', ours: 120, raw: 200, unit: 'req/s' }])
  })

  it('says when the previous run was on another CPU, and nothing when on the same one', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kbis-report-'))
    dirs.push(dir)
    const rows: Row[] = [{ metric: 'x', ours: 1, raw: 2, unit: 'ms' }]
    const prev = { date: '2026-11-24 00:00 UTC', size: 200_000, quick: false, rows: [] }
    writeBenchmarksDoc(dir, rows, MACHINE, [], [], '', { ...prev, cpuModel: 'Other CPU' })
    expect(readFileSync(path.join(dir, 'benchmarks.md'), 'utf8')).toContain('It ran on another CPU (Other CPU): compare the ratios, not the figures.')
    writeBenchmarksDoc(dir, rows, MACHINE, [], [], '', { ...prev, cpuModel: 'Test CPU' })
    expect(readFileSync(path.join(dir, 'benchmarks.md'), 'utf8')).not.toContain('compare the ratios, not the figures')
  })

  it('judges the analytics target as a time at most a third of the raw jsonb SQL', () => {
    const target = { on: 'ratio' as const, op: '<=' as const, value: 0.33, text: 'time ≤ 0.33× raw (≥ 3× faster)' }
    expect(meets({ metric: 'a', ours: 30, raw: 100, unit: 'ms', target })).toBe(true)
    expect(meets({ metric: 'a', ours: 50, raw: 100, unit: 'ms', target })).toBe(false)
  })
})
