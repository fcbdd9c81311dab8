import { AppError, Errors } from '../core/errors.js'
import { callerKeyId, type AuthContext } from '../core/auth/context.js'
import { confirmKey, KeyChanged } from '../core/auth/authenticate.js'
import { permissionAtLeast, type KeyPermission } from '../core/auth/permissions.js'
import type { Queryable } from '../store/db.js'
import { isUuid } from '../core/time.js'
import { offsetOf, pageMeta, type Page } from '../core/pagination.js'
import type { PageMeta } from '../core/pagination.js'
import type { Db } from '../store/db.js'
import { INVALIDATE_CHANNEL } from '../core/channels.js'
import { storeNewKey } from './create.js'
import { deleteApiKey, selectApiKey, selectApiKeyPage, selectExistingRoleKeys, selectKeyOwner, updateApiKey, type ApiKeyRow, type KeyOwner } from './sql.js'
import { toApiKeyRecord, type ApiKeyRecord } from './mapper.js'
import { originOf } from '../outbox/write.js'

/**
 * THE rules of API keys (CONTRACT §9), for the routes (src/admin/routes.ts) and the CLI
 * (keys/cli.ts, which acts as the organization's operator: no calling key).
 */

/** What the key services need of a request. */
export interface KeysContext {
  db: Db
  auth: AuthContext
  /** For the events of key changes (CONTRACT §13). */
  requestId?: string
  idempotencyKey?: string
}

interface PageOf<T> {
  data: T[]
  page: PageMeta
}

export interface KeyInput {
  name: string
  description?: string | null
  permission_type: KeyPermission
  role_keys: string[]
  owner_user_id?: string
}

export type KeyPatch = Partial<KeyInput>

/** Viewers manage no keys; Editors their own; Admins (and Owners, who act as Admin) all (CONTRACT §9). */
export function requireKeyManager(auth: AuthContext): void {
  if (auth.permission === 'Viewer') throw new AppError(Errors.FORBIDDEN, 'a Viewer key cannot manage API keys')
}

const managesAll = (auth: AuthContext): boolean => auth.permission === 'Admin'

/** A key the caller may not manage answers 404 like an unknown one: its existence is not revealed. */
function assertVisible(auth: AuthContext, id: string, row: ApiKeyRow | null): ApiKeyRow {
  if (!row || (!managesAll(auth) && row.owner_user_id !== auth.userId)) throw new AppError(Errors.NOT_FOUND, `API key ${id} not found`)
  return row
}

/** A key may not get a permission type above its creator's effective one. */
function checkPermissionCeiling(auth: AuthContext, wanted: KeyPermission): void {
  if (!permissionAtLeast(auth.permission, wanted)) {
    throw new AppError(Errors.FORBIDDEN, [{
      detail: `a key acting as ${auth.permission} cannot give a key the ${wanted} permission type`,
      pointer: '/permission_type',
    }])
  }
}

/**
 * Raising a key's permission type grants its roles anew, at the higher level: a key below Admin
 * may raise only a key whose roles it holds itself (a Viewer key of `all` raised to Editor by a
 * narrowly scoped Editor key wrote where that key may not).
 */
function checkRaise(auth: AuthContext, permission: KeyPermission, roleKeys: readonly string[]): void {
  if (managesAll(auth)) return
  const beyond = roleKeys.filter((key) => !auth.roleKeys.includes(key))
  if (beyond.length === 0) return
  throw new AppError(Errors.FORBIDDEN, beyond.map((key) => ({
    detail: `raising the key to ${permission} grants its role ${key} anew, which this key does not hold; a key acting as ${auth.permission} grants only roles it holds itself`,
    pointer: '/permission_type',
  })))
}

function checkTransferAllowed(auth: AuthContext, ownerId: string): void {
  if (ownerId !== auth.userId && !managesAll(auth)) {
    throw new AppError(Errors.FORBIDDEN, [{ detail: 'only an Admin key may give a key to another user', pointer: '/owner_user_id' }])
  }
}

async function loadOwner(tx: Queryable, orgId: string, ownerId: string): Promise<KeyOwner> {
  const owner = isUuid(ownerId) ? await selectKeyOwner(tx, orgId, { id: ownerId }) : null
  if (!owner) throw new AppError(Errors.VALIDATION_FAILED, [{ detail: `no user ${ownerId} in the organization`, pointer: '/owner_user_id' }])
  return owner
}

