import type { FastifyRequest } from 'fastify'
import ipaddr from 'ipaddr.js'
import { BACKGROUND_SQL, type Db } from '../../store/db.js'
import { AppError, Errors } from '../errors.js'
import type { AuthContext } from './context.js'
import { effectivePermission, type KeyPermission, type UserPermission } from './permissions.js'
import { tokenMatches, tokenPrefix } from './tokens.js'
import type { Grant } from './levels.js'

interface KeyRow {
  id: string
  org_id: string
  org_key: string
  permission_type: KeyPermission
  role_keys: string[]
  owner_user_id: string
  secret_hash: Uint8Array
  owner_permission: UserPermission
  owner_enabled: boolean
  owner_sign_in_methods: string[]
  api_access: boolean
  ip_allowlist: string[]
  rate_limit_requests: number
  rate_limit_window_seconds: number
  grants: Grant[]
}

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number]

interface CachedKey {
  hash: Uint8Array
  orgId: string
  inactive: boolean
  apiAccess: boolean
  allowlist: Allowlist
  context: AuthContext
  loadedAt: number
}

// One statement finds the key, its owner, the organization and the grants of the key's roles.
// Only roles the owner still has count: a role taken from a user is taken from the user's keys
// too, as the permission type is (effective = min(key, owner)).
const keySql = (where: string): string => `
SELECT k.id, k.org_id, o.key AS org_key, k.permission_type, k.role_keys, k.owner_user_id, k.secret_hash,
       u.permission_type AS owner_permission, u.enabled AS owner_enabled,
       u.sign_in_methods AS owner_sign_in_methods,
       o.api_access, o.ip_allowlist, o.rate_limit_requests, o.rate_limit_window_seconds,
       (SELECT coalesce(jsonb_agg(g), '[]'::jsonb) FROM roles r, jsonb_array_elements(r.grants) g
         WHERE r.org_id = k.org_id AND r.key = ANY(k.role_keys) AND r.key = ANY(u.role_keys)) AS grants
FROM api_keys k
JOIN users u ON u.org_id = k.org_id AND u.id = k.owner_user_id
JOIN organizations o ON o.id = k.org_id
WHERE ${where}`

const KEY_SQL = keySql('k.secret_prefix = $1')
const KEY_BY_ID_SQL = keySql('k.org_id = $1 AND k.id = $2')

// The refusals of a key, as identify() and confirm() answer them.
const notValid = (): AppError => new AppError(Errors.UNAUTHORIZED, 'the API key is not valid')
const inactive = (): AppError => new AppError(Errors.API_KEY_INACTIVE, "the API key's owner is disabled or has no active sign-in method")
const noApiAccess = (): AppError => new AppError(Errors.API_ACCESS_DISABLED, "the organization's plan has no API access")

/**
 * The calling key's powers changed since its request was authenticated (another request, or
 * another process, changed it): {@link currentKey} carries the key as the store holds it now, to
 * judge the request with. Unhandled, it is a 503 to send the request again.
 */
export class KeyChanged extends AppError {
  constructor(readonly current: AuthContext) {
    super(Errors.SERVICE_UNAVAILABLE, "the API key's permissions changed while the request ran; send it again", { 'Retry-After': '1' })
  }
}

/**
 * Throws unless the calling key, as the store holds it now, is still valid and has the powers the
 * request was authenticated with (a cached copy may lag a change another request has just made):
 * 401 revoked, 401 api_key_inactive, 403 no API access, {@link KeyChanged} with the key as it is
 * now when its permission type, owner's type, roles or grants differ.
 * `lock`, inside a transaction: the key's row stays as read until it ends (`share`; `update` when
 * the transaction changes that very key), so a change of its powers cannot commit in between: a
 * key that grants or mints keys is held to the rights it has when they are written (keys/service.ts).
 */
