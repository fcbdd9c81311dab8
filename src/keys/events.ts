import type { Queryable } from '../store/db.js'
import { sameJson, writeEvents, type EventOrigin } from '../outbox/write.js'
import type { EventData } from '../outbox/cloud-event.js'
import { toApiKeyRecord } from './mapper.js'
import type { ApiKeyRow } from './sql.js'

const API_KEY_FIELDS = ['name', 'description', 'permission_type', 'role_keys', 'owner_user_id'] as const

/** The record fields of a key that differ between `before` and `after` (what `api_key.updated` lists). */
export function changedKeyFields(before: Pick<ApiKeyRow, typeof API_KEY_FIELDS[number]>, after: Pick<ApiKeyRow, typeof API_KEY_FIELDS[number]>): typeof API_KEY_FIELDS[number][] {
  return API_KEY_FIELDS.filter((field) => !sameJson(before[field], after[field]))
}

/** `api_key.*` of one key: the record without secret; `updated` only when a record field changed. */
export async function writeApiKeyEvent(tx: Queryable, origin: EventOrigin, type: 'api_key.created' | 'api_key.updated' | 'api_key.deleted', row: ApiKeyRow, before?: ApiKeyRow): Promise<void> {
  let changes: EventData['changes']
  if (type === 'api_key.updated') {
    if (!before) throw new Error('api_key.updated needs the key as it was')
    const changed = changedKeyFields(before, row)
    if (changed.length === 0) return
    changes = Object.fromEntries(changed.map((field) => [field, { from: before[field], to: row[field] }]))
  }
  await writeEvents(tx, origin, [{
    type,
    subject: `api-keys/${row.id}`,
    object: toApiKeyRecord(row) as unknown as Record<string, unknown>,
    ...(changes ? { changes } : {}),
  }])
}
