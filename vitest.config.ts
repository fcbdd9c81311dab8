import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    // Builds the migrated PGlite template once per run (test/helpers/pglite-template.ts).
    globalSetup: ['test/helpers/global-setup.ts'],
    hookTimeout: 120_000,
    // Each file builds its own stores (a fresh in-memory PGlite, a fresh PostgreSQL schema).
    pool: 'forks',
    maxWorkers: 2,
  },
})
