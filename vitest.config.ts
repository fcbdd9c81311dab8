import { defineConfig } from 'vitest/config'

/**
 * Files that need a process of their own: they measure the memory of the process they run in
 * (export-large, statement-slices), start, stop and kill servers and CLI processes or watch the
 * process's own signals and handlers (ops, crash, cli), or drive a browser (console).
 */
const OWN_PROCESS = [
  'test/ops/**/*.test.ts',
  'test/crash/**/*.test.ts',
  'test/cli/**/*.test.ts',
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
        test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: OWN_PROCESS, isolate: false },
      },
      { extends: true, test: { name: 'own-process', include: OWN_PROCESS } },
    ],
  },
})
