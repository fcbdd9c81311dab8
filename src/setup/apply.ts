import { v7 as uuidv7 } from 'uuid'
import type { Db, Tx } from '../store/db.js'
import { applyAccessDomains, applyRoles, applyUsers } from './apply-access.js'
import { applyAssetTypes } from './apply-types.js'
import { applyRelationshipTypes } from './apply-relationships.js'
import type { ApplyContext } from './context.js'
import { fieldChanges } from './diff.js'
import { validateSetup } from './validate.js'
import { checkReferences, undefinedEndTypes } from './references.js'
import { loadState, lockOrganization, type OrgState } from './state.js'
import { SetupError, withSource, type ApplyReport, type OrganizationSpec, type SetupFile } from './types.js'
import { syncProjection } from '../projection/sync.js'
import { INVALIDATE_CHANNEL } from '../core/channels.js'
import { pushAll } from '../core/arrays.js'
import { TransientConflict } from '../store/retry.js'

export type { ApplyReport } from './types.js'

/** The organization as the report shows it: `rate_limit 6000 per 60 s`. */
function display(o: OrganizationSpec): Omit<OrganizationSpec, 'rate_limit'> & { rate_limit: string } {
  return { ...o, rate_limit: `${o.rate_limit.requests} per ${o.rate_limit.window_seconds} s` }
}

async function upsertOrganization(tx: Tx, spec: OrganizationSpec, changes: string[]): Promise<{ id: string; created: boolean }> {
  const values = [spec.name, spec.api_access, spec.rate_limit.requests, spec.rate_limit.window_seconds, spec.ip_allowlist]
  const before = await lockOrganization(tx, spec.key)
  if (!before) {
    const id = uuidv7()
    // Two applies creating one new organization at once (PostgreSQL): the second's insert waits
    // for the first and then finds the key taken; its transaction runs again and finds the
    // organization to lock and update, as it would have a moment later.
    const inserted = await tx.query(
      `INSERT INTO organizations (id, key, name, api_access, rate_limit_requests, rate_limit_window_seconds, ip_allowlist)
       VALUES ($1, $2, $3, $4, $5, $6, $7::text[]) ON CONFLICT (key) DO NOTHING`,
      [id, spec.key, ...values],
    )
    if (inserted.rowCount === 0) throw new TransientConflict(`organization ${spec.key} was created by another kbis apply meanwhile`)
    changes.push(`organization ${spec.key}: created`)
    return { id, created: true }
  }
  const lines = fieldChanges(`organization ${spec.key}`, display(before), display(spec), ['name', 'api_access', 'rate_limit', 'ip_allowlist'])
  if (lines.length > 0) {
    await tx.query(
      `UPDATE organizations SET name = $2, api_access = $3, rate_limit_requests = $4, rate_limit_window_seconds = $5,
         ip_allowlist = $6::text[], updated_at = now() WHERE id = $1`,
      [before.id, ...values],
    )
    pushAll(changes, lines)
  }
  return { id: before.id, created: false }
}

function storeKeys(state: OrgState): Parameters<typeof checkReferences>[1] {
  return {
    accessDomains: new Set(state.accessDomains.keys()),
    assetTypes: new Set(state.assetTypes.keys()),
    roles: new Set(state.roles.keys()),
  }
}

async function applyInTransaction(tx: Tx, setup: SetupFile): Promise<ApplyReport> {
  const changes: string[] = []
  const org = await upsertOrganization(tx, setup.organization, changes)
  const state = await loadState(tx, org.id)
  // References into sections the file does not list resolve against the store.
  const problem = checkReferences(setup, storeKeys(state))
  if (problem) throw new SetupError(withSource(setup.source, problem))
  const ctx: ApplyContext = { tx, orgId: org.id, orgKey: setup.organization.key, setup, state, changes, metamodelChanges: 0 }
  await applyAccessDomains(ctx)
  await applyAssetTypes(ctx)
  await applyRelationshipTypes(ctx)
  await applyRoles(ctx)
  await applyUsers(ctx)
  if (ctx.metamodelChanges > 0) {
    await tx.query('UPDATE organizations SET metamodel_version = metamodel_version + 1, updated_at = now() WHERE id = $1', [org.id])
    // Widen the typed projection of search and analytics in the same transaction (src/projection/).
    await syncProjection(tx, org.id)
  }
  const warnings = undefinedEndTypes(setup, storeKeys(state)).map((w) => withSource(setup.source, w))
  return { organization: { key: setup.organization.key, id: org.id, created: org.created }, changes, warnings }
}

/**
 * Applies a set-up file to the store: one transaction, idempotent, declarative for the sections
 * the file lists (docs/configuration.md). `setup` may come straight from `loadSetupFile` or be a
 * plain object of the file's shape (it is validated again either way). Throws `SetupError` (one
 * line; nothing written) when the file is invalid or existing data contradicts a metamodel change.
 * After commit, running servers are told to drop their caches of the organization.
 *
 * @example
 * const report = await applySetup(db, await loadSetupFile('acme.yaml'))
 * // { organization: { key: 'acme', id: '0190…', created: false }, changes: ['property server.cpu_count: type number → integer'] }
 */
export async function applySetup(db: Db, setup: SetupFile): Promise<ApplyReport> {
  const { source, ...file } = setup as SetupFile & Record<string, unknown>
  const valid = validateSetup(file, typeof source === 'string' ? source : undefined)
  const report = await db.transaction((tx) => applyInTransaction(tx, valid))
  if (report.changes.length > 0) await db.notify(INVALIDATE_CHANNEL, report.organization.id)
  return report
}
