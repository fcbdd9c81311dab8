import { TransientConflict } from '../store/retry.js'
import type { Queryable, Tx } from '../store/db.js'
import type { AuthContext } from '../core/auth/context.js'
import { scopeCondition } from '../access/scope.js'
import { INSERT_OUTCOME, ORG_ROW, Params, inStatementSlices, insertOutcome, pageReads, selectPage, type CountOptions, type DocRow, type InsertOutcome, type PageQuery, type PageRows } from '../store/sql.js'
import { RELATIONSHIP_COLUMNS, RELATIONSHIP_RECORD_JSON, type RelatedAssetRow, type RelationshipRow } from './mapper.js'
import { eventIdsByRow, eventOriginParams, originOf, type EventOrigin, type WriteContext } from '../outbox/write.js'
import { noteDataWrite } from '../counts/cache.js'
import { relationshipCreatedEventsSql, writeRelationshipEvents } from './events.js'

/** A validated relationship ready to be written (see prepare.ts). */
export interface NewRelationshipRow {
  id: string
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
}

/**
 * The order in which a multi-row INSERT (alias `u`, with an ordinality column `n`) writes
 * relationships: the order of `relationships_unique`, then the item's position. An INSERT that
 * meets a row of a concurrent, uncommitted transaction on that index waits for it; two requests
 * writing overlapping relationships in opposite orders would wait for each other (a deadlock).
 * In one global order the later request simply waits, then finds the duplicates. Among equal
 * rows of one request, the first item's is written and the later ones are the duplicates.
 */
export const RELATIONSHIP_INSERT_ORDER = 'ORDER BY u.source_asset_id, u.relationship_type_key COLLATE "C", u.target_asset_id, u.n'

/**
 * THE insert of relationship rows (docs/architecture.md, "Write paths"), one statement whatever
 * their number (on PGlite one per slice: inStatementSlices), rows as ONE json parameter read by
 * `json_to_recordset` (one native stringify here, one parse in PostgreSQL: faster than one array
 * literal per column). A (type, source, target) that exists already, or repeats an earlier row,
 * is skipped (ON CONFLICT DO NOTHING), never raised: the rows missing from the answer are the
 * duplicates.
 *
 * With `check` (a whole valid POST /bulk/relationships in ONE statement), each row is written
 * only when its ends are live assets of types the relationship type allows, the key may edit its
 * source and see its target; the caller compares the answer with its rows and goes through the
 * items one by one only when some are missing. Each end is fetched by primary key inside an
 * `OFFSET 0` fence and checked outside it (as in `compileWhere` of src/query/where.ts): the plan is one
 * primary-key probe per end, whatever the statistics.
 *
 * Returns the rows written in the order given, rebuilt from the caller's rows, the ids the
 * conflict skipped and the statement's timestamp (INSERT_OUTCOME).
 */
export async function insertRelationships(
  tx: Tx,
  ctx: WriteContext & { auth: AuthContext },
  rows: readonly NewRelationshipRow[],
  options: { check?: boolean } = {},
): Promise<RelationshipRow[]> {
  if (rows.length === 0) return []
  const written = await inStatementSlices(tx, rows, (slice) => insertRelationshipSlice(tx, ctx, slice, options))
  await confirmEndsLive(tx, ctx.auth.orgId, written)
  return written
}

/**
 * On PostgreSQL, after the insert: no end of a new relationship was archived meanwhile. The
 * insert read the ends live in its snapshot, and its foreign-key locks (FOR KEY SHARE) do not
 * conflict with an archive's update; an archive locks its rows FOR UPDATE (archiveAssets), so it
 * either waits for this transaction (the relationship is created, then archived with its end) or
 * committed before this statement began, which then sees it: the transaction runs again, and its
 * checks answer the end not found (CONTRACT §2: an archived asset is gone from every V1 write).
 * PGlite runs one transaction at a time.
 */
async function confirmEndsLive(tx: Tx, orgId: string, written: readonly RelationshipRow[]): Promise<void> {
  if (tx.kind !== 'postgres' || written.length === 0) return
  const ends = [...new Set(written.flatMap((r) => [r.source_asset_id, r.target_asset_id]))]
  const archived = await tx.query('SELECT 1 FROM assets WHERE org_id = $1 AND id = ANY($2::uuid[]) AND archived_at IS NOT NULL LIMIT 1', [orgId, ends])
  if (archived.rows.length > 0) throw new TransientConflict('an end of a new relationship was archived while it was created')
}

/**
 * insertRelationships' statement for some of the rows (all of them on PostgreSQL). PGlite's
 * slices go in id order, which is item order (UUIDv7 made per item), so of two equal items the
 * earlier is still the one written.
 */
