import { describe, expect, it } from 'vitest'
import { compileAnalytics } from '../../../src/analytics/compile.js'
import { parseAnalytics } from '../../../src/analytics/spec.js'
import { columnName, projectionOf } from '../../../src/projection/columns.js'
import { valueKindOf } from '../../../src/metamodel/types.js'
import type { AuthContext } from '../../../src/core/auth/context.js'
import { ORG_ID, givenMetamodel } from '../query/fixtures.js'

/** Pure: an analytics body in, the exact SQL text and values out (no database). */

const mm = givenMetamodel()
const projection = projectionOf(ORG_ID, [...mm.propertiesByKey].flatMap(([key, defs]) =>
  [...new Set(defs.map((d) => valueKindOf(d.type)))].map((kind) => ({ key, kind, column: columnName(kind, key) }))))
const T = `"assets_typed_${ORG_ID.replaceAll('-', '')}"`

function auth(grants: AuthContext['grants'] = [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'view' }]): AuthContext {
  return {
    orgId: ORG_ID, orgKey: 'acme', keyId: 'k', userId: 'u', keyPermission: 'Viewer', ownerPermission: 'Owner', permission: 'Viewer',
    roleKeys: [], grants, rateLimit: { requests: 1, windowSeconds: 1 },
  }
}

function compile(body: unknown, who: AuthContext = auth()) {
  return compileAnalytics(parseAnalytics(body, mm), { orgId: ORG_ID, auth: who, projection })
}

const count = { type: 'count' }

