import type { Queryable, Tx } from '../store/db.js'
import { INSERT_OUTCOME, ORG_ROW, Params, RECORD_JSON_ROWS, inStatementSlices, insertOutcome, pageReads, selectPage, type CountOptions, type DocRow, type InsertOutcome, type PageQuery, type PageRows } from '../store/sql.js'
import type { AssetKey } from '../metamodel/refs.js'
import { keysCondition, selectAssetRefs, type AssetReference } from '../refs/sql.js'
import { ASSET_COLUMNS, ASSET_RECORD_JSON, type AssetRow } from './mapper.js'
import { noteDataWrite } from '../counts/cache.js'
import { eventIdsByRow, eventOriginParams, type EventOrigin } from '../outbox/write.js'
import { assetCreatedEventsSql, assetUpdatedEventsSql, writeAssetEvents } from './events.js'
import { jsonbFingerprintSql } from '../store/jsonb-text.js'

/*
 * The write paths of asset rows: insertAssets, updateAssets and archiveAssets are the only
 * statements that write `assets` (docs/architecture.md, "Write paths"). Each takes the caller's
 * transaction and returns the rows it wrote, so that whatever must follow a write (events) has
 * one place per operation to hook into: each writes its events (assets/events.ts, through src/outbox/write.ts) in the same
 * transaction, one statement for all of them.
 */

export interface NewAssetRow {
  id: string
  asset_type_key: string
  name: string
  access_domain_key: string | null
  properties: Record<string, unknown>
  unique_value: string | null
}

/**
 * THE insert of asset rows, one statement whatever their number (on PGlite one per slice of
 * rows: inStatementSlices, store/sql.ts):
 * - the rows travel as ONE json parameter read by `json_to_recordset`: one native JSON.stringify
 *   here and one JSON parse in PostgreSQL, instead of six array literals that pg escapes element
 *   by element (measured ~1.5× faster than unnest for 10,000 servers); documents are read as
 *   `json` and cast to jsonb once (json_to_recordset's own jsonb column parses them ~2× slower);
 * - `ON CONFLICT … DO NOTHING` on the unique-value index: a value taken by an existing asset
 *   (even one committed by a concurrent request a moment ago) skips its row instead of aborting
 *   the statement; the rows missing from the answer are those clashes;
 * - it returns only the ids it skipped and its timestamp (INSERT_OUTCOME) and rebuilds the
 *   written rows from the caller's, so 10,000 property documents are not sent back and parsed again.
 * Timestamps are whole seconds, as the API shows them. Rows are written (and returned) in the
 * order given.
 */
export async function insertAssets(tx: Tx, origin: EventOrigin, rows: readonly NewAssetRow[]): Promise<AssetRow[]> {
  if (rows.length === 0) return []
  return inStatementSlices(tx, rows, (slice) => insertAssetSlice(tx, origin, slice))
}

/** insertAssets' statement for some of the rows (all of them on PostgreSQL). */
async function insertAssetSlice(tx: Tx, origin: EventOrigin, rows: readonly NewAssetRow[]): Promise<AssetRow[]> {
  const orgId = origin.orgId
  // The `asset.created` events are written by the same statement, from the rows it inserted (a
  // second INSERT in a CTE): the property documents are not sent nor parsed twice, and a row the
  // conflict skipped has no event. Event ids come with the rows (eventIdsByRow: item order).
  const eventIds = eventIdsByRow(rows)
  const result = await tx.query<InsertOutcome>(
    `WITH u AS MATERIALIZED (
       SELECT * FROM json_to_recordset($2::json)
         AS u(id uuid, asset_type_key text, name text, access_domain_key text, properties json, unique_value text, event_id uuid)
     ), ins AS (
       INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
       SELECT $1, u.id, u.asset_type_key, u.name, u.access_domain_key, u.properties::jsonb, u.unique_value,
              date_trunc('second', now()), date_trunc('second', now())
       FROM u
       ON CONFLICT (org_id, asset_type_key, unique_value) WHERE archived_at IS NULL AND unique_value IS NOT NULL
       DO NOTHING
       RETURNING ${ASSET_COLUMNS.replaceAll('a.', '')}
     ), ev AS (
       ${assetCreatedEventsSql(tx, 'ins', 'u')}
     )
     ${INSERT_OUTCOME}`,
    [orgId, JSON.stringify(rows.map((row) => ({ ...row, event_id: eventIds.get(row.id) }))), ...eventOriginParams(origin)],
  )
  const { at, skipped } = insertOutcome(result.rows[0]!)
  if (skipped.size < rows.length) noteDataWrite(tx, orgId)
  return rows.flatMap((row) => {
    if (skipped.has(row.id)) return []
    const { unique_value: _, ...rest } = row
    return [{ ...rest, created_at: at, updated_at: at }]
  })
}