/**
 * Unknown roles are a 422 (a typo in the body); known roles the owner user lacks are a 403: "an
 * editor can assign to a key only the roles the editor already has" — for a key given to another
 * user by an Admin, the roles that user has. A calling key below Admin (`grantor`) may moreover
 * grant only roles it holds itself (CONTRACT §9): a narrowly scoped key never mints a wider one,
 * whatever its owner holds. The operator (the CLI) has no calling key: `grantor` null.
 */
export async function checkRoles(tx: Queryable, orgId: string, roleKeys: readonly string[], owner: KeyOwner, grantor: AuthContext | null, kept: ReadonlySet<string> = new Set()): Promise<void> {
  const existing = await selectExistingRoleKeys(tx, orgId, roleKeys)
  const unknown = roleKeys.flatMap((key, index) => (existing.has(key) || kept.has(key) ? [] : [{ key, index }]))
  if (unknown.length > 0) {
    throw new AppError(Errors.VALIDATION_FAILED, unknown.map((u) => ({ detail: `no role ${u.key} in the organization`, pointer: `/role_keys/${u.index}` })))
  }
  const lacking = roleKeys.flatMap((key, index) => (owner.role_keys.includes(key) || kept.has(key) ? [] : [{ key, index }]))
  if (lacking.length > 0) {
    throw new AppError(Errors.FORBIDDEN, lacking.map((l) => ({
      detail: `user ${owner.email} does not have the role ${l.key}; a key gets only roles its owner has`,
      pointer: `/role_keys/${l.index}`,
    })))
  }
  if (grantor === null || managesAll(grantor)) return
  const beyond = roleKeys.flatMap((key, index) => (grantor.roleKeys.includes(key) || kept.has(key) ? [] : [{ key, index }]))
  if (beyond.length > 0) {
    throw new AppError(Errors.FORBIDDEN, beyond.map((b) => ({
      detail: `this key does not hold the role ${b.key}; a key acting as ${grantor.permission} grants only roles it holds itself`,
      pointer: `/role_keys/${b.index}`,
    })))
  }
}

export async function listKeys(ctx: KeysContext, page: Page): Promise<PageOf<ApiKeyRecord>> {
  requireKeyManager(ctx.auth)
  const owner = managesAll(ctx.auth) ? null : ctx.auth.userId
  const { rows, total } = await selectApiKeyPage(ctx.db, ctx.auth.orgId, owner, page.size, offsetOf(page))
  return { data: rows.map(toApiKeyRecord), page: pageMeta(page, total) }
}

export async function getKey(ctx: KeysContext, id: string): Promise<ApiKeyRecord> {
  requireKeyManager(ctx.auth)
  const row = isUuid(id) ? await selectApiKey(ctx.db, ctx.auth.orgId, id) : null
  return toApiKeyRecord(assertVisible(ctx.auth, id, row))
}

/**
 * A name of blanks alone names nothing: refused as an empty one is (the schema's minLength), as
 * the CLI (`--name`) and the console's form refuse it.
 */
function checkName(name: string | undefined): void {
  if (name !== undefined && name.trim() === '') {
    throw new AppError(Errors.VALIDATION_FAILED, [{ detail: 'name must not be empty (blanks alone are no name)', pointer: '/name' }])
  }
}

/** Creates a key; the returned record carries the secret, which is never shown again. */
export async function createKey(ctx: KeysContext, input: KeyInput): Promise<ApiKeyRecord & { secret: string }> {
  checkName(input.name)
  return asCallerIsNow(ctx, (ctx) => createKeyAs(ctx, input))
}

async function createKeyAs(ctx: KeysContext, input: KeyInput): Promise<ApiKeyRecord & { secret: string }> {
  requireKeyManager(ctx.auth)
  const ownerId = input.owner_user_id ?? ctx.auth.userId
  checkTransferAllowed(ctx.auth, ownerId)
  checkPermissionCeiling(ctx.auth, input.permission_type)
  return ctx.db.transaction(async (tx) => {
    await holdCaller(tx, ctx.auth)
    const owner = await loadOwner(tx, ctx.auth.orgId, ownerId)
    await checkRoles(tx, ctx.auth.orgId, input.role_keys, owner, ctx.auth)
    return storeNewKey(tx, originOf(ctx), { ...input, description: input.description ?? null, owner_user_id: owner.id })
  })
}

