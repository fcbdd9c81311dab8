import { writeFileSync } from 'node:fs'
import type { Row, Target } from './context.js'

export interface Machine {
  cpus: number
  memoryGb: number
  node: string
  postgres: string
  date: string
  loadBefore: number[]
  loadAfter: number[]
}

const fmt = (value: number | null, unit: string): string => {
  if (value === null) return '—'
  const digits = unit === 'MB' || value >= 100 ? 0 : value >= 10 ? 1 : 2
  return `${value.toFixed(digits)} ${unit}`
}

export function ratioOf(row: Row): number | null {
  return row.raw === null || row.raw === 0 ? null : row.ours / row.raw
}

function targetText(target: Target | undefined, unit: string): string {
  if (!target) return '—'
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
  ]
}

const HEADER = ['figure', 'ours', 'raw SQL / bare', 'ratio', 'target', '']

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

/** docs/benchmarks.md, rewritten from the run itself (never edited by hand). */
export function writeBenchmarksDoc(path: string, rows: readonly Row[], machine: Machine, failures: string[], notes: string[]): void {
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(', ')
  const text = `# Benchmarks

Written by \`npm run bench\` (bench/run.ts) on ${machine.date}; re-run it to refresh this page.

Machine: ${machine.cpus} CPUs (\`nproc\`), ${machine.memoryGb.toFixed(1)} GB memory, Node ${machine.node},
PostgreSQL ${machine.postgres}. Load average before / after the run: ${load(machine.loadBefore)} / ${load(machine.loadAfter)}
(the service, PostgreSQL and the load generator share these CPUs).

${markdownTable(rows)}

${failures.length > 0 ? `**Failed modules:**\n\n${failures.map((f) => `- ${f}`).join('\n')}\n\n` : ''}## What is measured

${notes.map((n) => `- ${n}`).join('\n')}
`
  writeFileSync(path, text)
}
