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

/** `store` as `request`'s services write through it: a commit marks the request's answer as owed. */
export function requestStore(request: FastifyRequest, store: Db): Db {
  return withTransactions(store, <T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> =>
    store.transaction(fn, {
      onCommit: () => {
        owed.add(request.raw)
        options?.onCommit?.()
      },
    }))
}

/** Closes each of `sockets` but those whose answer is owed; returns how many it left open. */
export function cutOff(sockets: Iterable<Socket>): number {
  let left = 0
  for (const socket of sockets) {
    const answer = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
    if (answer && owed.has(answer.req)) left++
    else socket.destroy()
  }
  return left
}
