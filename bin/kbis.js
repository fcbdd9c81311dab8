#!/usr/bin/env node
import { main } from '../dist/cli/main.js'

main(process.argv).catch((err) => {
  process.stderr.write(`kbis: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
