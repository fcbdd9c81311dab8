import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, Errors } from './errors.js'

/**
 * Per-organization concurrency cap, in process: one organization cannot take every pooled
 * connection and stall the others. Each process serves at most `limit` requests of one
 * organization at once (default: half the pool, at least 1); further requests of that
 * organization wait in line (first come, first served) for at most `maxWaitMs` (the app: three
 * statement timeouts, at least 30 s) and at most
 * `maxQueue` of them; past either bound they answer 503 `service_unavailable` with
 * `Retry-After: 1`. Other organizations are not affected: they have slots of their own.
 */
export class OrgConcurrency {
  private readonly orgs = new Map<string, { running: number; waiting: (() => void)[] }>()

  constructor(readonly limit: number, private readonly maxWaitMs: number, private readonly maxQueue = 1_000) {}

  /** Resolves with the release function once the organization has a free slot; throws 503 past the bounds. */
  async acquire(orgId: string): Promise<() => void> {
    let org = this.orgs.get(orgId)
    if (!org) {
      org = { running: 0, waiting: [] }
      this.orgs.set(orgId, org)
    }
    const state = org
    if (state.running >= this.limit) {
      if (state.waiting.length >= this.maxQueue) throw busy()
      await new Promise<void>((resolve, reject) => {
        const wake = () => { clearTimeout(timer); resolve() }
        const timer = setTimeout(() => {
          const at = state.waiting.indexOf(wake)
          if (at >= 0) state.waiting.splice(at, 1)
          reject(busy())
        }, this.maxWaitMs)
        timer.unref()
        state.waiting.push(wake)
      })
    } else {
      state.running++
    }
    let released = false
    return () => {
      if (released) return
      released = true
      // The slot passes to the next in line, if any (running stays the same); else it frees.
      const next = state.waiting.shift()
      if (next) next()
      else if (--state.running === 0) this.orgs.delete(orgId)
    }
  }

  /** Requests of the organization running now (tests, metrics). */
  running(orgId: string): number {
    return this.orgs.get(orgId)?.running ?? 0
  }
}

function busy(): AppError {
  return new AppError(Errors.SERVICE_UNAVAILABLE, "too many of the organization's requests are running at once; retry shortly", { 'Retry-After': '1' })
}

declare module 'fastify' {
  interface FastifyRequest {
    releaseOrgSlot?: () => void
  }
}

/**
 * The hooks: a slot once the body has arrived (after authentication and the rate limit), given
 * back when the answer is sent or the client goes away. A request whose body is still arriving
 * holds none: a client that never finishes its body (a stalled upload, or one on purpose) would
 * hold a slot until the request timeout, and a few of them would stop every request of its
 * organization. A request `answeredWithoutStore` says will be answered without the store takes
 * no slot.
 */
export function registerOrgConcurrency(api: FastifyInstance, gate: OrgConcurrency, answeredWithoutStore: (request: FastifyRequest) => boolean = () => false): void {
  api.addHook('preValidation', async (request, reply) => {
    if (answeredWithoutStore(request)) return
    const slot = await gate.acquire(request.auth.orgId)
    // Given back by onResponse, or by the response's 'close' (sent, failed, or the client went
    // away, when onResponse does not run), or by the connection's: the answer of a request
    // pipelined behind another waits in Node's queue, and when the connection closes first it
    // gets no 'close' of its own (its slot was held until a restart). Idempotent.
    const socket = request.raw.socket
    const release = (): void => {
      slot()
      reply.raw.removeListener('close', release)
      socket?.removeListener('close', release)
    }
    request.releaseOrgSlot = release
    // A client gone while waiting gives it back at once. (Not `request.raw.destroyed`: Node
    // destroys a request stream once its body has been read, so every request with a body gave
    // its slot back here and writes and searches ran without a limit; an outside audit.)
    if (reply.raw.destroyed || socket?.destroyed) return release()
    reply.raw.once('close', release)
    socket?.once('close', release)
  })
  const release = async (request: FastifyRequest) => request.releaseOrgSlot?.()
  api.addHook('onResponse', release)
}
