import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import type { Row, Target } from './context.js'

export interface Machine {
  cpus: number
  /** The CPU's model and clock as the kernel names them (\`os.cpus()\`). */
  cpuModel: string
  memoryGb: number
  node: string
  postgres: string
  date: string
  loadBefore: number[]
  loadAfter: number[]
  /** Assets of the large read set, and whether this was a quick (checking) run. */
  size: number
  quick: boolean
}

/** docs/benchmarks.json: the figures of the last run, read by the next one to print the change. */
export interface Previous {
  date: string
  size: number
  quick: boolean
  /** The machine's CPU (runs before 2026-11-25 did not record it). */
  cpuModel?: string
  /** Each figure with the date of the run that measured it (a BENCH_ONLY run keeps the others). */
  rows: (Pick<Row, 'metric' | 'ours' | 'raw' | 'unit'> & { date?: string })[]
}

/**
 * The previous run: benchmarks.json beside benchmarks.md, or else the table of benchmarks.md
 * itself (pages written before the JSON existed).
 */
export function readPrevious(file: string): Previous | null {
  try {
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Previous
    const md = file.replace(/\.json$/, '.md')
    return existsSync(md) ? parseBenchmarksMd(readFileSync(md, 'utf8')) : null
  } catch {
    return null
  }
}

const UNITS = ['ms', 's', 'req/s', 'MiB', 'events/s'] as const
const value = (cell: string): { n: number; unit: Row['unit'] } | null => {
  const m = /^([\d.]+) (ms|s|req\/s|MiB|MB|events\/s)$/.exec(cell.trim())
  // Peak RSS was labelled MB until 2026-11-29; it was always MiB (VmHWM / 1024).
  const unit = m?.[2] === 'MB' ? 'MiB' : m?.[2]
  return m && UNITS.includes(unit as Row['unit']) ? { n: Number(m[1]), unit: unit as Row['unit'] } : null
}

/** Rows of the first markdown table whose second cell is a figure (`585 ms`). */
export function parseBenchmarksMd(text: string): Previous | null {
  const rows: Previous['rows'] = []
  for (const line of text.split('\n')) {
    if (!line.startsWith('| ')) continue
    const cells = line.slice(2, -2).split(' | ')
    const ours = value(cells[1] ?? '')
    if (!ours) continue
    rows.push({ metric: cells[0]!, ours: ours.n, raw: value(cells[2] ?? '')?.n ?? null, unit: ours.unit })
  }
  const date = /on (\d{4}-\d\d-\d\d \d\d:\d\d UTC)/.exec(text)?.[1] ?? 'unknown'
  const size = /Large read set: ([\d,]+) assets/.exec(text)?.[1]
  return rows.length === 0 ? null : { date, size: size ? Number(size.replaceAll(',', '')) : 200_000, quick: /QUICK mode/.test(text), rows }
}

let previous: Map<string, Pick<Row, 'ours' | 'raw'>> = new Map()
/** The run to compare with (same metric text: sizes are part of it). */
export function setPrevious(p: Previous | null): void {
  previous = new Map((p?.rows ?? []).map((r) => [r.metric, r]))
}

/** Higher is better for throughput, lower for times and memory. */
const better = (unit: string) => (unit.endsWith('/s') ? 1 : -1)

function previousText(row: Row): string {
  const p = previous.get(row.metric)
  if (!p) return '—'
  const change = p.ours === 0 ? 0 : (row.ours - p.ours) / p.ours
  const sign = change * better(row.unit) >= 0 ? 'better' : 'worse'
  return `${fmt(p.ours, row.unit)} (${change >= 0 ? '+' : ''}${(100 * change).toFixed(0)} %, ${Math.abs(change) < 0.05 ? 'same' : sign})`
}

const fmt = (value: number | null, unit: string): string => {
  if (value === null) return '—'
  const digits = unit === 'MiB' || value >= 100 ? 0 : value >= 10 ? 1 : 2
  return `${value.toFixed(digits)} ${unit}`
}

