#!/usr/bin/env node
// `kbis serve` drains on SIGTERM and SIGINT (cli/main.ts). One that comes while its modules load,
// before it can listen for signals, is kept here for it: by default Node would die of it (143).
const signalled = []
const keep = (signal) => signalled.push(signal)
const serving = process.argv[2] === 'serve'
if (serving) for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, keep)
const earlySignal = () => {
  for (const signal of ['SIGTERM', 'SIGINT']) process.off(signal, keep)
  return signalled.length > 0
}

// Node prints a process warning over several lines (a library's notice, then how to trace it): one
// line of the CLI's own instead, its first line (node-postgres's notice on sslmode=require was ten).
process.removeAllListeners('warning')
process.on('warning', (warning) => {
  process.stderr.write(`kbis: warning: ${String(warning.message).split('\n')[0].trim()}\n`)
})

// `kbis keys`, `kbis users` and `kbis apply` run a few statements on the store and exit: V8
// compiling PGlite's busiest WebAssembly functions again, optimized, would not pay off before the
// exit. Baseline code only: `kbis keys list` on the embedded store took 1.0 s of CPU instead of
// 1.7, and 0.95 s instead of 1.2 (medians of five, taking turns); `kbis apply` of a small
// organization 1.7 s instead of 2.6, and 1.4 s instead of 1.8 (three each, taking turns). An apply
// whose migrations rewrite a large store would take longer (baseline code runs a long statement
// ≈ 1.3–1.5× slower); `kbis serve` runs the migrations of a new version itself as it starts.
// `kbis import` and `kbis export` talk to the server with Node's fetch, whose HTTP parser (undici's
// llhttp) is WebAssembly too: compiled optimized, its first answer cost ≈ 0.2 s of CPU, as much
// as the rest of the command's start (a fetch of one small answer: 0.49 s of CPU → 0.30 s). Its
// baseline code reads a 30 MB export as fast (0.86 s of CPU → 0.70 s, medians of three).
const BASELINE_ONLY = ['keys', 'users', 'apply', 'import', 'export']
if (BASELINE_ONLY.includes(process.argv[2])) {
  const v8 = await import('node:v8')
  v8.setFlagsFromString('--liftoff-only')
}

const { main } = await import('../dist/cli/main.js')
main(process.argv, { earlySignal }).catch((err) => {
  process.stderr.write(`kbis: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
