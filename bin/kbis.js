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

const { main } = await import('../dist/cli/main.js')
main(process.argv, { earlySignal }).catch((err) => {
  process.stderr.write(`kbis: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
