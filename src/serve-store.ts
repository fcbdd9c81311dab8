import { rmSync } from 'node:fs'
import type { Config } from './core/config.js'
import type { Db } from './store/db.js'
import { announceInitialize, migratedLine, openStore } from './open-store.js'
import { serverAnswers, whileHeldHere } from './cli/control-client.js'
import { applyHeapPolicy } from './ops/heap.js'

/*
 * The store of a `kbis serve`, in a module of its own, without the app: the command starts
 * opening it (on PGlite, its thread boots PostgreSQL for about a second) while it loads the
 * app's modules, instead of after them (cli/main.ts).
 */

/** The store a server is to serve, and whether this start created it (a new PGlite data directory). */
export interface ServeStore {
  db: Db
  created: boolean
}

/** A store being opened for a server. */
export interface ServeStoreOpening {
  store: Promise<ServeStore>
  /**
   * Resolves once the opening goes on off this thread (a new PGlite directory unpacking in a child
   * process, PGlite booting in its thread), or once it has settled: from then on this thread is
   * free for other work without holding the opening up.
   */
  offThread: Promise<void>
}

/**
 * Opens the store; a PGlite directory held by a command of this host (a `kbis apply` run beside
 * `kbis serve &` in a script, which may even have created the directory first) is waited for, up
 * to HOLDER_WAIT_MS, as the commands wait for a server that is starting. A server that answers on
 * the directory's control socket holds it for good: its message stands at once. V8's heap policy
 * is set first, for the store's thread and the server's whole life.
 */
export function openServeStore(config: Config, print: (line: string) => void): ServeStoreOpening {
  applyHeapPolicy(config)
  let created = false
  let wentOffThread!: () => void
  const offThread = new Promise<void>((resolve) => { wentOffThread = resolve })
  const onInitialize = (dir: string) => {
    created = true
    announceInitialize(dir)
    // Unpacked by a child process (store/pglite-template.ts).
    wentOffThread()
  }
  const open = () => openStore(config, { onInitialize, onBooting: wentOffThread, onMigrated: (applied) => print(migratedLine(applied)), whenLocked: refuseUnlockedServer })
  const store = whileHeldHere(config.dataDir, 'a kbis command, or a kbis serve starting', open, () => serverAnswers(config.dataDir))
    .then((db) => ({ db, created }))
  // Awaited by the caller later; a failure meanwhile is not an unhandled rejection.
  store.catch(() => undefined)
  return { store, offThread: Promise.race([offThread, store.then(() => undefined, () => undefined)]) }
}

/**
 * Closes a store opened for a start that did not happen (a signal came first, the start failed),
 * and removes the data directory the start created for it: nothing is left of such a start.
 */
export async function abandonServeStore(store: ServeStore, config: Config): Promise<void> {
  await store.db.close().catch(() => undefined)
  if (store.created) rmSync(config.dataDir, { recursive: true, force: true })
}

/**
 * A kbis serve from before 2026-11-27 (cca5170) holds no kbis.lock but answers on the directory's
 * control socket: with the lock taken here, a server that answers there is such a one. Opening the
 * directory beside it would migrate the files it is writing (both then wrote apart, and the store
 * no longer opened once both stopped).
 */
async function refuseUnlockedServer(dir: string): Promise<void> {
  if (await serverAnswers(dir)) {
    throw new Error(`${dir} is served by an older kbis serve of this host (it answers on the directory's control socket but holds no kbis.lock): stop it, then start this one`)
  }
}