export async function confirmKey(db: Pick<Db, 'query'>, auth: AuthContext, lock?: 'share' | 'update'): Promise<void> {
  // The row is locked first, in a statement of its own: the key is then read in a new snapshot,
  // as it is after any change that was committing. (Locked in the same statement, a key whose owner
  // changed meanwhile was re-checked against the old owner's row and read as gone: a 401.)
  if (lock !== undefined) await db.query(`SELECT 1 FROM api_keys WHERE org_id = $1 AND id = $2 FOR ${lock === 'update' ? 'UPDATE' : 'SHARE'}`, [auth.orgId, auth.keyId])
  const row = (await db.query<KeyRow>(KEY_BY_ID_SQL, [auth.orgId, auth.keyId])).rows[0]
  const entry = row === undefined ? null : toEntry(row)
  if (entry !== null && !entry.inactive && entry.apiAccess && powers(entry.context) === powers(auth)) return
  if (entry === null) throw notValid()
  if (entry.inactive) throw inactive()
  if (!entry.apiAccess) throw noApiAccess()
  throw new KeyChanged(entry.context)
}

/** What a key may do, and for whom: a change of any of these since the cache read it matters to a write (a transfer changes the owner). */
function powers(context: AuthContext): string {
  return JSON.stringify([context.userId, context.keyPermission, context.ownerPermission, context.roleKeys, context.grants])
}

/** Entries live this long at most even without an invalidation message (a safety net). */
const MAX_AGE_MS = 30_000

function parseCidr(entry: string): Cidr {
  let range: ipaddr.IPv4 | ipaddr.IPv6
  let bits: number
  if (entry.includes('/')) [range, bits] = ipaddr.parseCIDR(entry)
  else [range, bits] = ((addr) => [addr, addr.kind() === 'ipv4' ? 32 : 128])(ipaddr.parse(entry))
  // An IPv4-mapped IPv6 range (::ffff:10.0.0.0/104) is the IPv4 range it maps: addresses are
  // compared in their IPv4 form (see normalize).
  if (range.kind() === 'ipv6' && (range as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(range as ipaddr.IPv6).toIPv4Address(), bits - 96]
  }
  return [range, bits]
}

/**
 * The API key a request names in `Authorization: Bearer <key>`, or null: also when the header
 * comes twice (Node keeps the first; a proxy in front may have read the other, so neither is sure).
 */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization
  const match = typeof header === 'string' ? /^Bearer +(\S+) *$/i.exec(header) : null
  if (!match) return null
  const raw = (request.raw as { rawHeaders?: string[] } | undefined)?.rawHeaders ?? []
  let seen = 0
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization' && ++seen > 1) return null
  return match[1]!
}

/**
 * The organization's allowlist entries (CIDRs or single addresses, IPv4 or IPv6). An entry that
 * does not parse matches nothing but still counts: a list of only bad entries must not turn
 * into "any address" (fail closed).
 */
export function parseAllowlist(entries: readonly string[]): Allowlist {
  const ranges: Cidr[] = []
  for (const entry of entries) {
    try {
      ranges.push(parseCidr(entry.trim()))
    } catch {
      // kept out of `ranges`; `restricted` below still holds
    }
  }
  return { restricted: entries.length > 0, ranges }
}

export interface Allowlist {
  /** false = the organization allows any address (empty list). */
  restricted: boolean
  ranges: Cidr[]
}

/** IPv4-mapped IPv6 addresses (::ffff:10.0.0.1, what a dual-stack socket reports) compare as IPv4. */
function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  try {
    const addr = ipaddr.parse(address)
    return addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()
      ? (addr as ipaddr.IPv6).toIPv4Address()
      : addr
  } catch {
    return null
  }
}

export function addressAllowed(address: string, allowlist: Allowlist): boolean {
  if (!allowlist.restricted) return true
  const addr = normalize(address)
  if (!addr) return false
  return allowlist.ranges.some(([range, bits]) => addr.kind() === range.kind() && addr.match(range, bits))
}

/**
 * Resolves the Bearer key of a request to an AuthContext. Keys are cached in memory; every change to
 * keys, users, roles or organizations sends `kbis_invalidate` (LISTEN/NOTIFY on PostgreSQL, in
 * process on PGlite), which empties the cache in every server process.
 */
export class Authenticator {
  private readonly cache = new Map<string, CachedKey>()
  private readonly lastUsed = new Map<string, { orgId: string; at: Date }>()

  constructor(private readonly db: Db) {}

  invalidate(): void {
    this.cache.clear()
  }

  async authenticate(request: FastifyRequest): Promise<AuthContext> {
    const { context, refusal } = await this.identify(request)
    if (refusal) throw refusal
    return context
  }