/** One asset's change: every item naming it, folded in request order. */
export interface AssetChange {
  id: string
  /** null: unchanged. */
  name: string | null
  set_domain: boolean
  access_domain_key: string | null
  /** true: `props` replace the stored properties (upsert); false: they merge into them (PATCH). */
  replace: boolean
  /** Properties to set, and keys to clear. */
  props: Record<string, unknown>
  cleared: string[]
  set_unique: boolean
  unique_value: string | null
}

/** What updateAssets answers: the rows written as they are now, or their ids alone. */
export type UpdateAnswer = 'rows' | 'ids'
export type UpdatedAsset<A extends UpdateAnswer> = A extends 'rows' ? AssetRow : { id: string }

/**
 * THE update of asset rows, one statement for any number of them (on PGlite one per slice:
 * inStatementSlices), rows as one json parameter.
 * Properties merge key by key in SQL on the current row (`(properties || props) - cleared`), or
 * replace it, so the stored documents never travel to the service and back; the callers lock the
 * rows first, so nothing of a concurrent request is lost. Each stored row is fetched by its
 * whole primary key inside an `OFFSET 0` fence (as insertRelationships fetches its ends): one
 * probe per item whatever the statistics say. A plain join, even through ORG_ROW (store/sql.ts),
 * was planned with stale statistics (PGlite between the bulks of a series, before the keeper's
 * ANALYZE) as a scan of all the organization's rows hashed against the items: 80,000 rows read
 * for a PATCH of 10,000, 265 ms to the join's last row where the probes took 135-150 ms.
 *
 * The `asset.updated` events are written by the same statement (a second INSERT in a CTE), their
 * `changes` computed in SQL from the row as it was (a self-join reads the statement's snapshot,
 * before the write) and as it is: neither document travels to the service for it.
 *
 * A multi-select set to the options it holds, in another order, keeps its stored order
 * (multiSelectsToKeep): it is no change.
 *
 * `skipUnchanged` (upsert): a row whose name, access domain and properties would stay as they
 * are is not written at all (no `updated_at` change) and is missing from the answer.
 * `releaseUnique`: assets whose unique values change and may swap (a → b, b → a): the unique
 * index is checked row by row, so their old values are released first, in one statement.
 * `answer`: the rows written as they are now (`'rows'`, the default: a single write answers its
 * record), or their ids alone (`'ids'`: bulks answer ids, and 10,000 documents sent back and
 * parsed for nothing cost more than the rest of the answer).
 */
export async function updateAssets<A extends UpdateAnswer = 'rows'>(
  tx: Tx,
  origin: EventOrigin,
  changes: readonly AssetChange[],
  options: { skipUnchanged?: boolean; releaseUnique?: readonly string[]; answer?: A } = {},
): Promise<UpdatedAsset<A>[]> {
  if (changes.length === 0) return []
  if (options.releaseUnique && options.releaseUnique.length > 1) {
    await tx.query('UPDATE assets SET unique_value = NULL WHERE org_id = $1 AND id = ANY($2::uuid[])', [origin.orgId, options.releaseUnique])
  }
  return inStatementSlices(tx, changes, (slice) => updateAssetSlice(tx, origin, slice, options))
}

