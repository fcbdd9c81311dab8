import v8 from 'node:v8'
import type { Config } from '../core/config.js'

/**
 * Whether V8 favours a small heap over speed in the server's process: `KBIS_OPTIMIZE_FOR_SIZE`,
 * by default on with the embedded store (whose WebAssembly memory already takes 130–155 MB of the
 * process, decision 0015) and off with PostgreSQL (decision 0016).
 */
export function optimizesForSize(config: Pick<Config, 'optimizeForSize' | 'databaseUrl'>): boolean {
  return config.optimizeForSize ?? !config.databaseUrl
}

/** What V8 grows its old generation by when it does not optimize for size, by default (decision 0028). */
export const DEFAULT_HEAP_GROWTH_PERCENT = 30

type HeapConfig = Pick<Config, 'optimizeForSize' | 'heapGrowthPercent' | 'databaseUrl'>

/**
 * The step, in percent, by which V8 lets the old generation grow past what its last full
 * collection left before it collects again (`--heap-growing-percent`), or null for V8's own
 * factor: `KBIS_HEAP_GROWTH_PERCENT` (0 is V8's own), by default 30 unless V8 optimizes for size
 * (which holds the factor at 1.3 at most already).
 */
export function heapGrowthPercent(config: HeapConfig): number | null {
  const percent = config.heapGrowthPercent ?? (optimizesForSize(config) ? 0 : DEFAULT_HEAP_GROWTH_PERCENT)
  return percent === 0 ? null : percent
}

/**
 * Applies the heap policy to this process, once, before the store opens. A 10,000-item bulk
 * leaves most of its ≈ 100 MB of request objects as garbage, which V8's own policy (a growth
 * factor of up to 4 on a machine with this much memory) lets pile up to 150–200 MB over a few
 * bulks before a full collection.
 * - With `--optimize-for-size` (the embedded store's default) V8 grows its old generation by
 *   smaller steps and collects it sooner, and saves memory elsewhere too. Measured (decision
 *   0016): the peak RSS of a service taking 10,000-item bulks falls by a quarter to a half;
 *   PGlite's reads lose a tenth to a fifth of their throughput; bulks spend more time collecting.
 * - Otherwise the growth step is 30 % (`--heap-growing-percent`, decision 0028): on PostgreSQL the
 *   peak RSS of the same bulks 170–190 MB instead of 240–300 MB, at no measured cost in speed.
 *
 * Set after start with `v8.setFlagsFromString` (Node: a flag may then take effect or do nothing):
 * both take effect, measured by test/ops/heap.test.ts (V8 reads them each time it sets the next
 * limit); what V8 sizes only at start (the young generation) stays as it was.
 */
export function applyHeapPolicy(config: HeapConfig): void {
  if (optimizesForSize(config)) v8.setFlagsFromString('--optimize-for-size')
  const percent = heapGrowthPercent(config)
  if (percent !== null) v8.setFlagsFromString(`--heap-growing-percent=${percent}`)
}

/**
 * The glibc allocator setting `bin/kbis` gives every `kbis serve` process unless GLIBC_TUNABLES is set
 * already (decision 0020): a fixed trim threshold of 1 MB. glibc's default threshold rises to
 * twice the largest block handed back to the system, so each thread's arena kept up to tens of
 * MB of freed memory resident. It must be in the environment when the process starts, hence the
 * launcher; the benchmark gives its service processes the same (bench/lib/service.ts).
 */
export const ALLOCATOR_TUNABLES = 'glibc.malloc.trim_threshold=1048576'

/**
 * What `bin/kbis` gives a process on the embedded store (no DATABASE_URL; decision 0026): also a
 * fixed mmap threshold of 32 kB, so that blocks of 32 kB and more get mappings of their own,
 * handed back when freed. The threads' arenas of a server on PGlite held ≈ 45 MB of freed such
 * blocks; on PostgreSQL the same setting cost list pages a sixth of their throughput (a 64 kB
 * socket read buffer then costs a mapping each), so it is the embedded store's only.
 */
export const EMBEDDED_ALLOCATOR_TUNABLES = `${ALLOCATOR_TUNABLES}:glibc.malloc.mmap_threshold=32768`

/** The setting `bin/kbis` gives a process that has `databaseUrl` (PostgreSQL) or none (PGlite). */
export const allocatorTunables = (databaseUrl: string | undefined): string => (databaseUrl ? ALLOCATOR_TUNABLES : EMBEDDED_ALLOCATOR_TUNABLES)
