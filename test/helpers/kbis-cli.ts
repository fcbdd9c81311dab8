// Runs the CLI from source (the bin runs the same `main` from dist/).
import { main } from '../../src/cli/main.js'

main(process.argv).catch((err: unknown) => {
  process.stderr.write(`kbis: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