/** updateAssets' statement for some of the changes (all of them on PostgreSQL). */
async function updateAssetSlice<A extends UpdateAnswer>(
  tx: Tx,
  origin: EventOrigin,
  changes: readonly AssetChange[],
  options: { skipUnchanged?: boolean; answer?: A },
): Promise<UpdatedAsset<A>[]> {
  const orgId = origin.orgId
  const eventIds = eventIdsByRow(changes)
  const result = await tx.query<Record<string, unknown> & { changed: number }>(
    `WITH upd AS (
       UPDATE assets AS a SET name = n.name, access_domain_key = n.access_domain_key, properties = n.properties,
              unique_value = n.unique_value, updated_at = date_trunc('second', now())
       FROM (
         SELECT b.org_id, b.id, b.name AS b_name, b.access_domain_key AS b_access_domain_key, b.properties AS b_properties, u.event_id, u.diff_keys,
                coalesce(u.name, b.name) AS name,
                CASE WHEN u.set_domain THEN u.access_domain_key ELSE b.access_domain_key END AS access_domain_key,
                CASE WHEN u.sets IS NULL THEN m.properties
                     ELSE m.properties || coalesce((SELECT jsonb_object_agg(k, b.properties -> k) FROM json_array_elements_text(u.sets) k
                                                    WHERE (b.properties -> k) @> (m.properties -> k) AND (m.properties -> k) @> (b.properties -> k)), '{}') END AS properties,
                CASE WHEN u.set_unique THEN u.unique_value ELSE b.unique_value END AS unique_value
         FROM ${ORG_ROW}
         CROSS JOIN json_to_recordset($2::json) AS u(id uuid, name text, set_domain boolean, access_domain_key text, replace boolean,
                                              props json, cleared text[], set_unique boolean, unique_value text, event_id uuid, diff_keys json, sets json)
         CROSS JOIN LATERAL (SELECT b.* FROM assets b WHERE b.org_id = o.org_id AND b.id = u.id OFFSET 0) b
         -- The new document, computed once (the fence keeps it from being inlined at each use).
         CROSS JOIN LATERAL (SELECT CASE WHEN u.replace THEN u.props::jsonb ELSE b.properties || u.props::jsonb END - coalesce(u.cleared, '{}') AS properties OFFSET 0) m
         WHERE b.archived_at IS NULL
       ) n
       WHERE a.org_id = n.org_id AND a.id = n.id
         ${options.skipUnchanged ? 'AND (n.name, n.access_domain_key, n.properties) IS DISTINCT FROM (n.b_name, n.b_access_domain_key, n.b_properties)' : ''}
       RETURNING ${ASSET_COLUMNS}, n.b_name, n.b_access_domain_key, n.b_properties, n.diff_keys, n.event_id
     ), ev AS (
       ${assetUpdatedEventsSql(tx, 'upd')}
     )
     SELECT ${options.answer === 'ids' ? 'id' : 'id, asset_type_key, name, access_domain_key, properties, created_at, updated_at'}, (SELECT count(*) FROM ev)::int AS changed FROM upd`,
    // diff_keys: a merge can change only the property keys it sets or clears; the events compare those alone.
    // Arrays stay json unless a text[] is needed: json_to_recordset builds each text[] column value
    // through a per-row array conversion that cost as much as the rest of the row (10,000 rows of a
    // bulk PATCH: 188 → 93 ms for the recordset with `cleared` null when empty and `diff_keys` json).
    [orgId, JSON.stringify(changes.map((change) => ({
      ...change,
      cleared: change.cleared.length === 0 ? null : change.cleared,
      event_id: eventIds.get(change.id),
      diff_keys: change.replace ? null : [...Object.keys(change.props), ...change.cleared],
      sets: multiSelectsToKeep(change.props),
    }))), ...eventOriginParams(origin)],
  )
  // A row rewritten with its own values gets no event and changes no remembered count.
  if ((result.rows[0]?.changed ?? 0) > 0) noteDataWrite(tx, orgId)
  // The columns selected are those of `answer`.
  return result.rows.map(({ changed: _, ...row }) => row) as unknown as UpdatedAsset<A>[]
}

/**
 * The multi-selects a change sets with two values or more (the only arrays properties hold): a
 * multi-select is a set, so one sent in another order than the stored one holds the same options,
 * and the stored array is kept (updateAssets). A nightly sync whose source lists tags in no fixed
 * order then finds its assets unchanged, writes nothing and emits nothing. Null when none.
 */
function multiSelectsToKeep(props: Record<string, unknown>): string[] | null {
  let keys: string[] | null = null
  for (const key in props) {
    const value = props[key]
    if (Array.isArray(value) && value.length > 1) (keys ??= []).push(key)
  }
  return keys
}

/** A live asset as an upsert that replaces finds it (selectReplaced). */
export interface ReplacedAsset extends AssetReference {
  name: string
  /** Its properties' fingerprint (store/jsonb-text.ts jsonbFingerprintSql): jsonbMatches tells equal values. */
  fingerprint: string
}