describe('compileAnalytics', () => {
  it('counts everything in one row without group_by', () => {
    const c = compile({})
    // The projection holds the organization's rows only: no org_id condition, no values.
    expect(c.groups).toEqual({ text: `SELECT count(*) AS m0 FROM ${T} a`, values: [] })
    expect(c.breakdown).toBeNull()
  })

  it('groups by a text property as stored, then folds "" into the NULL group: benchmark (b)', () => {
    const c = compile({ measures: [count, { type: 'average', field: 'properties.memory_gb' }], group_by: ['properties.environment'] })
    expect(c.groups).toEqual({
      text: `SELECT NULLIF(s.d0, '') AS g0, COALESCE(sum(s.n), 0) AS m0, COALESCE(sum(s.s1) / NULLIF(sum(s.c1), 0), 0) AS m1`
        + ` FROM (SELECT a."t_environment" AS d0, count(*) AS n, sum(a."n_memory_gb") AS s1, count(a."n_memory_gb") AS c1 FROM ${T} a GROUP BY a."t_environment") s`
        + ` GROUP BY NULLIF(s.d0, '') ORDER BY NULLIF(s.d0, '') ASC NULLS LAST LIMIT 10001`,
      values: [],
    })
    expect(c.groupTypes).toEqual(['text'])
  })

  it('counts distinct values by hashing one row per value first: benchmark (c)', () => {
    expect(compile({ measures: [{ type: 'count_distinct', field: 'properties.owner' }] }).groups).toEqual({
      text: `SELECT count(NULLIF(s.x, '')) AS m0 FROM (SELECT a."t_owner" AS x FROM ${T} a GROUP BY a."t_owner") s`,
      values: [],
    })
  })

  it('carries count, sum and average as partial sums beside one distinct field', () => {
    const body = {
      measures: [count, { type: 'count_distinct', field: 'asset_type_key' }, { type: 'sum', field: 'properties.cpu_count' }, { type: 'average', field: 'properties.memory_gb', as: 'avg' }],
      group_by: ['access_domain_key'],
    }
    expect(compile(body).groups.text).toBe(
      'SELECT s.d0 AS g0, COALESCE(sum(s.n), 0) AS m0, count(s.x) AS m1, COALESCE(sum(s.s2), 0) AS m2, COALESCE(sum(s.s3) / NULLIF(sum(s.c3), 0), 0) AS m3'
      + ' FROM (SELECT a."access_domain_key" AS d0, a."asset_type_key" AS x, count(*) AS n, sum(a."n_cpu_count") AS s2, sum(a."n_memory_gb") AS s3, count(a."n_memory_gb") AS c3'
      + ` FROM ${T} a GROUP BY a."access_domain_key", a."asset_type_key") s`
      + ' GROUP BY s.d0 ORDER BY s.d0 ASC NULLS LAST LIMIT 10001')
  })

  it('falls back to count(DISTINCT …) when two fields are counted distinctly', () => {
    const body = { measures: [{ type: 'count_distinct', field: 'properties.owner' }, { type: 'count_distinct', field: 'name' }, { type: 'sum', field: 'properties.memory_gb' }] }
    expect(compile(body).groups.text).toBe(
      `SELECT count(DISTINCT NULLIF(a."t_owner", '')) AS m0, count(DISTINCT a."name") AS m1, COALESCE(sum(a."n_memory_gb"), 0) AS m2 FROM ${T} a`)
  })

  it('ANDs the filter and the key\'s scope into the WHERE, values in order', () => {
    const who = auth([{ access_domain_key: 'it', asset_type_keys: ['server'], level: 'view' }])
    const body = { filter: { field: 'properties.cpu_count', operator: 'greater_than', value: 8 }, group_by: ['asset_type_key'] }
    expect(compile(body, who).groups).toEqual({
      text: `SELECT a."asset_type_key" AS g0, count(*) AS m0 FROM ${T} a WHERE a."n_cpu_count" > $1`
        + ' AND (a."access_domain_key" = $2 AND a."asset_type_key" = ANY($3::text[]))'
        + ' GROUP BY a."asset_type_key" ORDER BY a."asset_type_key" ASC NULLS LAST LIMIT 10001',
      values: [8, 'it', ['server']],
    })
  })

  it('reads "" as NULL: the NULL group, never a distinct value', () => {
    const c = compile({ measures: [count, { type: 'count_distinct', field: 'properties.owner' }, { type: 'count_distinct', field: 'name' }], group_by: ['properties.owner'] })
    expect(c.groups.text).toBe(
      `SELECT NULLIF(a."t_owner", '') AS g0, count(*) AS m0, count(DISTINCT NULLIF(a."t_owner", '')) AS m1, count(DISTINCT a."name") AS m2 FROM ${T} a`
      + ` GROUP BY NULLIF(a."t_owner", '') ORDER BY NULLIF(a."t_owner", '') ASC NULLS LAST LIMIT 10001`)
  })

  it('counts the distinct options of a multi-select, the other measures over each asset\'s first option row', () => {
    const tags = { type: 'count_distinct', field: 'properties.tags' }
    const x = `LEFT JOIN LATERAL unnest(a."m_tags") WITH ORDINALITY AS x0(v, o) ON TRUE`
    expect(compile({ measures: [tags] }).groups.text).toBe(
      `SELECT count(s.x) AS m0 FROM (SELECT x0.v AS x FROM ${T} a ${x} GROUP BY x0.v) s`)
    expect(compile({ measures: [count, tags, { type: 'average', field: 'properties.memory_gb' }], group_by: ['properties.environment'] }).groups.text).toBe(
      'SELECT s.d0 AS g0, COALESCE(sum(s.n), 0) AS m0, count(s.x) AS m1, COALESCE(sum(s.s2) / NULLIF(sum(s.c2), 0), 0) AS m2'
      + ' FROM (SELECT NULLIF(a."t_environment", \'\') AS d0, x0.v AS x, count(*) FILTER (WHERE COALESCE(x0.o, 1) = 1) AS n,'
      + ' sum(a."n_memory_gb") FILTER (WHERE COALESCE(x0.o, 1) = 1) AS s2, count(a."n_memory_gb") FILTER (WHERE COALESCE(x0.o, 1) = 1) AS c2'
      + ` FROM ${T} a ${x} GROUP BY NULLIF(a."t_environment", ''), x0.v) s`
      + ' GROUP BY s.d0 ORDER BY s.d0 ASC NULLS LAST LIMIT 10001')
    expect(compile({ measures: [count, tags, { type: 'count_distinct', field: 'name' }, { type: 'sum', field: 'properties.memory_gb' }] }).groups.text).toBe(
      'SELECT count(*) FILTER (WHERE COALESCE(x0.o, 1) = 1) AS m0, count(DISTINCT x0.v) AS m1, count(DISTINCT a."name") AS m2,'
      + ` COALESCE(sum(a."n_memory_gb") FILTER (WHERE COALESCE(x0.o, 1) = 1), 0) AS m3 FROM ${T} a ${x}`)
  })

  it('puts an asset in one group per option of a multi-select, and none in the NULL group', () => {
    expect(compile({ group_by: ['properties.tags'] }).groups.text).toBe(
      `SELECT j0.v AS g0, count(*) AS m0 FROM ${T} a LEFT JOIN LATERAL (SELECT DISTINCT u.v FROM unnest(a."m_tags") AS u(v)) j0 ON TRUE`
      + ' GROUP BY j0.v ORDER BY j0.v ASC NULLS LAST LIMIT 10001')
  })

  it('groups by the types of related assets, visible and live, through one hash-joinable subquery', () => {
    const who = auth([{ access_domain_key: 'it', asset_type_keys: ['*'], level: 'view' }])
    const c = compile({ group_by: [{ field: 'related_asset_type_key', relationship_type_key: 'runs_on', direction: 'incoming' }] }, who)
    expect(c.groups).toEqual({
      text: `SELECT j0.v AS g0, count(*) AS m0 FROM ${T} a LEFT JOIN (SELECT DISTINCT r.target_asset_id AS asset_id, ra0.asset_type_key AS v FROM relationships r`
        + ` JOIN ${T} ra0 ON ra0.org_id = r.org_id AND ra0.id = r.source_asset_id AND ra0."access_domain_key" = $2`
        + ' WHERE r.org_id = $3 AND r.relationship_type_key = $4) j0 ON j0.asset_id = a.id'
        + ' WHERE a."access_domain_key" = $1 GROUP BY j0.v ORDER BY j0.v ASC NULLS LAST LIMIT 10001',
      values: ['it', 'it', ORG_ID, 'runs_on'],
    })
  })

  it('buckets timestamps in UTC and dates by interval, shown as text', () => {
    const c = compile({ group_by: [{ field: 'created_at', interval: 'month' }, { field: 'properties.purchased_on', interval: 'quarter' }, 'properties.managed'] })
    const month = `date_trunc('month', a."created_at" AT TIME ZONE 'UTC')`
    const quarter = `date_trunc('quarter', a."d_purchased_on"::timestamp)::date`
    expect(c.groups.text).toBe(
      `SELECT to_char(${month}, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS g0, to_char(${quarter}::timestamp, 'YYYY-MM-DD') AS g1, a."b_managed" AS g2, count(*) AS m0`
      + ` FROM ${T} a GROUP BY ${month}, ${quarter}, a."b_managed"`
      + ` ORDER BY ${month} ASC NULLS LAST, ${quarter} ASC NULLS LAST, a."b_managed" ASC NULLS LAST LIMIT 10001`)
    expect(c.groupTypes).toEqual(['text', 'text', 'boolean'])
  })

  it('reads a key with several kinds as text, and numbers as numbers', () => {
    const c = compile({ group_by: ['properties.size', 'properties.cpu_count'] })
    expect(c.groups.text).toBe(
      `SELECT COALESCE(a."n_size"::text, NULLIF(a."t_size", '')) AS g0, a."n_cpu_count" AS g1, count(*) AS m0 FROM ${T} a`
      + ` GROUP BY COALESCE(a."n_size"::text, NULLIF(a."t_size", '')), a."n_cpu_count"`
      + ` ORDER BY COALESCE(a."n_size"::text, NULLIF(a."t_size", '')) ASC NULLS LAST, a."n_cpu_count" ASC NULLS LAST LIMIT 10001`)
    expect(c.groupTypes).toEqual(['text', 'number'])
  })

  it('groups a key that is a multi-select on some types and a select on others by option, and counts its options', () => {
    const options = `COALESCE(a."m_kind", ARRAY[COALESCE(NULLIF(a."t_kind", ''))])`
    const grouped = compile({ group_by: ['properties.kind'] })
    expect(grouped.groups.text).toBe(
      `SELECT j0.v AS g0, count(*) AS m0 FROM ${T} a LEFT JOIN LATERAL (SELECT DISTINCT u.v FROM unnest(${options}) AS u(v)) j0 ON TRUE`
      + ` GROUP BY j0.v ORDER BY j0.v ASC NULLS LAST LIMIT 10001`)
    const counted = compile({ measures: [{ type: 'count_distinct', field: 'properties.kind' }] })
    expect(counted.groups.text).toBe(`SELECT count(s.x) AS m0 FROM (SELECT x0.v AS x FROM ${T} a LEFT JOIN LATERAL unnest(${options}) WITH ORDINALITY AS x0(v, o) ON TRUE GROUP BY x0.v) s`)
  })

  it('breaks down in a second statement grouped by the groups and the breakdown field', () => {
    const c = compile({ measures: [{ type: 'sum', field: 'properties.memory_gb' }], group_by: ['properties.environment'], breakdown_by: 'properties.tags' })
    expect(c.breakdown).toEqual({
      text: `SELECT NULLIF(s.d0, '') AS g0, s.d1 AS g1, COALESCE(sum(s.s0), 0) AS m0 FROM (SELECT a."t_environment" AS d0, j1.v AS d1, sum(a."n_memory_gb") AS s0`
        + ` FROM ${T} a LEFT JOIN LATERAL (SELECT DISTINCT u.v FROM unnest(a."m_tags") AS u(v)) j1 ON TRUE GROUP BY a."t_environment", j1.v) s`
        + ` GROUP BY NULLIF(s.d0, ''), s.d1 ORDER BY NULLIF(s.d0, '') ASC NULLS LAST, s.d1 ASC NULLS LAST LIMIT 100001`,
      values: [],
    })
    expect(c.breakdownType).toBe('text')
  })

  it('keeps hostile values in the values, never in the text', () => {
    const c = compile({ filter: { field: 'properties.owner', operator: 'equals', value: "x'); DROP TABLE assets;--" } })
    expect(c.groups).toEqual({ text: `SELECT count(*) AS m0 FROM ${T} a WHERE a."t_owner" = $1`, values: ["x'); DROP TABLE assets;--"] })
  })
})
