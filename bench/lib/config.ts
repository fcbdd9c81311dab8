import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The run's size and windows, from the environment or flags (`npm run bench -- --size=1000000 --quick`):
 * - BENCH_SIZE / --size: assets of the large read set (default 200,000; 1,000,000 is the opt-in run);
 * - BENCH_QUICK=1 / --quick: short windows and few runs, to check that every code path works while
 *   developing (the figures are not worth keeping: the docs go to a temporary directory).
 */
const arg = (name: string): string | undefined => {
  const hit = process.argv.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  return hit === undefined ? undefined : hit.includes('=') ? hit.slice(hit.indexOf('=') + 1) : '1'
}

export const QUICK = (arg('quick') ?? process.env.BENCH_QUICK ?? '') !== '' && (arg('quick') ?? process.env.BENCH_QUICK) !== '0'
export const SIZE = Number(arg('size') ?? process.env.BENCH_SIZE ?? 200_000)
if (!Number.isInteger(SIZE) || SIZE < 1_000) throw new Error(`bench: BENCH_SIZE must be an integer ≥ 1000, not ${SIZE}`)

/** Read throughput windows: 10 connections × 10 s after a warm-up (quick: 2 s after 1 s). */
export const LOAD = QUICK ? { connections: 10, seconds: 2, warmupSeconds: 1 } : { connections: 10, seconds: 10, warmupSeconds: 3 }

/** Repetitions of a timed write or query (median reported); `full` in a normal run. */
export const runs = (full: number, quick = 2): number => (QUICK ? Math.min(quick, full) : full)

/** The deepest page of size 100 the set holds, at most 1000 (the "page 1000"). */
export const DEEP_PAGE = Math.min(1000, Math.floor(SIZE / 100) - 1)

export const fmtCount = (n: number): string => n.toLocaleString('en-US')

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/**
 * Where the run writes benchmarks.md/.json and the plans: docs/ in a normal run, a temporary
 * directory in quick mode (BENCH_DOCS_DIR overrides both).
 */
export const DOCS_DIR = process.env.BENCH_DOCS_DIR || (QUICK ? path.join(os.tmpdir(), 'kbis-bench-quick') : path.join(ROOT, 'docs'))
export const REPO_DOCS = path.join(ROOT, 'docs')