async function insertRelationshipSlice(
  tx: Tx,
  ctx: WriteContext & { auth: AuthContext },
  rows: readonly NewRelationshipRow[],
  options: { check?: boolean },
): Promise<RelationshipRow[]> {
  const auth = ctx.auth
  const origin = originOf(ctx)
  // The `relationship.created` events are written by the same statement, from the rows it
  // inserted (a duplicate the conflict skipped has none); event ids come with the rows.
  const eventIds = eventIdsByRow(rows)
  const params = new Params([auth.orgId, JSON.stringify(rows.map((row) => ({ ...row, event_id: eventIds.get(row.id) }))), ...eventOriginParams(origin)])
  const recordset = `ROWS FROM (json_to_recordset($2::json) AS (id uuid, relationship_type_key text, source_asset_id uuid, target_asset_id uuid, event_id uuid))
       WITH ORDINALITY AS u(id, relationship_type_key, source_asset_id, target_asset_id, event_id, n)`
  let select = `SELECT $1, u.id, u.relationship_type_key, u.source_asset_id, u.target_asset_id, date_trunc('second', now()), date_trunc('second', now())
     FROM u`
  if (options.check) {
    const editSource = scopeCondition(auth, 's', 'edit', params)
    const seeTarget = scopeCondition(auth, 't', 'view', params)
    const end = (alias: string, column: string) =>
      `CROSS JOIN LATERAL (SELECT ${alias}.* FROM assets ${alias} WHERE ${alias}.org_id = o.org_id AND ${alias}.id = u.${column} OFFSET 0) ${alias}`
    select = `SELECT $1, u.id, rt.key, s.id, t.id, date_trunc('second', now()), date_trunc('second', now())
     FROM ${ORG_ROW} CROSS JOIN u
     JOIN relationship_types rt ON rt.org_id = $1 AND rt.key = u.relationship_type_key
     ${end('s', 'source_asset_id')}
     ${end('t', 'target_asset_id')}
     WHERE s.archived_at IS NULL AND t.archived_at IS NULL
       AND (cardinality(rt.source_asset_type_keys) = 0 OR s.asset_type_key = ANY(rt.source_asset_type_keys))
       AND (cardinality(rt.target_asset_type_keys) = 0 OR t.asset_type_key = ANY(rt.target_asset_type_keys))
       AND ${editSource} AND ${seeTarget}`
  }
  const result = await tx.query<InsertOutcome>(
    `WITH u AS MATERIALIZED (SELECT * FROM ${recordset}),
     ins AS (
       INSERT INTO relationships (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at)
       ${select}
       ${RELATIONSHIP_INSERT_ORDER}
       ON CONFLICT ON CONSTRAINT relationships_unique DO NOTHING
       RETURNING ${RELATIONSHIP_COLUMNS.replaceAll('r.', '')}
     ), ev AS (
       ${relationshipCreatedEventsSql(tx, 'ins', 'u')}
     )
     ${INSERT_OUTCOME}`,
    params.values,
  )
  const { at, skipped } = insertOutcome(result.rows[0]!)
  if (skipped.size < rows.length) noteDataWrite(tx, auth.orgId)
  return rows.flatMap((row) => (skipped.has(row.id) ? [] : [{ ...row, created_at: at, updated_at: at }]))
}

/**
 * THE delete of relationship rows (DELETE /relationships/{id} and the embedded sync): one
 * statement for any number; returns the rows deleted, as they were.
 */
export async function deleteRelationships(tx: Tx, origin: EventOrigin, ids: readonly string[]): Promise<RelationshipRow[]> {
  if (ids.length === 0) return []
  // Rows are locked in one global order (by id) before they are deleted: two syncs deleting
  // overlapping sets, each in its own order, would otherwise deadlock. (Inserts have their own
  // global order, RELATIONSHIP_INSERT_ORDER; a deadlock that remains is retried by the store.)
  const result = await tx.query<RelationshipRow>(
    `WITH locked AS (
       SELECT id FROM relationships WHERE org_id = $1 AND id = ANY($2::uuid[]) ORDER BY id FOR UPDATE
     )
     DELETE FROM relationships r USING locked l, ${ORG_ROW} WHERE r.org_id = o.org_id AND r.id = l.id RETURNING ${RELATIONSHIP_COLUMNS}`,
    [origin.orgId, ids],
  )
  await writeRelationshipEvents(tx, origin, 'relationship.deleted', result.rows)
  return result.rows
}

/** Rows of `relationships r` matching `where` (which carries org, visibility and filters). */
export async function selectRelationships(db: Queryable, where: string, params: Params, lock = false): Promise<RelationshipRow[]> {
  const result = await db.query<RelationshipRow>(
    `SELECT ${RELATIONSHIP_COLUMNS} FROM relationships r WHERE ${where}${lock ? ' FOR UPDATE OF r' : ''}`,
    params.values,
  )
  return result.rows
}

/** How a page of relationships is read: rows, or each record's JSON text (store/sql.ts pageReads). */
const RELATIONSHIP_PAGE_READS = pageReads(RELATIONSHIP_COLUMNS, RELATIONSHIP_RECORD_JSON)

/** One page of relationships and the total, for GET /relationships and relationship search. */
export async function selectRelationshipPage(db: Queryable, q: PageQuery, count: CountOptions, as: 'rows'): Promise<PageRows<RelationshipRow>>
export async function selectRelationshipPage(db: Queryable, q: PageQuery, count: CountOptions, as: 'json'): Promise<PageRows<DocRow>>
export async function selectRelationshipPage(db: Queryable, q: PageQuery, count: CountOptions, as: keyof typeof RELATIONSHIP_PAGE_READS): Promise<PageRows<RelationshipRow | DocRow>> {
  return selectPage<RelationshipRow | DocRow>(db, { ...RELATIONSHIP_PAGE_READS[as], from: 'relationships r', key: 'r' }, q, count)
}

/**
 * The expanded ends of a page of relationships, one statement for the whole page. The callers
 * only ask for ends of relationships already found visible, so no scope is repeated here.
 */
export async function selectRelatedAssets(db: Queryable, orgId: string, ids: readonly string[], withProperties: boolean): Promise<RelatedAssetRow[]> {
  if (ids.length === 0) return []
  const result = await db.query<RelatedAssetRow>(
    `SELECT a.id, a.asset_type_key, a.name, a.created_at, a.updated_at${withProperties ? ', a.properties' : ''}
     FROM assets a WHERE a.org_id = $1 AND a.id = ANY($2::uuid[])`,
    [orgId, [...new Set(ids)]],
  )
  return result.rows
}