/**
 * The look-up of an upsert that replaces: selectAssetRefs (the same statement and plan: one
 * probe of the unique index per key), also answering each asset's name and the fingerprint of
 * its properties (their text, or the digest of a large document), so that the caller tells the
 * assets that hold their new values already and leaves them out of the UPDATE: a re-run of
 * 10,000 unchanged assets sends no property document to SQL. A fingerprint that does not match
 * only means "let the UPDATE compare" (updateAssets' skipUnchanged).
 * (A look-up that compared in SQL, the items joined laterally through a fence, was planned with
 * stale statistics as a walk of all the type's assets per key: 40 s for 10,000.)
 */
export async function selectReplaced(db: Queryable, orgId: string, keys: readonly AssetKey[]): Promise<ReplacedAsset[]> {
  return selectAssetRefs<ReplacedAsset>(db, orgId, keys, false, `a.name, ${jsonbFingerprintSql('a.properties')} AS fingerprint`)
}

/**
 * THE archive of asset rows (DELETE /assets/{id}); returns the rows archived, as they were. The
 * rows are locked FOR UPDATE first, in id order: stronger than the update's own lock, it waits
 * for the transactions creating relationships to them (their foreign keys hold FOR KEY SHARE) and
 * makes those that come later see the archive (relationships/sql.ts confirmEndsLive).
 */
export async function archiveAssets(tx: Tx, origin: EventOrigin, ids: readonly string[]): Promise<AssetRow[]> {
  if (ids.length === 0) return []
  const result = await tx.query<AssetRow>(
    `WITH locked AS (SELECT id FROM assets WHERE org_id = $1 AND id = ANY($2::uuid[]) AND archived_at IS NULL ORDER BY id FOR UPDATE)
     UPDATE assets a SET archived_at = now() FROM locked l WHERE a.org_id = $1 AND a.id = l.id
     RETURNING ${ASSET_COLUMNS}`,
    [origin.orgId, ids],
  )
  await writeAssetEvents(tx, origin, 'asset.archived', result.rows)
  return result.rows
}

/**
 * Finds live assets, whole records, by UUID or by composite key in one statement; `lock` as in
 * `selectAssetRefs` (refs/sql.ts), which reads only what access checks need.
 */
export async function selectAssetsByKeys(db: Queryable, orgId: string, keys: readonly AssetKey[], lock = false): Promise<(AssetRow & { unique_value: string | null })[]> {
  const [only] = keys
  if (keys.length === 1 && only && 'id' in only && !lock) {
    // The hot path of GET /assets/{id}: one fixed text, run as a prepared statement.
    const result = await db.query<AssetRow & { unique_value: string | null }>(
      `SELECT ${ASSET_COLUMNS}, a.unique_value FROM assets a WHERE a.org_id = $1 AND a.id = $2 AND a.archived_at IS NULL`,
      [orgId, only.id],
      { prepare: 'kbis_asset_by_id' },
    )
    return result.rows
  }
  const params = new Params([orgId])
  const cond = keysCondition(keys, params)
  if (cond === null) return []
  const result = await db.query<AssetRow & { unique_value: string | null }>(
    `SELECT ${ASSET_COLUMNS}, a.unique_value FROM assets a
     WHERE a.org_id = $1 AND a.archived_at IS NULL AND ${cond}
     ORDER BY a.id${lock ? ' FOR NO KEY UPDATE' : ''}`,
    params.values,
  )
  return result.rows
}

/** How a page of assets is read: rows, or each record's JSON text (store/sql.ts pageReads). */
export const ASSET_PAGE_READS = pageReads(ASSET_COLUMNS, ASSET_RECORD_JSON)

/** One page of assets and its count, for GET /assets (deferred join on the asset's key). */
export async function selectAssetPage(db: Queryable, q: PageQuery, count: CountOptions, as: 'rows'): Promise<PageRows<AssetRow>>
export async function selectAssetPage(db: Queryable, q: PageQuery, count: CountOptions, as: 'json'): Promise<PageRows<DocRow>>
export async function selectAssetPage(db: Queryable, q: PageQuery, count: CountOptions, as: keyof typeof ASSET_PAGE_READS): Promise<PageRows<AssetRow | DocRow>> {
  return selectPage<AssetRow | DocRow>(db, { ...ASSET_PAGE_READS[as], from: 'assets a', key: 'a' }, q, count)
}

