import type { Db } from '../store/db.js'
import type { CountMemo, ResultMemo } from '../store/sql.js'
import type { AuthContext } from '../core/auth/context.js'
import type { LoadedMetamodel } from '../metamodel/service.js'

/** What a service needs of a request: the store, the caller and its organization's metamodel. */
export interface RequestContext {
  db: Db
  auth: AuthContext
  metamodel: LoadedMetamodel
  /** The request's Idempotency-Key header, when it sent one (CONTRACT §16); events carry it. */
  idempotencyKey?: string
  /** The request's X-Request-Id (CONTRACT §17); events carry it as `requestid`. */
  requestId?: string
  /** Counts this request may reuse and remember (counts/cache.ts). */
  counts?: CountMemo
  /** Analytics answers this request may reuse and remember (counts/cache.ts). */
  analytics?: ResultMemo<AggregateRows>
}

/** An aggregate's rows as the store answered them (analytics/service.ts). */
export interface AggregateRows {
  readonly groups: readonly Record<string, unknown>[]
  readonly breakdown: readonly Record<string, unknown>[] | null
}
