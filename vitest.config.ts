import { defineConfig } from 'vitest/config'

/**
 * Files that need a process of their own: they measure the memory of the process they run in
 * (export-large, statement-slices, pglite-memory, heap), start, stop and kill servers and CLI
 * processes or watch the process's own signals and handlers (shutdown, first-start, workers,
 * data-dir-lock, crash, the CLI's store commands), count on the process's own metrics registry
 * (requests, aborted-requests), or drive a browser (console). The other ops files test a store or
 * an app of their own and share the workers like the rest (each own process cost a fork and the
 * app's and PGlite's import, 3–7 s on a slow 2-core machine), and so does test/cli/sync.test.ts:
 * its `kbis import` / `kbis export` processes talk to an app of the file's own or a stub, and much
 * of its time is waiting (retries after Retry-After, a claim going stale), which the shared files'
 * third worker fills; run first among the own-process files it kept the CPU of that phase, which is
 * busy throughout, for ≈ 100 s (that phase 700 → 594 s, the whole suite 1,092 → 1,052 s, one run each).
 */
const OWN_PROCESS = [
  'test/ops/aborted-requests.test.ts',
  'test/ops/data-dir-lock.test.ts',
  'test/ops/first-start.test.ts',
  'test/ops/heap.test.ts',
  'test/ops/pglite-memory.test.ts',
  'test/ops/requests.test.ts',
  'test/ops/shutdown.test.ts',
  'test/ops/workers.test.ts',
  'test/crash/**/*.test.ts',
  'test/cli/backup.test.ts',
  'test/cli/cli.test.ts',
  'test/cli/docs-examples.test.ts',
  'test/cli/keys.test.ts',
  'test/cli/users.test.ts',
  'test/console/**/*.test.ts',
  'test/http/export-large.test.ts',
  'test/http/statement-slices.test.ts',
]

export default defineConfig({
  test: {
    testTimeout: 60_000,
    // Builds the migrated PGlite template once per run (test/helpers/pglite-template.ts).
    globalSetup: ['test/helpers/global-setup.ts'],
    hookTimeout: 120_000,
    // Each file builds its own stores (a fresh in-memory PGlite, a fresh PostgreSQL schema).
    pool: 'forks',
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        // The other files share their worker processes (no new process and no new import of the
        // app and PGlite per file): 2.5–3 s saved per file, about a fifth of the suite's time
        // on 2 cores. Each still opens its own stores and app, and closes them.
        // They run after the own-process files, three at a time: two left a quarter of the CPU
        // idle (their tests wait on relays, retries, timeouts and NATS), three a tenth; alone on
        // an idle 2-core machine 357 s → 315 s, the whole suite 893 s → 818 s. The own-process
        // files kept the CPU 90 % busy with two (a third, tried for the whole suite, made it
        // slower), and vitest runs projects of different worker counts one after the other.
        // Their workers compile WebAssembly (PGlite's, the one every in-process store runs) to
        // baseline code only, as the tests' `kbis` processes do (test/helpers/liftoff-only.mjs):
        // optimizing PGlite's busiest functions again in each worker cost more than it saved on
        // their small statements (the shared files alone: 537 → 506 s of CPU, 396 → 376 s).
        // A fourth worker gained nothing (1,060 s): with sync.test.ts among them the CPU was 98 % busy over the whole run.
        test: { name: 'shared', execArgv: ['--liftoff-only'], include: ['test/**/*.test.ts'], exclude: OWN_PROCESS, isolate: false, maxWorkers: 3, sequence: { groupOrder: 1 } },
      },
      { extends: true, test: { name: 'own-process', include: OWN_PROCESS, sequence: { groupOrder: 0 } } },
    ],
  },
})
