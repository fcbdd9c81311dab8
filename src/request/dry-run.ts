import type { FastifyReply } from 'fastify'
import type { Db, Tx } from '../store/db.js'
import type { RequestContext } from './context.js'

/** Carries a dry run's result out of the transaction it rolls back. */
class RolledBack<T> extends Error {
  constructor(readonly value: T) {
    super("dry run rolled back")
  }
}

/** The store as seen inside one open transaction: nested transactions join it, nothing is notified. */
function joined(db: Db, tx: Tx): Db {
  return {
    kind: db.kind,
    get onQuery() {
      return db.onQuery
    },
    set onQuery(hook) {
      db.onQuery = hook
    },
    query: (sql, params, options) => tx.query(sql, params, options),
    transaction: (fn) => fn(tx),
    listen: (channel, onMessage, events) => db.listen(channel, onMessage, events),
    notify: async () => {},
    close: async () => {},
  }
}

/**
 * `?dry_run=true` (CONTRACT §16): runs the write exactly as the real request would, every check
 * and every statement, inside one transaction that is then rolled back, so nothing is kept and
 * nothing emitted (whatever the write records in the same transaction, events included, goes
 * with it). Errors are those of the real request, since the same code raises them.
 */
export async function dryRun<T>(ctx: RequestContext, write: (ctx: RequestContext) => Promise<T>): Promise<T> {
  try {
    await ctx.db.transaction(async (tx) => {
      throw new RolledBack(await write({ ...ctx, db: joined(ctx.db, tx) }))
    })
  } catch (err) {
    if (err instanceof RolledBack) return err.value as T
    throw err
  }
  throw new Error('unreachable: a dry run always rolls back')
}

/** The answer of a successful dry run. */
export function dryRunBody(items: number): { data: null; meta: { dry_run: true; items: number } } {
  return { data: null, meta: { dry_run: true, items } }
}

/** A route's `dry_run` and `merge` query parameters (OpenAPI documents them from here). */
export const dryRunQuery = {
  dry_run: {
    type: 'boolean',
    default: false,
    description: 'true: run every check of the write (schema, metamodel, uniqueness, access), write nothing, and answer 200 {"data": null, "meta": {"dry_run": true, "items": <count>}}; errors as the real request.',
  },
} as const

/**
 * Sends a dry run's 200 answer. Its own serializer: the route's 200 schema (if any) describes
 * the real answer (a record), not this one.
 */
export function sendDryRun(reply: FastifyReply, items: number): FastifyReply {
  return reply.code(200).type('application/json; charset=utf-8').serializer(JSON.stringify).send(dryRunBody(items))
}

/** `?dry_run=true` on every write (CONTRACT §16); any other parameter is refused (400). */
export const writeQuery = { type: 'object', properties: { ...dryRunQuery }, additionalProperties: false } as const

/** PUT's query: dry_run, and merge. */
export const upsertQuery = {
  type: 'object',
  properties: {
    ...dryRunQuery,
    merge: {
      type: 'boolean',
      default: false,
      description: 'false (default): replace name, access domain and properties (properties not sent are cleared). true: merge as PATCH (properties key by key, null clears; an omitted access domain is kept).',
    },
  },
  additionalProperties: false,
} as const

/** The answer of a successful `?dry_run=true`. */
export const dryRunEnvelope = {
  type: 'object',
  required: ['data', 'meta'],
  description: 'With dry_run=true: every check passed, nothing was written.',
  properties: {
    data: { type: 'null' },
    meta: { type: 'object', required: ['dry_run', 'items'], properties: { dry_run: { type: 'boolean', enum: [true] }, items: { type: 'integer' } } },
  },
} as const