export function ratioOf(row: Row): number | null {
  return row.raw === null || row.raw === 0 ? null : row.ours / row.raw
}

function targetText(target: Target | undefined, unit: string): string {
  if (!target) return '—'
  if (target.text) return target.text
  return target.on === 'ratio' ? `ratio ${target.op} ${target.value}` : `${target.op} ${target.value} ${unit}`
}

/** true/false against the target; null when the row has none. */
export function meets(row: Row): boolean | null {
  const t = row.target
  if (!t) return null
  const value = t.on === 'ratio' ? ratioOf(row) : row.ours
  if (value === null) return false
  return t.op === '<=' ? value <= t.value : t.op === '>=' ? value >= t.value : value < t.value
}

function cells(row: Row): string[] {
  const ratio = ratioOf(row)
  const ok = meets(row)
  return [
    row.metric,
    fmt(row.ours, row.unit),
    fmt(row.raw, row.unit),
    ratio === null ? '—' : `${ratio.toFixed(2)}×`,
    targetText(row.target, row.unit),
    ok === null ? '' : ok ? 'met' : 'MISSED',
    previousText(row),
  ]
}

const HEADER = ['figure', 'ours', 'limit / raw / bare', 'ratio ours/limit', 'target', '', 'previous run (ours)']

export function consoleTable(rows: readonly Row[]): string {
  const table = [HEADER, ...rows.map(cells)]
  const widths = HEADER.map((_, c) => Math.max(...table.map((r) => r[c]!.length)))
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ')
  return [line(table[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...table.slice(1).map(line)].join('\n')
}

export function markdownTable(rows: readonly Row[]): string {
  const line = (r: string[]) => `| ${r.join(' | ')} |`
  return [line(HEADER), line(HEADER.map(() => '---')), ...rows.map((row) => line(cells(row)))].join('\n')
}

/** docs/benchmarks.md and docs/benchmarks.json, rewritten from the run itself (never edited by hand). */
export function writeBenchmarksDoc(dir: string, rows: readonly Row[], machine: Machine, failures: string[], notes: string[], writeCosts: string, prev: Previous | null): void {
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(', ')
  const size = machine.size.toLocaleString('en-US')
  const text = `# Benchmarks

Written by \`npm run bench\` (bench/run.ts) on ${machine.date}${machine.quick ? ' in QUICK mode (short windows, few runs: the figures only show that every path works)' : ''}; re-run it to refresh this page.
Large read set: ${size} assets (\`BENCH_SIZE\`; \`npm run bench -- --size=1000000\` for the million).
Previous run compared with: ${prev ? `${prev.date}, ${prev.size.toLocaleString('en-US')} assets${prev.quick ? ', quick' : ''}` : 'none'} (docs/benchmarks.json).${prev && prev.cpuModel !== machine.cpuModel ? `
It ran on ${prev.cpuModel ? `another CPU (${prev.cpuModel})` : 'a machine whose CPU it did not record'}: compare the ratios, not the figures.` : ''}

Machine: ${machine.cpus} CPUs (\`nproc\`, ${machine.cpuModel}), ${machine.memoryGb.toFixed(1)} GB memory, Node ${machine.node},
PostgreSQL ${machine.postgres}. Load average before / after the run: ${load(machine.loadBefore)} / ${load(machine.loadAfter)}
(the service, PostgreSQL and the load generator share these CPUs).

## How to read this table

- **limit** is the physical limit measured in the same run on the same store: lean raw tables
  the bench creates (\`bench_lean_assets(id, org_id, type, name, properties jsonb)\` with one index
  per query: \`(org_id, name, id)\` for the pages and the search, the primary key for updates by id;
  \`bench_lean_relationships\` with one unique index), the raw page statement **without any count**,
  a multi-row statement or COPY for writes, raw SQL over the jsonb documents for aggregates.
  Throughput limits run the raw statement through a bare route in the same process as the service,
  on the same store (no authentication, no envelope work). Rows named \`PostgreSQL · …\` and
  \`PGlite · …\` are the same workload on each store (PGlite embedded, on a data directory).
- The service runs in a process of its own on the built code (dist/, what \`kbis serve\` runs),
  without a TypeScript loader; its peak RSS is the largest over its own bulk creates, PATCHes and
  relationships, run before any of the limit's statements (on PGlite they run in the same process,
  and the WebAssembly memory a 10,000-row VALUES statement takes stays resident: runs before
  2026-11-27 05:00 UTC counted ≈ 67 MB of it). Runs before 2026-11-26 ran the service under tsx
  (≈ 50 MB more RSS) and took one peak over the whole bulk phase. The bench's log line of the
  bulks says where that memory is, by kind of mapping (\`/proc/<pid>/smaps\`): WebAssembly, the
  malloc arenas of threads, the main heap, the node binary, and the rest (V8's heaps, code).
- **ratio ours/limit**: for req/s higher is better (0.5 = half the limit's throughput); for ms
  lower is better (2 = twice the limit's time). For analytics the target is a time ≤ 0.33× the raw
  jsonb SQL, i.e. at least 3× faster.
- Rows without a store prefix are the older modules (bulk, reads, query, upsert, workers, sync);
  their raw side runs on the service's own schema (same tables, same indexes), so they measure
  the service's overhead over its own SQL, not over the limit.
- **previous run (ours)**: our figure in the last run (docs/benchmarks.json) and the change.
- Read figures on a busy machine say little: PGlite runs its statements in one thread and gets a
  small share of the CPUs when other processes compete, while PostgreSQL's ten backends get more.
  A limit below our own figure is such a case, not the service beating raw SQL. Run the bench alone.
- Environment: \`BENCH_SIZE\` / \`--size\`, \`BENCH_QUICK=1\` / \`--quick\` (short windows, docs to a
  temporary directory), \`BENCH_ONLY=limits,bulk,…\`, \`BENCH_DOCS_DIR\`, \`BENCH_DATABASE_URL\`,
  \`BENCH_DEADLINE_MINUTES\`.

${markdownTable(rows)}

${failures.length > 0 ? `**Failed modules:**\n\n${failures.map((f) => `- ${f}`).join('\n')}\n\n` : ''}## Write cost breakdown

What each index, foreign key and trigger of \`assets\` costs on a 10,000-row insert
(docs/decisions/0011-write-costs.md draws the conclusions).

${writeCosts || '(not measured in this run: the limits module did not run)'}

## What is measured

${notes.map((n) => `- ${n}`).join('\n')}
`
  writeFileSync(`${dir}/benchmarks.md`, text)
  const measured = new Set(rows.map((r) => r.metric))
  const kept = (prev?.rows ?? []).filter((r) => !measured.has(r.metric)).map((r) => ({ ...r, date: r.date ?? prev!.date }))
  const json: Previous = { date: machine.date, size: machine.size, quick: machine.quick, cpuModel: machine.cpuModel, rows: [...rows.map(({ metric, ours, raw, unit }) => ({ metric, ours, raw, unit, date: machine.date })), ...kept] }
  writeFileSync(`${dir}/benchmarks.json`, `${JSON.stringify(json, null, 2)}\n`)
}

const PLANS_START = '<!-- bench:plans:start -->'
const PLANS_END = '<!-- bench:plans:end -->'

/** Replaces the generated part of indexes-and-plans.md (between the markers) with `plans`. */
export function writePlans(source: string, target: string, plans: string, machine: Machine): void {
  const text = readFileSync(source, 'utf8')
  const start = text.indexOf(PLANS_START)
  const end = text.indexOf(PLANS_END)
  if (start < 0 || end < start) throw new Error(`bench: ${source} has no ${PLANS_START} … ${PLANS_END} section`)
  const body = `${PLANS_START}\n<!-- generated by npm run bench on ${machine.date}${machine.quick ? ' (quick mode)' : ''}; do not edit by hand -->\n\n${plans}\n\n`
  writeFileSync(target, text.slice(0, start) + body + text.slice(end))
}
