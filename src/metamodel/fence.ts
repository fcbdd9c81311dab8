import { AppError, Errors } from '../core/errors.js'
import { withTransactions, type Db, type TransactionOptions, type Tx } from '../store/db.js'
import { lockMetamodelVersion } from './sql.js'

/**
 * A write request's store: each of its transactions first takes a share of its organization's
 * row and checks that the metamodel is still the one the request was validated against.
 *
 * `kbis apply` locks that row (FOR UPDATE) before it checks the data against a metamodel change,
 * and holds it until it commits. So a write in flight when an apply starts finishes first, and
 * the apply sees its values (and refuses a change they contradict); a write validated against the
 * old metamodel whose transaction starts later waits for the apply, then finds the version moved
 * and writes nothing: 503 with Retry-After, after which it is validated against the new one
 * (`onChanged` drops the cached metamodel, which the apply's notification also does). Without the
 * fence a bulk of `staging` values could commit just after an apply removed that option.
 * PGlite runs one transaction at a time: there the check alone tells an apply that ran between a
 * request's validation and its transaction.
 */
export function fencedStore(store: Db, orgId: string, version: number, onChanged: () => void): Db {
  return withTransactions(store, <T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> =>
    store.transaction(async (tx) => {
      if ((await lockMetamodelVersion(tx, orgId)) !== version) {
        onChanged()
        throw new AppError(Errors.SERVICE_UNAVAILABLE, 'the organization\'s metamodel changed while this request ran (kbis apply); nothing was written: send it again', { 'Retry-After': '1' })
      }
      return fn(tx)
    }, options))
}
