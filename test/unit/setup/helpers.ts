import { v7 as uuidv7 } from 'uuid'
import type { Db } from '../../../src/store/db.js'
import { applySetup } from '../../../src/setup/apply.js'
import type { ApplyReport, SetupFile } from '../../../src/setup/types.js'

/** A small organization with a bit of everything; a fresh copy on every call. */
export function baseSetup(org: string) {
  return {
    organization: { key: org, name: 'Acme' },
    access_domains: [
      { key: 'it', name: 'IT' },
      { key: 'finance', name: 'Finance' },
    ],
    roles: [
      { key: 'all', name: 'Everything', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] },
      { key: 'it_editor', name: 'IT editor', grants: [{ access_domain_key: 'it', asset_type_keys: ['server'], level: 'delete' }] },
    ],
    users: [
      { email: 'owner@acme.test', name: 'Owner', permission_type: 'Owner', role_keys: ['all'], sign_in_methods: ['password'] },
      { email: 'editor@acme.test', name: 'Editor', permission_type: 'Editor', role_keys: ['it_editor'], sign_in_methods: ['password'] },
    ],
    metamodel: {
      asset_types: [
        {
          key: 'server',
          name: 'Server',
          properties: [
            { key: 'hostname', type: 'unique_key', required: true },
            { key: 'environment', type: 'select', options: ['dev', 'staging', 'prod'] },
            { key: 'cpu_count', type: 'integer', min: 1, max: 256 },
            { key: 'owner', type: 'text' },
          ] as Record<string, unknown>[],
        },
        { key: 'application', name: 'Application', properties: [{ key: 'code', type: 'unique_key' }] as Record<string, unknown>[] },
      ],
      relationship_types: [
        { key: 'runs_on', name: 'Runs on', source_asset_type_keys: ['application'], target_asset_type_keys: ['server'] },
        { key: 'depends_on' } as Record<string, unknown>,
      ],
    },
  }
}

export type BaseSetup = ReturnType<typeof baseSetup>

export function apply(db: Db, setup: unknown): Promise<ApplyReport> {
  return applySetup(db, setup as SetupFile)
}

/** The rejection of `promise` as `Name: message`, to compare whole messages. */
export async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`
  }
  throw new Error('expected a failure')
}

export async function givenAsset(
  db: Db, orgId: string, type: string, properties: Record<string, unknown>,
  options: { archived?: boolean; domain?: string | null; uniqueValue?: string | null } = {},
): Promise<string> {
  const id = uuidv7()
  await db.query(
    `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, archived_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, CASE WHEN $8::boolean THEN now() END, now(), now())`,
    [orgId, id, type, `asset ${id.slice(-6)}`, options.domain ?? null, JSON.stringify(properties), options.uniqueValue ?? null, options.archived ?? false],
  )
  return id
}

export async function givenRelationship(db: Db, orgId: string, type: string, source: string, target: string): Promise<string> {
  const id = uuidv7()
  await db.query(
    `INSERT INTO relationships (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, now(), now())`,
    [orgId, id, type, source, target],
  )
  return id
}

const SNAPSHOT: Record<string, string> = {
  organizations: 'SELECT * FROM organizations WHERE id = $1',
  access_domains: 'SELECT * FROM access_domains WHERE org_id = $1 ORDER BY key',
  roles: 'SELECT * FROM roles WHERE org_id = $1 ORDER BY key',
  users: 'SELECT * FROM users WHERE org_id = $1 ORDER BY email',
  api_keys: 'SELECT id, role_keys, updated_at FROM api_keys WHERE org_id = $1 ORDER BY id',
  asset_types: 'SELECT * FROM asset_types WHERE org_id = $1 ORDER BY key',
  property_definitions: 'SELECT * FROM property_definitions WHERE org_id = $1 ORDER BY asset_type_key, key',
  relationship_types: 'SELECT * FROM relationship_types WHERE org_id = $1 ORDER BY key',
  assets: 'SELECT id, asset_type_key, properties, unique_value FROM assets WHERE org_id = $1 ORDER BY id',
  relationships: 'SELECT id, relationship_type_key FROM relationships WHERE org_id = $1 ORDER BY id',
}

/** Every row of an organization, to show that a refused or repeated apply wrote nothing. */
export async function snapshot(db: Db, orgId: string): Promise<Record<string, unknown[]>> {
  const result: Record<string, unknown[]> = {}
  for (const [table, sql] of Object.entries(SNAPSHOT)) result[table] = (await db.query(sql, [orgId])).rows
  return result
}

export async function metamodelVersion(db: Db, orgId: string): Promise<number> {
  const row = (await db.query<{ v: number }>('SELECT metamodel_version AS v FROM organizations WHERE id = $1', [orgId])).rows[0]
  return Number(row?.v)
}

export async function givenApiKey(db: Db, orgId: string, ownerEmail: string, roleKeys: string[]): Promise<string> {
  const id = uuidv7()
  await db.query(
    `INSERT INTO api_keys (org_id, id, name, permission_type, role_keys, owner_user_id, secret_prefix, secret_hash)
     SELECT $1, $2, 'test', 'Admin', $3::text[], u.id, $4, '\\x00'::bytea FROM users u WHERE u.org_id = $1 AND u.email = $5`,
    [orgId, id, roleKeys, `p_${id}`, ownerEmail],
  )
  return id
}
