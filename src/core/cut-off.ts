import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyRequest } from 'fastify'
import { withTransactions, type Db, type TransactionOptions, type Tx } from '../store/db.js'

/*
 * A shutdown past its timeout (server.ts) closes the connections still busy, and the transactions
 * of their requests roll back (Db.interrupt). A request whose transaction had begun to commit is
 * the exception: it has changed the data, and an answer cut off would read to its client as a
 * failure (a bulk it would send again). Its connection is left to finish the answer, in the
 * seconds the process has before it exits.
 */

/** Requests whose transaction has begun to commit. */
const owed = new WeakSet<IncomingMessage>()
/** Requests whose connection the shutdown closed: none of their transactions commits from then on. */
const cut = new WeakSet<IncomingMessage>()

/** What a request's transactions record before each commit (marksWritten). */
const marks = new WeakMap<IncomingMessage, (tx: Tx) => Promise<void>>()

/**
 * Runs `mark` in each transaction of `request`'s services, last, before it commits: whatever the
 * request must record exactly when its changes commit (its Idempotency-Key's claim, written).
 * A transaction rolled back (a dry run, a failure) takes the mark with it.
 */
export function markWrites(request: FastifyRequest, mark: (tx: Tx) => Promise<void>): void {
  marks.set(request.raw, mark)
}

/** Whether `request`'s changes have begun to commit: its answer tells of a write, whatever comes after. */
export function answerOwed(request: FastifyRequest): boolean {
  return owed.has(request.raw)
}

/** As PGlite and PostgreSQL tell a transaction the shutdown ended (57P01 admin_shutdown): a 503, not a 500. */
function cutOffError(): Error {
  return Object.assign(new Error('the request was cut off by the shutdown timeout (KBIS_SHUTDOWN_TIMEOUT) and its transaction rolled back'), { code: '57P01' })
}

/**
 * `store` as `request`'s services write through it: a commit marks the request's answer as owed,
 * and a request cut off (one that was still waiting for the store, say) commits nothing after:
 * its transaction is checked as it begins and as it is about to commit (nothing runs between
 * that check and the store's COMMIT but the store's own synchronous steps).
 */
export function requestStore(request: FastifyRequest, store: Db): Db {
  const goOn = (): void => {
    if (cut.has(request.raw)) throw cutOffError()
  }
  return withTransactions(store, <T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> => {
    goOn()
    return store.transaction(async (tx) => {
      const result = await fn(tx)
      await marks.get(request.raw)?.(tx)
      goOn()
      return result
    }, {
      onCommit: () => {
        owed.add(request.raw)
        options?.onCommit?.()
      },
    })
  })
}

/** Closes each of `sockets` but those whose answer is owed; returns how many it left open. */
export function cutOff(sockets: Iterable<Socket>): number {
  let left = 0
  for (const socket of sockets) {
    const answer = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
    if (answer && owed.has(answer.req)) {
      left++
      continue
    }
    if (answer) cut.add(answer.req)
    socket.destroy()
  }
  return left
}
