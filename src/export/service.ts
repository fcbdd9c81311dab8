import type { RequestContext } from '../request/context.js'
import { AppError, Errors } from '../core/errors.js'
import { Params } from '../store/sql.js'
import { scopeFilter } from '../access/scope.js'
import { parseListFilters, resolveListFilters } from '../query/list.js'
import { compileWhere } from '../query/where.js'
import type { Db } from '../store/db.js'
import { selectExportBatch, selectNdjsonBatch } from './sql.js'
import { csvLines } from './format.js'

export type ExportFormat = 'ndjson' | 'csv'

// Rows per statement: large enough that the per-statement cost vanishes, small enough that one
// batch (and its serialized text) stays a few MB. NDJSON by COPY (PostgreSQL) pays a few round
// trips a batch and arrives as bytes: 10,000 lines (about 4 MB of servers) a batch.
export const EXPORT_BATCH_SIZE = 1000
export const COPY_BATCH_SIZE = 10_000

/** Lines per NDJSON batch on this store: by COPY where the store has it (decision 0014). */
export function ndjsonBatchSize(db: Db): number {
  return db.copyLines ? COPY_BATCH_SIZE : EXPORT_BATCH_SIZE
}

export interface ExportPlan {
  /**
   * The export's text, batch by batch in id order (CSV: the header first); the next statement
   * runs only when the consumer asks for the next chunk.
   */
  chunks(): AsyncGenerator<string | Buffer>
}

/**
 * Checks and compiles an export (CONTRACT §16) before anything is sent: the filters of
 * `GET /assets` with the key's view scope, as the list does. CSV needs `filter[asset_type_key]`
 * (its columns are that type's properties).
 */
export function planExport(ctx: RequestContext, query: Record<string, unknown>, format: ExportFormat): ExportPlan {
  const typeKey = query['filter[asset_type_key]']
  if (format === 'csv' && typeof typeKey !== 'string') {
    throw new AppError(Errors.INVALID_FILTER, [{ detail: 'a CSV export needs filter[asset_type_key]: its columns are the properties of one asset type', parameter: 'filter[asset_type_key]' }])
  }
  const assetType = typeof typeKey === 'string' ? ctx.metamodel.assetTypes.get(typeKey) ?? null : null
  if (format === 'csv' && assetType === null) {
    throw new AppError(Errors.INVALID_FILTER, [{ detail: `unknown asset type ${JSON.stringify(typeKey)}`, parameter: 'filter[asset_type_key]' }])
  }
  const params = new Params()
  const where = compileWhere({
    target: 'assets', alias: 'a', orgId: ctx.auth.orgId,
    filter: resolveListFilters(parseListFilters(query), 'assets', ctx.metamodel), scope: scopeFilter(ctx.auth, 'view'),
  }, params)
  const compiled = { where, params }
  if (format === 'csv' && assetType !== null) {
    const type = assetType
    return {
      async *chunks() {
        yield csvLines(type, [], true)
        let afterId: string | null = null
        for (;;) {
          const rows = await selectExportBatch(ctx.db, compiled, afterId, EXPORT_BATCH_SIZE)
          if (rows.length > 0) yield csvLines(type, rows, false)
          if (rows.length < EXPORT_BATCH_SIZE) return
          afterId = rows[rows.length - 1]!.id
        }
      },
    }
  }
  const size = ndjsonBatchSize(ctx.db)
  // A batch read while the previous one is still being sent may fail before anyone awaits it:
  // it is marked handled at once (the await below still throws), or the process would crash.
  const read = (afterId: string | null) => {
    const batch = selectNdjsonBatch(ctx.db, compiled, afterId, size)
    batch.catch(() => undefined)
    return batch
  }
  return {
    // One batch read ahead: the store writes the next batch while this one goes out (on
    // PostgreSQL that is another process: both cores work), and never more than one.
    async *chunks() {
      let next = read(null)
      for (;;) {
        const batch = await next
        const more = batch.rows === size
        if (more) next = read(batch.lastId)
        yield* batch.chunks
        if (!more) return
      }
    },
  }
}
