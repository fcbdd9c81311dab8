/*
 * The stores' tuning defaults, in a module of their own that imports nothing: the configuration
 * (core/config.ts) reads them, and so every command that parses its flags. Through store/db.js
 * they would load pg and the PGlite thread into `kbis import`, `kbis export` and `--help`, which
 * need neither (`kbis import` started in 0.28–0.32 s with them, 0.23–0.26 s without).
 */

/**
 * What the PostgreSQL planner is told a parallel plan costs to start (its own default is 1000),
 * on the service's connections. Launching a worker took ≈ 23 ms on the 2-core virtual machines
 * kbis is measured on, so with the default a scan of a 200,000-asset projection went parallel
 * and took twice as long as alone (≈ 90 against ≈ 48 ms); with this cost plans go parallel from
 * about 550,000 rows, where the workers measured faster. Decision 0019.
 */
export const DEFAULT_PG_PARALLEL_SETUP_COST = 6500

/**
 * PGlite's buffer pool, in MB (PostgreSQL's and PGlite's own default is 128). 48 keeps 80 MB less
 * resident in every embedded process; pages beyond it are read from the operating system's file
 * cache. Measured at 200,000 assets: the service's list, search, deep pages, analytics and export
 * within the run-to-run noise of 64 MB (2026-12-01; 128 → 64 MB on 2026-11-25 likewise); 32 MB was
 * too small (a raw OFFSET scan over 200,000 rows went from ≈ 50 ms to seconds). Decision 0015.
 */
export const DEFAULT_PGLITE_SHARED_BUFFERS_MB = 48

/**
 * PGlite's `maintenance_work_mem`, in MB (PostgreSQL's default is 64): the memory one index build
 * or VACUUM may take before it works on disk. WebAssembly memory never shrinks, so an index built
 * over 1,000,000 rows with 64 MB left PGlite 56 MB larger for good (128 → 184 MB; 300,000 rows:
 * +26 MB); with 16 MB it stayed at 128 MB and took no longer (2.9 against 3.4 s). The service
 * builds indexes when `kbis apply` gives a property `unique_key` on a filled type, and the
 * statistics keeper vacuums after large writes. Decision 0015, addendum.
 */
export const PGLITE_MAINTENANCE_WORK_MEM_MB = 16
