import type pg from 'pg'
import { to as copyTo } from 'pg-copy-streams'
import { isStoreUnreachable } from './unreachable.js'

/**
 * `COPY (<select>) TO STDOUT` of a SELECT of one text column, on PostgreSQL: the output as the
 * server writes it, one value a line, in the chunks it arrived in (a line may span two), with no
 * row parsing in this process (decision 0014).
 *
 * COPY takes no bind parameters, and values never enter SQL text here. Each `$n` is replaced by
 * `(SELECT current_setting('kbis.copy_n')::<type>)` (evaluated once, as an init plan), the value
 * goes in by `set_config` with a bind parameter in the same read-only transaction, and the type
 * is the one PostgreSQL infers for `$n` in the same statement (PREPARE, read back from
 * pg_prepared_statements): the statement means exactly what it means with parameters. The text
 * must hold no `$n` other than its parameters (as any statement with parameters).
 *
 * The CSV format with a delimiter and a quote that JSON never holds unescaped (\x02, \x01) writes
 * every value as it is: no quoting, no escaping, NULL as an empty line.
 */
export async function copyLines(client: pg.ClientBase, select: string, params: readonly unknown[]): Promise<Buffer[]> {
  await client.query('BEGIN READ ONLY')
  try {
    const text = params.length === 0 ? select : await bindBySettings(client, select, params)
    const chunks: Buffer[] = []
    const stream = client.query(copyTo(`COPY (${text}) TO STDOUT WITH (FORMAT csv, DELIMITER E'\\x02', QUOTE E'\\x01')`))
    for await (const chunk of stream) chunks.push(chunk as Buffer)
    answered(stream)
    await client.query('COMMIT')
    return chunks
  } catch (err) {
    // A connection that stopped answering: no statement more on it (each would wait out the
    // answer timeout too); the caller drops it.
    if (isStoreUnreachable(err)) throw err
    await client.query('ROLLBACK').catch(() => undefined)
    // A statement prepared before a failure would make the next probe on this connection fail.
    await client.query(`DEALLOCATE ${PROBE}`).catch(() => undefined)
    throw err
  }
}

/**
 * Tells pg that a COPY has its answer. With an answer timeout (StoreOptions.answerTimeoutMs) pg
 * starts a timer for every statement and stops it in the statement's callback, which a COPY
 * stream never calls: the timer then fired after the COPY had ended, and failed a stream already
 * read with "Query read timeout".
 */
function answered(stream: object): void {
  (stream as { callback?: (err: null) => void }).callback?.(null)
}

const PARAMETER = /\$(\d+)/g
const PROBE = 'kbis_copy_parameter_types'

async function bindBySettings(client: pg.ClientBase, select: string, params: readonly unknown[]): Promise<string> {
  // One round trip: the statement is prepared (never run) for its parameters' types, then dropped.
  const results = await client.query(
    `PREPARE ${PROBE} AS ${select}; SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = '${PROBE}'; DEALLOCATE ${PROBE}`,
  ) as unknown as pg.QueryResult<{ types: string[] }>[]
  const types = results[1]!.rows[0]!.types
  const bound = params.flatMap((value, i) => (value === null || value === undefined ? [] : [i]))
  if (bound.length > 0) {
    await client.query(`SELECT ${bound.map((i, j) => `set_config('kbis.copy_${i + 1}', $${j + 1}, true)`).join(', ')}`, bound.map((i) => params[i]))
  }
  return select.replace(PARAMETER, (_, n: string) => {
    const i = Number(n) - 1
    const type = types[i]
    if (type === undefined || i >= params.length) throw new Error(`copyLines: $${n} has no parameter`)
    return params[i] === null || params[i] === undefined ? `NULL::${type}` : `(SELECT current_setting('kbis.copy_${n}')::${type})`
  })
}
