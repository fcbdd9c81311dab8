import cluster, { type Worker } from 'node:cluster'
import type { Config } from '../core/config.js'
import { bootstrap, printAdminKey, startServer, unscopedWebhooksLine, type RunningServer } from '../server.js'
import { migratedLine, openStore } from '../open-store.js'
import { startMetricsServer } from '../ops/metrics-server.js'
import { STOPPED_LINE, stoppingLine } from './stopping.js'


export class WorkersError extends Error {}

/**
 * The exit code of a worker that could not start (its port taken, …): a configuration to fix,
 * which every replacement would meet again, not a crash to retry (sysexits' EX_CONFIG). Its
 * reason reaches the primary as a message, which prints it once.
 */
export const WORKER_CANNOT_START = 78

/** A worker that dies this often this fast is a broken deployment, not bad luck: stop replacing. */
const MAX_RESTARTS = 10
const RESTART_WINDOW_MS = 60_000

/**
 * The primary of `kbis serve --workers n` (node:cluster): it migrates and bootstraps the store once,
 * forks n workers that share one listening port, replaces a worker that dies, serves the summed
 * metrics, and on SIGTERM/SIGINT lets every worker drain, then exits 0. PostgreSQL only: the
 * embedded PGlite data directory belongs to one process.
 */
export async function runPrimary(config: Config, workers: number, print: (line: string) => void): Promise<void> {
  if (!config.databaseUrl) {
    throw new WorkersError('--workers needs PostgreSQL (set DATABASE_URL): the embedded PGlite store belongs to one process')
  }
  let stopping = false
  let announced = false
  // A SIGTERM or SIGINT before the start is announced lets it finish first (every worker
  // listening, the first start's key made and printed), as a single server does; then it drains.
  // Listened for before the first await: main stops listening for this process once this one
  // does, and a signal in between (while the store migrates) ended the primary with 143.
  let started = false
  let signalled = false
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!signalled) print(stoppingLine(signal, config.shutdownTimeoutSeconds))
    signalled = true
    if (started) void stop(0)
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  // Migrated here, once; organization `default` and its Admin key only when every worker
  // listens (a port in use must not create a key that is shown only once and then lost).
  const db = await openStore(config, { onMigrated: (applied) => print(migratedLine(applied)) })
  const metricsServer = config.metricsPort !== undefined ? await startMetricsServer(config.metricsPort, config.host, {
    cluster: true,
    onError: (err, requestId) => print(`kbis: metrics could not be collected (request ${requestId}): ${err instanceof Error ? err.message : String(err)}`),
  }) : null
  const restarts: number[] = []
  // The workers accept connections themselves from the shared listening socket, rather than the
  // primary accepting and handing each to a worker (node:cluster's default, round-robin): a
  // connection handed to a worker that died before taking it was never answered nor closed (the
  // primary kept it: nodejs/node#21746), and its client waited for good. The kernel spreads
  // connections less evenly (≈ 40/60 between two workers, measured) but loses none: one a dying
  // worker had accepted is reset, and its client can retry.
  cluster.schedulingPolicy = cluster.SCHED_NONE
  const fork = () => cluster.fork({ KBIS_WORKER: '1' })

  // The workers listening now: the start is announced (and the first start's key made) once every
  // one of them listens (counting the forked ones announced it with the first).
  const listening = new Set<number>()
  cluster.on('listening', (worker: Worker, address) => {
    print(`worker ${worker.process.pid} listening`)
    listening.add(worker.id)
    if (announced || listening.size < workers) return
    announced = true
    const opening = async () => ({ secret: await bootstrap(db), unscoped: await unscopedWebhooksLine(db) })
    void opening().finally(() => db.close()).then(({ secret, unscoped }) => {
      const host = config.host.includes(':') ? `[${config.host}]` : config.host
      print(`kbis listening on http://${host}:${address.port} (${workers} workers; store: PostgreSQL)`)
      if (metricsServer) print(`metrics on ${metricsServer.url}`)
      if (secret) printAdminKey(print, secret)
      if (unscoped !== null) print(unscoped)
      started = true
      if (signalled) void stop(0)
    }, (err: unknown) => {
      print(`kbis: could not create organization default: ${(err as Error).message}`)
      void stop(1)
    })
  })
  cluster.on('message', (_worker: Worker, message: unknown) => {
    const reason = (message as { cannotStart?: unknown } | null)?.cannotStart
    if (typeof reason !== 'string' || stopping) return
    print(`kbis: ${reason}`)
    void stop(1)
  })
  cluster.on('exit', (worker: Worker, code, signal) => {
    listening.delete(worker.id)
    if (stopping) return
    if (code === WORKER_CANNOT_START) {
      print(`kbis: worker ${worker.process.pid} could not start`)
      void stop(1)
      return
    }
    const now = Date.now()
    restarts.push(now)
    while (restarts.length > 0 && restarts[0]! < now - RESTART_WINDOW_MS) restarts.shift()
    if (restarts.length > MAX_RESTARTS) {
      print(`kbis: ${restarts.length} workers died within ${RESTART_WINDOW_MS / 1000} s; stopping`)
      void stop(1)
      return
    }
    print(`worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting a new one`)
    fork()
  })

  const stop = async (exitCode: number) => {
    if (stopping) return
    stopping = true
    const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead())
    const exited = Promise.all(alive.map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve())))))
    for (const w of alive) w.process.kill('SIGTERM')
    // Each worker drains within KBIS_SHUTDOWN_TIMEOUT; one that hangs past that is killed.
    const hard = setTimeout(() => { for (const w of alive) if (!w.isDead()) w.process.kill('SIGKILL') }, (config.shutdownTimeoutSeconds + 5) * 1000)
    await exited
    clearTimeout(hard)
    await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()))
    if (exitCode === 0) print(STOPPED_LINE)
    process.exit(exitCode)
  }
  for (let i = 0; i < workers; i++) fork()
}

export function isWorker(): boolean {
  return cluster.isWorker
}

/**
 * A worker of `--workers`: the primary bootstrapped the store and serves the metrics. One that
 * cannot start tells the primary why and exits with WORKER_CANNOT_START.
 */
export async function startWorker(config: Config, print: (line: string) => void): Promise<RunningServer> {
  try {
    return await startServer(config, print, { bootstrap: false, metrics: false, announce: false })
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err)
    return new Promise<never>(() => {
      if (process.send) process.send({ cannotStart: reason }, () => process.exit(WORKER_CANNOT_START))
      else process.exit(WORKER_CANNOT_START)
    })
  }
}
