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

/**
 * Applies the heap policy to this process, once, before the store opens. With
 * `--optimize-for-size` V8 grows its old generation by smaller steps and collects it sooner:
 * a 10,000-item bulk leaves most of its ≈ 100 MB of request objects as garbage, which V8's
 * default policy lets pile up to 150–200 MB over a few bulks before a full collection. Measured
 * (decision 0016): the peak RSS of a service taking 10,000-item bulks falls by a quarter to a
 * half; reads keep their throughput on PostgreSQL, PGlite's reads lose a tenth to a fifth of
 * theirs; bulks spend more time collecting.
 *
 * Set after start with `v8.setFlagsFromString` (Node: a flag may then take effect or do nothing):
 * this one takes effect, measured by test/ops/heap.test.ts; what V8 sizes only at start (the
 * young generation) stays as it was.
 */
export function applyHeapPolicy(config: Pick<Config, 'optimizeForSize' | 'databaseUrl'>): void {
  if (optimizesForSize(config)) v8.setFlagsFromString('--optimize-for-size')
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