/**
 * The calling API key, read from the store and locked for the transaction, must still have the
 * powers its request was authenticated with (else KeyChanged: {@link asCallerIsNow} runs the
 * change again with the key as it is now): the ceilings below are checked against those powers,
 * and a concurrent change of them (an Admin removing the caller's role) must not be undone by a
 * grant the caller could make only before it. Without the lock an Editor key PATCHing itself while
 * an Admin took `all` from it gave itself `all` back (outside audit). A console user (no key) is
 * the operator's session, read at each page.
 */
async function holdCaller(tx: Queryable, auth: AuthContext, target?: string): Promise<void> {
  const keyId = callerKeyId(auth)
  if (keyId !== null) await confirmKey(tx, auth, keyId === target ? 'update' : 'share')
}

/**
 * Changes name, description, permission type, roles or (Admins only) the owner. The ceilings
 * apply to what changes: a new permission type against the caller, the resulting roles against the
 * (new) owner. Every server drops its cached copy of the key afterwards.
 */
export async function updateKey(ctx: KeysContext, id: string, patch: KeyPatch): Promise<ApiKeyRecord> {
  checkName(patch.name)
  return asCallerIsNow(ctx, (ctx) => updateKeyAs(ctx, id, patch))
}

/**
 * Runs a change of keys as the calling key is when it is written: when its powers changed after
 * the request was authenticated (another request, another process; its transaction rolled back),
 * once more, judged wholly with the key as the store holds it now. Changed yet again meanwhile:
 * 503 with Retry-After, to send it again.
 */
async function asCallerIsNow<T>(ctx: KeysContext, run: (ctx: KeysContext) => Promise<T>): Promise<T> {
  try {
    return await run(ctx)
  } catch (err) {
    if (!(err instanceof KeyChanged)) throw err
    return run({ ...ctx, auth: err.current })
  }
}

async function updateKeyAs(ctx: KeysContext, id: string, patch: KeyPatch): Promise<ApiKeyRecord> {
  requireKeyManager(ctx.auth)
  const row = await ctx.db.transaction(async (tx) => {
    await holdCaller(tx, ctx.auth, id)
    const current = assertVisible(ctx.auth, id, isUuid(id) ? await selectApiKey(tx, ctx.auth.orgId, id, true) : null)
    const ownerId = patch.owner_user_id ?? current.owner_user_id
    if (ownerId !== current.owner_user_id) checkTransferAllowed(ctx.auth, ownerId)
    const permission = patch.permission_type ?? current.permission_type
    if (permission !== current.permission_type) checkPermissionCeiling(ctx.auth, permission)
    const roleKeys = patch.role_keys ?? current.role_keys
    if (!permissionAtLeast(current.permission_type, permission)) checkRaise(ctx.auth, permission, roleKeys)
    // A role the key holds already grants nothing when it is sent back (a form re-sends every
    // field): only the roles it adds are checked, and every role when the key changes hands.
    const kept = new Set(ownerId === current.owner_user_id ? current.role_keys : [])
    if (roleKeys.some((r) => !kept.has(r))) {
      await checkRoles(tx, ctx.auth.orgId, roleKeys, await loadOwner(tx, ctx.auth.orgId, ownerId), ctx.auth, kept)
    }
    return updateApiKey(tx, originOf(ctx), current, {
      name: patch.name ?? current.name,
      description: patch.description !== undefined ? patch.description : current.description,
      permission_type: permission,
      role_keys: roleKeys,
      owner_user_id: ownerId,
    })
  })
  await ctx.db.notify(INVALIDATE_CHANNEL, ctx.auth.orgId)
  return toApiKeyRecord(row)
}

/** Deletes a key for good; it stops working at once in every server (cache invalidation). */
export async function deleteKey(ctx: KeysContext, id: string): Promise<void> {
  requireKeyManager(ctx.auth)
  await ctx.db.transaction(async (tx) => {
    const row = assertVisible(ctx.auth, id, isUuid(id) ? await selectApiKey(tx, ctx.auth.orgId, id, true) : null)
    await deleteApiKey(tx, originOf(ctx), row.id)
  })
  await ctx.db.notify(INVALIDATE_CHANNEL, ctx.auth.orgId)
}