  /**
   * The key's context, and the refusal (403) of a valid key whose organization may not use the
   * API from here (its plan, its IP allowlist): the answer of such a key is still an
   * authenticated one, with the organization's quota headers (CONTRACT §10). Throws the 401s.
   */
  async identify(request: FastifyRequest): Promise<{ context: AuthContext; refusal: AppError | null }> {
    const token = bearerToken(request)
    if (token === null) throw new AppError(Errors.UNAUTHORIZED, 'send an API key as "Authorization: Bearer <key>"')
    const prefix = tokenPrefix(token)
    const entry = prefix ? await this.lookup(prefix) : null
    if (!entry || !tokenMatches(token, entry.hash)) throw notValid()
    if (entry.inactive) throw inactive()
    if (!entry.apiAccess) return { context: entry.context, refusal: noApiAccess() }
    if (!addressAllowed(request.ip, entry.allowlist)) {
      // A trusted proxy's header may name no address at all: its words are not repeated.
      const address = ipaddr.isValid(request.ip) ? `the address ${request.ip}` : 'the client address a trusted proxy gave (not an IP address)'
      return { context: entry.context, refusal: new AppError(Errors.IP_NOT_ALLOWED, `${address} is not in the organization's IP allowlist`) }
    }
    this.lastUsed.set(entry.context.keyId, { orgId: entry.orgId, at: new Date() })
    return { context: entry.context, refusal: null }
  }

  /**
   * Before a write on PostgreSQL, where other processes change keys: the key as the store has it
   * now, against the cached copy this request was authenticated with. A key revoked or changed by
   * another process is known here only once its notification arrives (milliseconds); a write sent
   * after the change was answered is judged by it all the same, on every process (CONTRACT §17):
   * revoked: 401; owner disabled: 401 api_key_inactive; plan without API access: 403 (thrown);
   * other permission types or roles: the key as it is now is returned, for the request to be judged
   * with (a raised key may write, a lowered one gets the 403 of its new powers). The cache is
   * emptied whenever the store's key differs from it.
   */
  async confirm(db: Pick<Db, 'query'>, auth: AuthContext): Promise<AuthContext> {
    try {
      await confirmKey(db, auth)
      return auth
    } catch (err) {
      this.invalidate()
      if (err instanceof KeyChanged) return err.current
      throw err
    }
  }

  private async lookup(prefix: string): Promise<CachedKey | null> {
    const cached = this.cache.get(prefix)
    if (cached && Date.now() - cached.loadedAt < MAX_AGE_MS) return cached
    const row = (await this.db.query<KeyRow>(KEY_SQL, [prefix])).rows[0]
    if (!row) {
      this.cache.delete(prefix)
      return null
    }
    const entry = toEntry(row)
    this.cache.set(prefix, entry)
    return entry
  }

  /** Writes the batched `last_used_at` values: one statement per flush, not one per request. */
  async flushLastUsed(): Promise<void> {
    if (this.lastUsed.size === 0) return
    const entries = [...this.lastUsed.entries()]
    this.lastUsed.clear()
    await this.db.query(
      `${BACKGROUND_SQL}UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
       FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS u(org_id, id, at)
       WHERE k.org_id = u.org_id AND k.id = u.id`,
      [entries.map(([, v]) => v.orgId), entries.map(([id]) => id), entries.map(([, v]) => v.at.toISOString())],
    )
  }
}

function toEntry(row: KeyRow): CachedKey {
  const context: AuthContext = {
    orgId: row.org_id,
    orgKey: row.org_key,
    keyId: row.id,
    userId: row.owner_user_id,
    keyPermission: row.permission_type,
    ownerPermission: row.owner_permission,
    permission: effectivePermission(row.permission_type, row.owner_permission),
    roleKeys: row.role_keys,
    grants: row.grants,
    rateLimit: { requests: row.rate_limit_requests, windowSeconds: row.rate_limit_window_seconds },
  }
  return {
    hash: row.secret_hash,
    orgId: row.org_id,
    inactive: !row.owner_enabled || row.owner_sign_in_methods.length === 0,
    apiAccess: row.api_access,
    allowlist: parseAllowlist(row.ip_allowlist),
    context,
    loadedAt: Date.now(),
  }
}