/** An archived asset as the console lists it: the record's columns plus when it was archived. */
export interface ArchivedAssetRow extends AssetRow {
  archived_at: Date | string
  unique_value: string | null
}

/**
 * THE restore of archived asset rows (console only, CONTRACT §15): clears `archived_at`, so the
 * asset and every relationship whose other end is live reappear (archiving leaves relationships
 * in place). The live counters and the typed projection follow by their triggers. A unique value
 * a live asset holds now makes the statement fail on `assets_unique_prop` (the caller checks
 * first, to name the value). Returns the rows restored, as they are now.
 */
export async function restoreAssets(tx: Tx, origin: EventOrigin, ids: readonly string[]): Promise<AssetRow[]> {
  if (ids.length === 0) return []
  const result = await tx.query<AssetRow>(
    `UPDATE assets a SET archived_at = NULL, updated_at = date_trunc('second', now())
     WHERE a.org_id = $1 AND a.id = ANY($2::uuid[]) AND a.archived_at IS NOT NULL
     RETURNING ${ASSET_COLUMNS}`,
    [origin.orgId, ids],
  )
  await writeAssetEvents(tx, origin, 'asset.restored', result.rows)
  return result.rows
}

/**
 * THE permanent deletion of archived asset rows (console only). Their relationships must be
 * gone first (deleteRelationships, relationships/sql.ts): the foreign keys refuse otherwise.
 * Returns the rows deleted, as they were.
 */
export async function deleteAssetsPermanently(tx: Tx, origin: EventOrigin, ids: readonly string[]): Promise<AssetRow[]> {
  if (ids.length === 0) return []
  const result = await tx.query<AssetRow>(
    `DELETE FROM assets a WHERE a.org_id = $1 AND a.id = ANY($2::uuid[]) AND a.archived_at IS NOT NULL
     RETURNING ${ASSET_COLUMNS}`,
    [origin.orgId, ids],
  )
  await writeAssetEvents(tx, origin, 'asset.deleted', result.rows)
  return result.rows
}

/** Archived assets by id, locked for a restore or deletion (`lock`). */
export async function selectArchivedAssets(db: Queryable, orgId: string, ids: readonly string[], lock = false): Promise<ArchivedAssetRow[]> {
  const result = await db.query<ArchivedAssetRow>(
    `SELECT ${ASSET_COLUMNS}, a.archived_at, a.unique_value FROM assets a
     WHERE a.org_id = $1 AND a.id = ANY($2::uuid[]) AND a.archived_at IS NOT NULL
     ORDER BY a.id${lock ? ' FOR UPDATE' : ''}`,
    [orgId, ids],
  )
  return result.rows
}

/** One page of archived assets, most recently archived first (the console's list). */
export async function selectArchivedAssetPage(db: Queryable, q: PageQuery): Promise<PageRows<ArchivedAssetRow>> {
  return selectPage<ArchivedAssetRow>(db, {
    select: `${ASSET_COLUMNS}, a.archived_at, a.unique_value`, from: 'assets a', key: 'a',
    jsonRows: { timestamps: [...RECORD_JSON_ROWS.timestamps, 'archived_at'] },
  }, q)
}

/** The live asset of this type holding this unique value, if any. */
export async function selectLiveHolder(db: Queryable, orgId: string, type: string, value: string): Promise<{ id: string; name: string } | null> {
  const result = await db.query<{ id: string; name: string }>(
    'SELECT id, name FROM assets WHERE org_id = $1 AND asset_type_key = $2 AND unique_value = $3 AND archived_at IS NULL',
    [orgId, type, value],
  )
  return result.rows[0] ?? null
}

/** Ids of every relationship with this asset at either end, whatever the other end's state. */
export async function selectRelationshipIdsOf(db: Queryable, orgId: string, ids: readonly string[]): Promise<string[]> {
  const result = await db.query<{ id: string }>(
    `SELECT r.id FROM relationships r WHERE r.org_id = $1 AND r.source_asset_id = ANY($2::uuid[])
     UNION SELECT r.id FROM relationships r WHERE r.org_id = $1 AND r.target_asset_id = ANY($2::uuid[])
     ORDER BY 1`,
    [orgId, ids],
  )
  return result.rows.map((r) => r.id)
}
