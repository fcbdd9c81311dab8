// Preloaded (`node --import`) by the kbis processes the tests start (test/helpers/cli-server.ts):
// V8 compiles PGlite's WebAssembly to baseline code only, as bin/kbis.js does for `kbis keys` and
// `kbis users`. A test's server answers a few requests and stops, while optimizing PGlite's busiest
// functions took ≈ 1.8 s of CPU of each `kbis serve` on the embedded store (4.8 → 3.0 s for a start
// and 20 requests on a slow 2-core machine); the suite starts about a hundred, on two cores.
import v8 from 'node:v8'

v8.setFlagsFromString('--liftoff-only')
