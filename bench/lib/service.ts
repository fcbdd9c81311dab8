import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { allocatorTunables } from '../../src/ops/heap.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SRC = path.join(ROOT, 'src')
const DIST = path.join(ROOT, 'dist')
/** Where the service scripts are built (git-ignored); inside the checkout, so that packages resolve. */
const BUILT = path.join(ROOT, 'bench', '.built')

const builds = new Map<string, Promise<string>>()

/**
 * bench/<script>.ts as the process runs it: built JavaScript, the service's code from dist/, the
 * very files `kbis serve` runs for users (bench/run.ts rebuilds dist/ first when a source is
 * newer). No TypeScript loader lives in the process: tsx's loader thread and transform cache
 * added ≈ 50 MB to the RSS of a service that had just started (317–320 vs 269–272 MB on PGlite,
 * measured side by side), which the peak-RSS figures would have counted as ours.
 * esbuild bundles the script with the bench's own helpers and leaves the packages and every
 * module of src/ outside, each pointing at its built twin in dist/.
 */
function builtScript(script: string): Promise<string> {
  let built = builds.get(script)
  if (built === undefined) {
    const outfile = path.join(BUILT, script.replace(/\.ts$/, '.mjs'))
    built = build({
      entryPoints: [path.join(ROOT, 'bench', script)],
      outfile,
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      logLevel: 'warning',
      plugins: [{
        name: 'src-from-dist',
        setup(b) {
          b.onResolve({ filter: /^\.\.?\// }, (args) => {
            const file = path.resolve(args.resolveDir, args.path)
            if (!file.startsWith(SRC + path.sep)) return undefined
            const twin = path.relative(path.dirname(outfile), path.join(DIST, path.relative(SRC, file)))
            return { path: twin.startsWith('.') ? twin : `./${twin}`, external: true }
          })
        },
      }],
    }).then(() => outfile)
    builds.set(script, built)
  }
  return built
}

/** A server in a child process of its own, so that its memory is measured alone. */
export interface Service {
  url: string
  pid: number
  /** What the child printed when ready (seeded organizations and keys). */
  ready: Record<string, any>
  /** Resident set size now, in MB (Linux VmRSS). */
  rssMb(): number
  /** Peak resident set size since start or the last reset, in MiB (Linux VmHWM, kB / 1024). */
  peakRssMb(): number
  /** Starts a new peak-RSS window (Linux clear_refs 5). */
  resetPeakRss(): void
  /** Resident memory now by kind of mapping, in MiB ({@link memoryMap}). */
  memoryMap(): MemoryMap
  stop(): Promise<void>
}

const running = new Set<ChildProcess>()

/** Stops every child this bench started (on exit, also after a failure). */
export function stopAllServices(): void {
  for (const child of running) child.kill('SIGKILL')
  running.clear()
}

function statusField(pid: number, field: string): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`))
  return line ? Number(line.replace(/\D+/g, '')) / 1024 : Number.NaN
}

/** Where a process's resident memory is, in MiB, from /proc/<pid>/smaps (Linux). */
export interface MemoryMap {
  /** PGlite's WebAssembly memory: the one anonymous mapping of 128 MB or more (none on PostgreSQL). */
  wasm: number
  /** glibc's per-thread malloc arenas: anonymous mappings that start on a 64 MB boundary. */
  arenas: number
  /** The main thread's malloc heap (`[heap]`). */
  heap: number
  /** The node executable's own pages. */
  binary: number
  /** Every other anonymous mapping: V8's heaps, compiled code, thread stacks. */
  anon: number
  /** Files and the rest. */
  other: number
}

const ARENA = 64 * 2 ** 20

export function memoryMap(pid: number): MemoryMap {
  const kb: MemoryMap = { wasm: 0, arenas: 0, heap: 0, binary: 0, anon: 0, other: 0 }
  let kind: keyof MemoryMap = 'other'
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const mapping = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (mapping !== null) {
      const start = Number.parseInt(mapping[1]!, 16)
      const size = Number.parseInt(mapping[2]!, 16) - start
      const file = mapping[3]!
      if (file === '[heap]') kind = 'heap'
      else if (file === process.execPath || file.endsWith('/node')) kind = 'binary'
      else if (file !== '') kind = 'other'
      else if (size >= 128 * 2 ** 20) kind = 'wasm'
      else if (start % ARENA === 0 && size <= ARENA) kind = 'arenas'
      else kind = 'anon'
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss !== null) kb[kind] += Number(rss[1])
  }
  return Object.fromEntries(Object.entries(kb).map(([k, v]) => [k, Math.round(v / 1024)])) as unknown as MemoryMap
}

/** "wasm 97, arenas 51, …" */
export const formatMemoryMap = (map: MemoryMap): string => Object.entries(map).map(([k, v]) => `${k} ${v}`).join(', ')

/**
 * Starts `node <script>` (a file under bench/, built: {@link builtScript}) and waits for the JSON
 * line it prints when listening: `{"bench": "ready", "url": …}`. Bounded: a child not ready in
 * time is killed.
 */
export async function startService(script: string, env: Record<string, string>, timeoutMs = 180_000): Promise<Service> {
  // BENCH_PROFILE=<dir>: each child writes a V8 CPU profile there when it stops (open it in Chrome DevTools).
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []
  const child = spawn(process.execPath, [...profile, await builtScript(script)], {
    cwd: ROOT,
    // What bin/kbis gives a `kbis` process on that store (decisions 0020, 0026), unless the run sets its own.
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', GLIBC_TUNABLES: process.env.GLIBC_TUNABLES ?? allocatorTunables(env.BENCH_STORE === 'pglite' ? undefined : 'postgres'), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  running.add(child)
  const ready = await new Promise<Record<string, any>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench: ${script} not ready after ${timeoutMs} ms`)), timeoutMs)
    child.once('exit', (code) => reject(new Error(`bench: ${script} exited with ${code} before it was ready`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.startsWith('{"bench":"ready"')) return void (line.trim() && process.stderr.write(`  [${script}] ${line}\n`))
      clearTimeout(timer)
      resolve(JSON.parse(line) as Record<string, any>)
    })
  }).catch((err) => {
    child.kill('SIGKILL')
    running.delete(child)
    throw err
  })
  const pid = child.pid!
  return {
    url: ready.url as string,
    pid,
    ready,
    rssMb: () => statusField(pid, 'VmRSS'),
    peakRssMb: () => statusField(pid, 'VmHWM'),
    resetPeakRss: () => writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    memoryMap: () => memoryMap(pid),
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
      running.delete(child)
    },
  }
}
